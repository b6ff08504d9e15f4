package dev.redmutex.interop;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.UndeclaredThrowableException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RExpirable;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Line-oriented Redisson peer used by redmutex's interop tests.
 *
 * <p>Reads {@code <reqId> <threadName> <command> [args...]} lines from stdin, runs each command on
 * a dedicated long-lived thread per threadName and writes exactly one
 * {@code <reqId> ok [value]} or {@code <reqId> err <Exception> <message>} line per command to
 * stdout. See tests/interop/README.md for the full contract.
 */
public final class Peer {

    /** On stdin EOF, how long to wait for in-flight commands before exiting. */
    private static final long EOF_DRAIN_MS = 5_000;

    private static final Object OUT_LOCK = new Object();
    private static PrintStream out;
    private static volatile boolean quitting;
    private static RedissonClient client;

    /** threadName -> single-thread executor; only touched by the stdin reader thread. */
    private static final Map<String, ExecutorService> THREADS = new HashMap<>();

    private Peer() {}

    public static void main(String[] args) throws Exception {
        // Keep the protocol stream private: anything else printing to System.out goes to stderr.
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);

        if (args.length >= 1 && args[0].equals("--check-yaml")) {
            checkYaml(Arrays.copyOfRange(args, 1, args.length));
            out.flush();
            return;
        }
        if (args.length == 1 && args[0].equals("--yaml-keys")) {
            yamlKeys();
            out.flush();
            return;
        }
        Config config;
        String watchdogMs;
        if (args.length == 3 && args[0].equals("--yaml")) {
            // Any topology Redisson's YAML format describes (cluster, sentinel, ...).
            config = Config.fromYAML(new File(args[1]));
            watchdogMs = args[2];
        } else if (args.length == 2 && !args[0].startsWith("--")) {
            config = new Config();
            config.useSingleServer().setAddress(args[0]);
            watchdogMs = args[1];
        } else {
            System.err.println("usage: Peer <redis-url> <lockWatchdogTimeoutMs>");
            System.err.println("       Peer --yaml <redisson-config.yaml> <lockWatchdogTimeoutMs>");
            System.err.println("       Peer --check-yaml <redisson-config.yaml>...");
            System.err.println("       Peer --yaml-keys");
            System.exit(2);
            return;
        }
        config.setLockWatchdogTimeout(Long.parseLong(watchdogMs));
        client = Redisson.create(config);

        emit("ready " + clientId(client));

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            handleLine(line);
        }
        // EOF: give commands already submitted a chance to reply (bounded), then exit.
        drain(EOF_DRAIN_MS);
        shutdownAndExit();
    }

    // ---------------------------------------------------------------- YAML files

    /**
     * Loads each file with {@code Config.fromYAML(File)}, as a Redisson service would, and
     * prints one line per file: {@code <path> ok} or {@code <path> err <Exception> <message>}.
     * Nothing connects.
     */
    static void checkYaml(String[] files) {
        for (String f : files) {
            try {
                Config.fromYAML(new File(f));
                emit(f + " ok");
            } catch (Throwable t) {
                Throwable c = unwrap(t);
                emit(f + " err " + c.getClass().getSimpleName() + " " + oneLine(c.getMessage()));
            }
        }
    }

    /** Whether a failed load refused a key as unknown (not its value). */
    static boolean unknownKey(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            String m = String.valueOf(c.getMessage());
            if (c.getClass().getSimpleName().equals("UnrecognizedPropertyException")
                    || m.contains("\"property\" is null")
                    || m.contains("No writable property")
                    || m.contains("Unable to find property")) {
                return true;
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return false;
    }

    /**
     * Prints, for the top level and each mode section redmutex reads, the keys this
     * Redisson's {@code Config.fromYAML} accepts there: every bean-style name of the
     * section's class (get/set/is methods, superclasses included), kept when a file that
     * sets it to null loads or fails for another reason than an unknown key (3.x: Jackson's
     * UnrecognizedPropertyException; 4.x: SnakeYAML finding no property).
     */
    static void yamlKeys() throws ClassNotFoundException {
        String[][] sections = {
            {"top", "", "org.redisson.config.Config"},
            {"singleServerConfig", "singleServerConfig", "org.redisson.config.SingleServerConfig"},
            {"clusterServersConfig", "clusterServersConfig", "org.redisson.config.ClusterServersConfig"},
            {"sentinelServersConfig", "sentinelServersConfig", "org.redisson.config.SentinelServersConfig"},
        };
        for (String[] s : sections) {
            java.util.TreeSet<String> names = new java.util.TreeSet<>();
            for (Class<?> k = Class.forName(s[2]); k != null && k != Object.class; k = k.getSuperclass()) {
                for (Method m : k.getDeclaredMethods()) {
                    String n = m.getName();
                    String p = null;
                    if ((n.startsWith("set") || n.startsWith("get")) && n.length() > 3) {
                        p = n.substring(3);
                    } else if (n.startsWith("is") && n.length() > 2) {
                        p = n.substring(2);
                    }
                    if (p != null && Character.isUpperCase(p.charAt(0))) {
                        names.add(Character.toLowerCase(p.charAt(0)) + p.substring(1));
                    }
                }
            }
            List<String> accepted = new ArrayList<>();
            for (String key : names) {
                String yaml = s[1].isEmpty() ? key + ": null\n" : s[1] + ":\n  " + key + ": null\n";
                try {
                    Config.fromYAML(yaml);
                    accepted.add(key);
                } catch (Throwable t) {
                    if (!unknownKey(t)) {
                        accepted.add(key);
                    }
                }
            }
            emit(s[0] + ": " + String.join(" ", accepted));
        }
    }

    /**
     * The UUID Redisson puts in front of ":threadId" in lock hash fields. {@code RedissonClient.getId()}
     * exists (and returns ServiceManager.getId()) in both 3.23.x and 4.x; the reflective path is
     * only a fallback for other releases.
     */
    static String clientId(RedissonClient c) {
        try {
            String id = c.getId();
            if (id != null) {
                return id;
            }
        } catch (Throwable ignored) {
            // fall through
        }
        try {
            Method sm = c.getClass().getMethod("getServiceManager");
            Object manager = sm.invoke(c);
            return (String) manager.getClass().getMethod("getId").invoke(manager);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot determine Redisson client id", e);
        }
    }

    // ---------------------------------------------------------------- output

    static void emit(String line) {
        synchronized (OUT_LOCK) {
            if (quitting) {
                return;
            }
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    static String oneLine(String s) {
        if (s == null) {
            return "";
        }
        return s.replace("\r\n", " ").replace('\n', ' ').replace('\r', ' ').replace('\t', ' ').trim();
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof CompletionException
                        || t instanceof ExecutionException
                        || t instanceof InvocationTargetException
                        || t instanceof UndeclaredThrowableException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static void replyErr(String reqId, Throwable t) {
        Throwable c = unwrap(t);
        StringBuilder sb = new StringBuilder(oneLine(c.getMessage()));
        // Redisson often wraps the interesting exception (e.g. RedisException "Unexpected
        // exception while processing command"); append the cause chain so it is visible.
        int depth = 0;
        for (Throwable cause = c.getCause(); cause != null && cause != c && depth < 5;
                cause = cause.getCause(), depth++) {
            sb.append(sb.length() == 0 ? "" : " ").append("(caused by ")
                    .append(cause.getClass().getSimpleName()).append(": ")
                    .append(oneLine(cause.getMessage())).append(')');
        }
        String msg = sb.toString();
        emit(reqId + " err " + c.getClass().getSimpleName() + (msg.isEmpty() ? "" : " " + msg));
    }

    // ---------------------------------------------------------------- dispatch

    static void handleLine(String raw) {
        String line = raw.trim();
        if (line.isEmpty() || line.startsWith("#")) {
            return;
        }
        String[] tok = line.split("\\s+");
        String reqId = tok[0];
        if (tok.length < 3) {
            emit(reqId + " err IllegalArgumentException expected: <reqId> <threadName> <command> [args...]");
            return;
        }
        String threadName = tok[1];
        String cmd = tok[2];
        String[] args = Arrays.copyOfRange(tok, 3, tok.length);

        if (cmd.equals("quit")) {
            synchronized (OUT_LOCK) {
                emit(reqId + " ok");
                quitting = true; // suppress replies of commands still in flight
            }
            shutdownAndExit();
            return;
        }
        if (cmd.equals("halt")) {
            // Simulated crash: no client shutdown, locks stay in Redis until they expire.
            synchronized (OUT_LOCK) {
                emit(reqId + " ok");
                quitting = true;
            }
            Runtime.getRuntime().halt(0);
        }

        ExecutorService ex = THREADS.computeIfAbsent(threadName, n -> Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, n);
            t.setDaemon(true);
            return t;
        }));
        ex.execute(() -> {
            try {
                String v = execute(cmd, args);
                emit(reqId + " ok" + (v == null ? "" : " " + v));
            } catch (Throwable t) {
                replyErr(reqId, t);
            }
        });
    }

    static void drain(long budgetMs) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
        for (ExecutorService ex : THREADS.values()) {
            ex.shutdown();
        }
        for (ExecutorService ex : THREADS.values()) {
            long left = deadline - System.nanoTime();
            try {
                if (left <= 0 || !ex.awaitTermination(left, TimeUnit.NANOSECONDS)) {
                    return;
                }
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static void shutdownAndExit() {
        quitting = true;
        Thread killer = new Thread(() -> {
            try {
                Thread.sleep(10_000);
            } catch (InterruptedException ignored) {
                // exit below
            }
            Runtime.getRuntime().halt(0);
        }, "peer-exit-guard");
        killer.setDaemon(true);
        killer.start();
        try {
            if (client != null) {
                client.shutdown(0, 2, TimeUnit.SECONDS);
            }
        } catch (Throwable t) {
            System.err.println("peer: client shutdown failed: " + t);
        }
        System.exit(0);
    }

    // ---------------------------------------------------------------- commands

    /** Runs one command on the current (dedicated) thread; returns the reply value or null. */
    static String execute(String cmd, String[] a) throws Exception {
        String kind = "";
        String op = cmd;
        int dot = cmd.indexOf('.');
        if (dot >= 0) {
            kind = cmd.substring(0, dot);
            op = cmd.substring(dot + 1);
        }
        switch (kind) {
            case "":
                switch (op) {
                    case "threadid":
                        arity(cmd, a, 0, 0, "");
                        return Long.toString(Thread.currentThread().getId());
                    case "sleep":
                        arity(cmd, a, 1, 1, "<ms>");
                        Thread.sleep(Long.parseLong(a[0]));
                        return null;
                    case "version":
                        arity(cmd, a, 0, 0, "");
                        return redissonVersion();
                    case "client":
                        arity(cmd, a, 2, 2, "<alias> <redis-url>");
                        return addClient(a[0], a[1]);
                    default:
                        return lockCommand(kind, op, cmd, a);
                }
            case "fair":
            case "read":
            case "write":
            case "fenced":
            case "spin":
            case "nonreentrant":
            case "nrfair":
            case "multi":
            case "redlock":
                return lockCommand(kind, op, cmd, a);
            case "sem":
                return semaphoreCommand(op, cmd, a);
            case "pes":
                return pesCommand(op, cmd, a);
            case "latch":
                return latchCommand(op, cmd, a);
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    static void arity(String cmd, String[] a, int min, int max, String usage) {
        if (a.length < min || a.length > max) {
            throw new IllegalArgumentException("usage: " + cmd + (usage.isEmpty() ? "" : " " + usage));
        }
    }

    static long num(String s) {
        return Long.parseLong(s);
    }

    static RLock lockOf(String kind, String name) {
        switch (kind) {
            case "":
                return client.getLock(name);
            case "fair":
                return client.getFairLock(name);
            case "read":
                return client.getReadWriteLock(name).readLock();
            case "write":
                return client.getReadWriteLock(name).writeLock();
            default:
                return familyLockOf(client, kind, name);
        }
    }

    static void doLock(RLock lock, long lease) {
        if (lease == -1) {
            lock.lock();
        } else {
            lock.lock(lease, TimeUnit.MILLISECONDS);
        }
    }

    static String lockCommand(String kind, String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "lock": {
                arity(cmd, a, 1, 2, "<name> [leaseMs]");
                doLock(lockOf(kind, a[0]), a.length > 1 ? num(a[1]) : -1);
                return null;
            }
            case "trylock": {
                arity(cmd, a, 2, 3, "<name> <waitMs> [leaseMs]");
                RLock lock = lockOf(kind, a[0]);
                long wait = num(a[1]);
                long lease = a.length > 2 ? num(a[2]) : -1;
                boolean r;
                if (wait == -1 && lease == -1) {
                    r = lock.tryLock();
                } else {
                    r = lock.tryLock(Math.max(wait, 0), lease, TimeUnit.MILLISECONDS);
                }
                return Boolean.toString(r);
            }
            case "unlock":
                arity(cmd, a, 1, 1, "<name>");
                lockOf(kind, a[0]).unlock();
                return null;
            case "forceunlock":
                arity(cmd, a, 1, 1, "<name>");
                return Boolean.toString(lockOf(kind, a[0]).forceUnlock());
            case "islocked":
                arity(cmd, a, 1, 1, "<name>");
                return Boolean.toString(lockOf(kind, a[0]).isLocked());
            case "isheld":
                arity(cmd, a, 1, 1, "<name>");
                return Boolean.toString(lockOf(kind, a[0]).isHeldByCurrentThread());
            case "isheldbythread":
                arity(cmd, a, 2, 2, "<name> <threadId>");
                return Boolean.toString(lockOf(kind, a[0]).isHeldByThread(num(a[1])));
            case "holdcount":
                arity(cmd, a, 1, 1, "<name>");
                return Integer.toString(lockOf(kind, a[0]).getHoldCount());
            case "ttl":
                arity(cmd, a, 1, 1, "<name>");
                return Long.toString(lockOf(kind, a[0]).remainTimeToLive());
            case "incr": {
                arity(cmd, a, 3, 4, "<name> <counterKey> <n> [leaseMs]");
                RLock lock = lockOf(kind, a[0]);
                RBucket<String> counter = client.getBucket(a[1], StringCodec.INSTANCE);
                long n = num(a[2]);
                long lease = a.length > 3 ? num(a[3]) : -1;
                for (long i = 0; i < n; i++) {
                    doLock(lock, lease);
                    try {
                        // Deliberately non-atomic read-modify-write: only the lock protects it.
                        String s = counter.get();
                        long v = s == null ? 0 : Long.parseLong(s);
                        counter.set(Long.toString(v + 1));
                    } finally {
                        lock.unlock();
                    }
                }
                return Long.toString(n);
            }
            default:
                return familyLockCommand(kind, op, cmd, a);
        }
    }

    static String semaphoreCommand(String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "trysetpermits": {
                arity(cmd, a, 2, 2, "<name> <permits>");
                RSemaphore s = client.getSemaphore(a[0]);
                return Boolean.toString(s.trySetPermits(Integer.parseInt(a[1])));
            }
            case "acquire": {
                arity(cmd, a, 2, 2, "<name> <permits>");
                client.getSemaphore(a[0]).acquire(Integer.parseInt(a[1]));
                return null;
            }
            case "tryacquire": {
                arity(cmd, a, 3, 3, "<name> <permits> <waitMs>");
                RSemaphore s = client.getSemaphore(a[0]);
                int p = Integer.parseInt(a[1]);
                long wait = num(a[2]);
                boolean r = wait == -1 ? s.tryAcquire(p) : s.tryAcquire(p, wait, TimeUnit.MILLISECONDS);
                return Boolean.toString(r);
            }
            case "release": {
                arity(cmd, a, 2, 2, "<name> <permits>");
                client.getSemaphore(a[0]).release(Integer.parseInt(a[1]));
                return null;
            }
            case "available":
                arity(cmd, a, 1, 1, "<name>");
                return Integer.toString(client.getSemaphore(a[0]).availablePermits());
            default:
                return moreSemaphoreCommand(op, cmd, a);
        }
    }

    static String pesCommand(String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "trysetpermits": {
                arity(cmd, a, 2, 2, "<name> <permits>");
                RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[0]);
                return Boolean.toString(s.trySetPermits(Integer.parseInt(a[1])));
            }
            case "acquire": {
                arity(cmd, a, 1, 2, "<name> [leaseMs]");
                RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[0]);
                long lease = a.length > 1 ? num(a[1]) : -1;
                return lease == -1 ? s.acquire() : s.acquire(lease, TimeUnit.MILLISECONDS);
            }
            case "tryacquire": {
                arity(cmd, a, 2, 3, "<name> <waitMs> [leaseMs]");
                RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[0]);
                long wait = num(a[1]);
                long lease = a.length > 2 ? num(a[2]) : -1;
                String id;
                if (lease == -1) {
                    id = wait == -1 ? s.tryAcquire() : s.tryAcquire(wait, TimeUnit.MILLISECONDS);
                } else {
                    id = s.tryAcquire(Math.max(wait, 0), lease, TimeUnit.MILLISECONDS);
                }
                return id == null ? "null" : id;
            }
            case "release":
                arity(cmd, a, 2, 2, "<name> <permitId>");
                client.getPermitExpirableSemaphore(a[0]).release(a[1]);
                return null;
            case "tryrelease":
                arity(cmd, a, 2, 2, "<name> <permitId>");
                return Boolean.toString(client.getPermitExpirableSemaphore(a[0]).tryRelease(a[1]));
            case "available":
                arity(cmd, a, 1, 1, "<name>");
                return Integer.toString(client.getPermitExpirableSemaphore(a[0]).availablePermits());
            default:
                return morePesCommand(op, cmd, a);
        }
    }

    static String latchCommand(String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "trysetcount": {
                arity(cmd, a, 2, 2, "<name> <count>");
                RCountDownLatch l = client.getCountDownLatch(a[0]);
                return Boolean.toString(l.trySetCount(num(a[1])));
            }
            case "countdown":
                arity(cmd, a, 1, 1, "<name>");
                client.getCountDownLatch(a[0]).countDown();
                return null;
            case "await": {
                arity(cmd, a, 2, 2, "<name> <waitMs>");
                RCountDownLatch l = client.getCountDownLatch(a[0]);
                long wait = num(a[1]);
                if (wait == -1) {
                    l.await();
                    return "true";
                }
                return Boolean.toString(l.await(wait, TimeUnit.MILLISECONDS));
            }
            case "count":
                arity(cmd, a, 1, 1, "<name>");
                return Long.toString(client.getCountDownLatch(a[0]).getCount());
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    // ---------------------------------------------------------------- lock family (issue 14)

    /** Thrown for a command the running Redisson release does not have. */
    static final class Unsupported extends RuntimeException {
        Unsupported(String message) {
            super(message);
        }
    }

    /** Extra clients made by {@code client <alias> <url>}, for locks on other servers. */
    private static final Map<String, RedissonClient> EXTRA_CLIENTS = new ConcurrentHashMap<>();

    /** The Redisson release on the classpath, from its Maven metadata. */
    static String redissonVersion() {
        try (InputStream in = Redisson.class.getResourceAsStream(
                "/META-INF/maven/org.redisson/redisson/pom.properties")) {
            if (in != null) {
                Properties p = new Properties();
                p.load(in);
                String v = p.getProperty("version");
                if (v != null) {
                    return v;
                }
            }
        } catch (java.io.IOException ignored) {
            // fall through
        }
        String v = Redisson.class.getPackage().getImplementationVersion();
        return v == null ? "unknown" : v;
    }

    /** A second (third, ...) single-server client with the main client's watchdog timeout. */
    static String addClient(String alias, String url) {
        if (EXTRA_CLIENTS.containsKey(alias)) {
            throw new IllegalArgumentException("client alias " + alias + " exists");
        }
        Config config = new Config();
        config.setLockWatchdogTimeout(client.getConfig().getLockWatchdogTimeout());
        config.useSingleServer().setAddress(url);
        RedissonClient extra = Redisson.create(config);
        EXTRA_CLIENTS.put(alias, extra);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                extra.shutdown(0, 2, TimeUnit.SECONDS);
            } catch (Throwable ignored) {
                // exiting anyway
            }
        }, "peer-client-" + alias));
        return clientId(extra);
    }

    static RedissonClient clientNamed(String alias) {
        RedissonClient c = EXTRA_CLIENTS.get(alias);
        if (c == null) {
            throw new IllegalArgumentException("no client " + alias + " (make it with: client " + alias + " <url>)");
        }
        return c;
    }

    /** A 4.4+-only lock factory, looked up by name so that the peer compiles against 3.x too. */
    static RLock lockSince44(RedissonClient c, String factory, String name) {
        Method m;
        try {
            m = RedissonClient.class.getMethod(factory, String.class);
        } catch (NoSuchMethodException e) {
            throw new Unsupported("RedissonClient." + factory + " needs Redisson 4.4.0 or later; this peer runs "
                    + redissonVersion());
        }
        try {
            return (RLock) m.invoke(c, name);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof RuntimeException ? (RuntimeException) cause : new IllegalStateException(cause);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The lock kinds beyond getLock/fair/read/write. For {@code multi} and {@code redlock} the name is a
     * comma-separated member list, each member {@code [kind=]name[@clientAlias]} (kind as the command
     * prefixes, default a plain lock; alias from {@code client}, default this peer's main client).
     */
    static RLock familyLockOf(RedissonClient c, String kind, String name) {
        switch (kind) {
            case "fenced":
                return c.getFencedLock(name);
            case "spin":
                return c.getSpinLock(name);
            case "nonreentrant":
                return lockSince44(c, "getNonReentrantLock", name);
            case "nrfair":
                return lockSince44(c, "getNonReentrantFairLock", name);
            case "multi":
                return c.getMultiLock(members(name));
            case "redlock":
                return c.getRedLock(members(name));
            default:
                throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    static RLock[] members(String spec) {
        List<RLock> locks = new ArrayList<>();
        for (String member : spec.split(",")) {
            if (member.isEmpty()) {
                throw new IllegalArgumentException("empty member in " + spec);
            }
            String kind = "";
            String name = member;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                kind = name.substring(0, eq);
                name = name.substring(eq + 1);
            }
            RedissonClient c = client;
            int at = name.lastIndexOf('@');
            if (at >= 0) {
                c = clientNamed(name.substring(at + 1));
                name = name.substring(0, at);
            }
            if (kind.equals("multi") || kind.equals("redlock")) {
                throw new IllegalArgumentException("a member cannot be a " + kind);
            }
            locks.add(memberLock(c, kind, name));
        }
        return locks.toArray(new RLock[0]);
    }

    static RLock memberLock(RedissonClient c, String kind, String name) {
        switch (kind) {
            case "":
                return c.getLock(name);
            case "fair":
                return c.getFairLock(name);
            case "read":
                return c.getReadWriteLock(name).readLock();
            case "write":
                return c.getReadWriteLock(name).writeLock();
            default:
                return familyLockOf(c, kind, name);
        }
    }

    static RExpirable expirable(Object o, String cmd) {
        if (!(o instanceof RExpirable)) {
            throw new UnsupportedOperationException(cmd + ": " + o.getClass().getSimpleName() + " has no expiry");
        }
        return (RExpirable) o;
    }

    /** expire / expireat / expireif / clearexpire / ttl on any expirable object. */
    static String expiryCommand(Object target, String op, String cmd, String[] a) {
        switch (op) {
            case "expire":
                arity(cmd, a, 2, 2, "<name> <ms>");
                return Boolean.toString(expirable(target, cmd).expire(Duration.ofMillis(num(a[1]))));
            case "expireat":
                arity(cmd, a, 2, 2, "<name> <epochMs>");
                return Boolean.toString(expirable(target, cmd).expireAt(num(a[1])));
            case "expireif": {
                arity(cmd, a, 3, 3, "<name> <nx|xx|gt|lt> <ms>");
                RExpirable e = expirable(target, cmd);
                Duration d = Duration.ofMillis(num(a[2]));
                switch (a[1].toLowerCase()) {
                    case "nx":
                        return Boolean.toString(e.expireIfNotSet(d));
                    case "xx":
                        return Boolean.toString(e.expireIfSet(d));
                    case "gt":
                        return Boolean.toString(e.expireIfGreater(d));
                    case "lt":
                        return Boolean.toString(e.expireIfLess(d));
                    default:
                        throw new IllegalArgumentException("usage: " + cmd + " <name> <nx|xx|gt|lt> <ms>");
                }
            }
            case "clearexpire":
                arity(cmd, a, 1, 1, "<name>");
                return Boolean.toString(expirable(target, cmd).clearExpire());
            case "ttl":
                arity(cmd, a, 1, 1, "<name>");
                return Long.toString(expirable(target, cmd).remainTimeToLive());
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    static RFencedLock fencedOf(String kind, String cmd, String name) {
        if (!kind.equals("fenced")) {
            throw new IllegalArgumentException("unknown command " + cmd + " (only fenced." + cmd.substring(cmd.indexOf('.') + 1) + ")");
        }
        return client.getFencedLock(name);
    }

    /** Lock commands beyond lockCommand's: fencing tokens and the expiry family. */
    static String familyLockCommand(String kind, String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "lockandgettoken": {
                arity(cmd, a, 1, 2, "<name> [leaseMs]");
                RFencedLock lock = fencedOf(kind, cmd, a[0]);
                // Redisson's lockAndGetToken(lease, unit) ignores the lease (it calls the no-lease form).
                Long token = a.length > 1 ? lock.lockAndGetToken(num(a[1]), TimeUnit.MILLISECONDS) : lock.lockAndGetToken();
                return String.valueOf(token);
            }
            case "trylockandgettoken": {
                arity(cmd, a, 2, 3, "<name> <waitMs> [leaseMs]");
                RFencedLock lock = fencedOf(kind, cmd, a[0]);
                long wait = num(a[1]);
                long lease = a.length > 2 ? num(a[2]) : -1;
                Long token;
                if (wait == -1 && lease == -1) {
                    // Redisson's no-argument form: despite the name it waits without limit.
                    token = lock.tryLockAndGetToken();
                } else {
                    token = lock.tryLockAndGetToken(Math.max(wait, 0), lease, TimeUnit.MILLISECONDS);
                }
                return token == null ? "null" : token.toString();
            }
            case "gettoken":
                arity(cmd, a, 1, 1, "<name>");
                return String.valueOf(fencedOf(kind, cmd, a[0]).getToken());
            case "parked":
                arity(cmd, a, 1, 1, "<name>");
                return String.valueOf(parkedWaiters(fencedOf(kind, cmd, a[0])));
            case "expire":
            case "expireat":
            case "expireif":
            case "clearexpire":
                if (a.length == 0) {
                    throw new IllegalArgumentException("usage: " + cmd + " <name> ...");
                }
                return expiryCommand(lockOf(kind, a[0]), op, cmd, a);
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    /**
     * How many of this client's asynchronous waits on {@code lock} are parked on its unlock
     * channel, i.e. will be run by the next unlock message. Redisson before 3.28.0 (#5761)
     * checks its wake-up permit before it parks such a wait, so a message landing between
     * the two is lost and the wait lasts the lock's TTL; a test that must see a message
     * wake-up waits for this count first. Read by reflection: Redisson has no API for it.
     */
    static int parkedWaiters(RLock lock) throws ReflectiveOperationException {
        Field pubSubField = org.redisson.RedissonLock.class.getDeclaredField("pubSub");
        pubSubField.setAccessible(true);
        Object pubSub = pubSubField.get(lock);
        Method entryName = org.redisson.RedissonBaseLock.class.getDeclaredMethod("getEntryName");
        entryName.setAccessible(true);
        // PublishSubscribe, LockPubSub's superclass, is package-private.
        Field entriesField = pubSub.getClass().getSuperclass().getDeclaredField("entries");
        entriesField.setAccessible(true);
        Object entry = ((Map<?, ?>) entriesField.get(pubSub)).get(entryName.invoke(lock));
        if (entry == null) {
            return 0;
        }
        Field listeners = org.redisson.RedissonLockEntry.class.getDeclaredField("listeners");
        listeners.setAccessible(true);
        return ((java.util.Collection<?>) listeners.get(entry)).size();
    }

    static List<String> idList(String csv) {
        List<String> ids = new ArrayList<>();
        for (String id : csv.split(",")) {
            if (!id.isEmpty()) {
                ids.add(id);
            }
        }
        return ids;
    }

    /** RSemaphore commands beyond semaphoreCommand's. */
    static String moreSemaphoreCommand(String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "addpermits":
                arity(cmd, a, 2, 2, "<name> <permits>");
                client.getSemaphore(a[0]).addPermits(Integer.parseInt(a[1]));
                return null;
            case "drain":
                arity(cmd, a, 1, 1, "<name>");
                return Integer.toString(client.getSemaphore(a[0]).drainPermits());
            case "expire":
            case "expireat":
            case "expireif":
            case "clearexpire":
            case "ttl":
                if (a.length == 0) {
                    throw new IllegalArgumentException("usage: " + cmd + " <name> ...");
                }
                return expiryCommand(client.getSemaphore(a[0]), op, cmd, a);
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    /** RPermitExpirableSemaphore commands beyond pesCommand's. */
    static String morePesCommand(String op, String cmd, String[] a) throws Exception {
        switch (op) {
            case "addpermits":
                arity(cmd, a, 2, 2, "<name> <permits>");
                client.getPermitExpirableSemaphore(a[0]).addPermits(Integer.parseInt(a[1]));
                return null;
            case "setpermits":
                arity(cmd, a, 2, 2, "<name> <permits>");
                client.getPermitExpirableSemaphore(a[0]).setPermits(Integer.parseInt(a[1]));
                return null;
            case "permits":
                arity(cmd, a, 1, 1, "<name>");
                return Integer.toString(client.getPermitExpirableSemaphore(a[0]).getPermits());
            case "acquired":
                arity(cmd, a, 1, 1, "<name>");
                return Integer.toString(client.getPermitExpirableSemaphore(a[0]).acquiredPermits());
            case "acquiremany": {
                arity(cmd, a, 2, 3, "<name> <permits> [leaseMs]");
                RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[0]);
                int p = Integer.parseInt(a[1]);
                long lease = a.length > 2 ? num(a[2]) : -1;
                List<String> ids = lease == -1 ? s.acquire(p) : s.acquire(p, lease, TimeUnit.MILLISECONDS);
                return String.join(",", ids);
            }
            case "tryacquiremany": {
                arity(cmd, a, 3, 4, "<name> <permits> <waitMs> [leaseMs]");
                RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[0]);
                int p = Integer.parseInt(a[1]);
                long wait = num(a[2]);
                long lease = a.length > 3 ? num(a[3]) : -1;
                List<String> ids = wait == -1 && lease == -1
                        ? s.tryAcquire(p)
                        : s.tryAcquire(p, Math.max(wait, 0), lease, TimeUnit.MILLISECONDS);
                return ids == null || ids.isEmpty() ? "null" : String.join(",", ids);
            }
            case "releasemany":
                arity(cmd, a, 2, 2, "<name> <id,id,...>");
                client.getPermitExpirableSemaphore(a[0]).release(idList(a[1]));
                return null;
            case "tryreleasemany":
                arity(cmd, a, 2, 2, "<name> <id,id,...>");
                return Integer.toString(client.getPermitExpirableSemaphore(a[0]).tryRelease(idList(a[1])));
            case "expire":
            case "expireat":
            case "expireif":
            case "clearexpire":
            case "ttl":
                if (a.length == 0) {
                    throw new IllegalArgumentException("usage: " + cmd + " <name> ...");
                }
                return expiryCommand(client.getPermitExpirableSemaphore(a[0]), op, cmd, a);
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }
}
