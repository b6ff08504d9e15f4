package dev.redmutex.interop;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.UndeclaredThrowableException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
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
                    default:
                        return lockCommand(kind, op, cmd, a);
                }
            case "fair":
            case "read":
            case "write":
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
                throw new IllegalArgumentException("unknown lock kind " + kind);
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
                throw new IllegalArgumentException("unknown command " + cmd);
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
                throw new IllegalArgumentException("unknown command " + cmd);
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
                throw new IllegalArgumentException("unknown command " + cmd);
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
}
