package dev.redmutex.shedlock;

import java.lang.reflect.InvocationTargetException;

import net.javacrumbs.shedlock.core.LockProvider;

/**
 * One ShedLock Redis provider and the connections it runs on. The build compiles exactly
 * one implementation ({@code SpringBackend} or {@code JedisBackend}, chosen by the
 * {@code shedlock.provider} property in pom.xml); {@link #open} finds whichever is there.
 */
interface Backend {
    /** The provider, as an application would build it for {@code environment}. */
    LockProvider provider();

    /** {@code SET key java NX PX 60000} on the provider's client: whether it was set. */
    boolean mark(String key);

    /** {@code DEL key} on the provider's client. */
    void unmark(String key);

    static Backend open(boolean cluster, String[] nodes, String environment) throws Exception {
        for (String name : new String[] {"SpringBackend", "JedisBackend"}) {
            Class<?> type;
            try {
                type = Class.forName("dev.redmutex.shedlock." + name);
            } catch (ClassNotFoundException absent) {
                continue;
            }
            try {
                return (Backend) type.getDeclaredConstructor(boolean.class, String[].class, String.class)
                        .newInstance(cluster, nodes, environment);
            } catch (InvocationTargetException e) {
                throw e.getCause() instanceof Exception ex ? ex : e;
            }
        }
        throw new IllegalStateException("this build has no backend");
    }
}
