package dev.redmutex.shedlock;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockAssert;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;

/**
 * Line-oriented ShedLock peer for redmutex's task-lock tests: a scheduled job run through
 * ShedLock's own {@link LockingTaskExecutor} over one of its real Redis providers (the
 * spring-data-redis one on Lettuce, or the Jedis one: see {@link Backend}), with no Spring
 * context, as an {@code @SchedulerLock} method is run.
 *
 * <pre>
 * java -cp ... dev.redmutex.shedlock.ShedPeer single host:port   [environment]
 * java -cp ... dev.redmutex.shedlock.ShedPeer cluster host:port,... [environment]
 * </pre>
 *
 * <p>Prints {@code ready <hostname>}, then reads {@code <reqId> <thread> <command> [args]} lines
 * and answers each with {@code <reqId> ok [value]} or {@code <reqId> err <Class> <message>}, as
 * the Redisson peer does (tests/interop/README.md). Commands, times in milliseconds:
 *
 * <ul>
 *   <li>{@code run <name> <atMost> <atLeast> <holdMs> <insideKey>}: executeWithLock of a job
 *       that calls LockAssert.assertLocked(), marks itself inside with {@code SET insideKey java
 *       NX}, sleeps holdMs and deletes the mark. Replies {@code ran}, {@code skipped} (the
 *       executor did not run it: locked elsewhere), or {@code overlap} (it ran, but someone
 *       else's mark was there: two jobs at once).
 *   <li>{@code begin <name> <atMost> <atLeast>}: executeWithLock of a job that stays inside
 *       until {@code end <name>}; replies {@code ran} or {@code skipped} when it is over.
 *   <li>{@code entered <name> <timeoutMs>}: waits for the job of {@code begin} to be inside;
 *       {@code true} or {@code false}.
 *   <li>{@code end <name>}: lets that job finish.
 *   <li>{@code assertoutside}: LockAssert.assertLocked() outside any job (an error reply).
 *   <li>{@code quit}: replies {@code ok} and exits.
 * </ul>
 */
public final class ShedPeer {
    private static final Object OUT_LOCK = new Object();
    private static PrintStream out;
    private static final Map<String, ExecutorService> THREADS = new HashMap<>();
    private static final Map<String, CountDownLatch> ENTERED = new ConcurrentHashMap<>();
    private static final Map<String, CountDownLatch> RELEASE = new ConcurrentHashMap<>();

    private static LockingTaskExecutor executor;
    private static Backend backend;

    private ShedPeer() {}

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: ShedPeer single|cluster host:port[,host:port...] [environment]");
            System.exit(2);
        }
        String environment = args.length == 3 ? args[2] : "default";
        if (!args[0].equals("single") && !args[0].equals("cluster")) {
            System.err.println("ShedPeer: unknown mode " + args[0]);
            System.exit(2);
        }
        backend = Backend.open(args[0].equals("cluster"), args[1].split(","), environment);
        executor = new DefaultLockingTaskExecutor(backend.provider());
        emit("ready " + InetAddress.getLocalHost().getHostName());

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            handle(line.trim());
        }
        System.exit(0);
    }

    static void emit(String line) {
        synchronized (OUT_LOCK) {
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    static void handle(String line) {
        if (line.isEmpty() || line.startsWith("#")) {
            return;
        }
        String[] tok = line.split("\\s+");
        String reqId = tok[0];
        if (tok.length < 3) {
            emit(reqId + " err IllegalArgumentException expected: <reqId> <thread> <command> [args...]");
            return;
        }
        String cmd = tok[2];
        String[] args = Arrays.copyOfRange(tok, 3, tok.length);
        if (cmd.equals("quit")) {
            emit(reqId + " ok");
            System.exit(0);
        }
        ExecutorService thread = THREADS.computeIfAbsent(tok[1], name -> Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        }));
        thread.execute(() -> {
            try {
                String value = execute(cmd, args);
                emit(reqId + " ok" + (value == null ? "" : " " + value));
            } catch (Throwable t) {
                String message = String.valueOf(t.getMessage()).replace('\n', ' ');
                emit(reqId + " err " + t.getClass().getSimpleName() + " " + message);
            }
        });
    }

    static LockConfiguration config(String name, String atMost, String atLeast) {
        return new LockConfiguration(
                Instant.now(), name, Duration.ofMillis(Long.parseLong(atMost)), Duration.ofMillis(Long.parseLong(atLeast)));
    }

    static String execute(String cmd, String[] a) throws Throwable {
        switch (cmd) {
            case "run": {
                need(a, 5, "run <name> <atMost> <atLeast> <holdMs> <insideKey>");
                AtomicBoolean ran = new AtomicBoolean();
                AtomicBoolean overlap = new AtomicBoolean();
                long hold = Long.parseLong(a[3]);
                String inside = a[4];
                executor.executeWithLock((LockingTaskExecutor.Task) () -> {
                    LockAssert.assertLocked();
                    ran.set(true);
                    boolean alone = backend.mark(inside);
                    overlap.set(!alone);
                    Thread.sleep(hold);
                    if (alone) {
                        backend.unmark(inside);
                    }
                }, config(a[0], a[1], a[2]));
                return !ran.get() ? "skipped" : overlap.get() ? "overlap" : "ran";
            }
            case "begin": {
                need(a, 3, "begin <name> <atMost> <atLeast>");
                CountDownLatch entered = latch(ENTERED, a[0]);
                CountDownLatch release = latch(RELEASE, a[0]);
                AtomicBoolean ran = new AtomicBoolean();
                try {
                    executor.executeWithLock((LockingTaskExecutor.Task) () -> {
                        LockAssert.assertLocked();
                        ran.set(true);
                        entered.countDown();
                        release.await();
                    }, config(a[0], a[1], a[2]));
                } finally {
                    ENTERED.remove(a[0]);
                    RELEASE.remove(a[0]);
                }
                return ran.get() ? "ran" : "skipped";
            }
            case "entered": {
                need(a, 2, "entered <name> <timeoutMs>");
                // Either side may come first: both take the one latch of the name.
                return String.valueOf(latch(ENTERED, a[0]).await(Long.parseLong(a[1]), TimeUnit.MILLISECONDS));
            }
            case "end": {
                need(a, 1, "end <name>");
                CountDownLatch release = RELEASE.get(a[0]);
                if (release == null) {
                    throw new IllegalStateException("no job of " + a[0] + " is inside");
                }
                release.countDown();
                return null;
            }
            case "assertoutside":
                LockAssert.assertLocked();
                return null;
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    static CountDownLatch latch(Map<String, CountDownLatch> map, String name) {
        return map.computeIfAbsent(name, n -> new CountDownLatch(1));
    }

    static void need(String[] a, int n, String usage) {
        if (a.length != n) {
            throw new IllegalArgumentException("usage: " + usage);
        }
    }
}
