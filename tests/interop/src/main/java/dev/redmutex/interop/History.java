package dev.redmutex.interop;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RScript;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;

/**
 * The history mode of the Redisson peer: the Java worker of redmutex's verification harness
 * (docs/verify.md). Threads, each with its own Redisson client (so that the client id alone
 * names the holder, as on the Rust side), contend on one lock of one kind and write every
 * operation as a JSON line in the same format as the Rust worker ({@code redmutex
 * verify-worker}), timed with {@code System.nanoTime}, which reads CLOCK_MONOTONIC on Linux
 * as the Rust side does.
 *
 * <pre>
 * java -Dverify.lua=DIR -cp ... dev.redmutex.interop.History &lt;lock-target&gt; &lt;direct-target&gt;
 *     &lt;name&gt; &lt;kind&gt; &lt;mode&gt; &lt;threads&gt; &lt;millis&gt; &lt;leaseMs&gt; &lt;historyDir&gt;
 *     &lt;cell&gt; &lt;process&gt; &lt;seed&gt;
 * </pre>
 *
 * <p>A target is {@code redis://host:port} (one server), {@code
 * sentinel:MASTER@redis://host:port,redis://host:port} (a Sentinel set) or {@code
 * cluster:redis://host:port,...} (a Redis Cluster's seed nodes). Kinds and modes are the Rust
 * worker's: {@code lock}, {@code fenced}, {@code fair}, {@code rw} with {@code lease}, {@code
 * watchdog} or {@code handoff}; {@code semaphore} with {@code plain} or {@code lease}.
 *
 * <p>Each critical section takes its entry and exit snapshots on a separate client in one
 * script (atomic like the Rust side's MULTI). That client never meets the proxy's faults; on
 * Sentinel and Cluster it is a Redisson client of the same topology, so its scripts and
 * counter commands go to the master the sentinels name or to the master of the lock's slot
 * (every key shares the lock's hash tag), and it meets the failovers the lock traffic meets.
 * Redisson has no "is the hold still trusted" call, so Java records carry no trust fields;
 * the checkers count Java overstays separately.
 */
public final class History {

    /**
     * The lock kinds' snapshot: occupancy after the update, this holder's hold count (its
     * fields are {@code <client id>:<thread>} and, for a writer, {@code ...:write}), PTTL, the
     * other fields, and a read-write lock's {@code mode}.
     */
    private static final String SNAPSHOT =
            "local o = redis.call('INCRBY', KEYS[1], ARGV[1]) "
                    + "local h = redis.call('HGETALL', KEYS[2]) "
                    + "local p = redis.call('PTTL', KEYS[2]) "
                    + "local held, others, mode = 0, 0, '' "
                    + "local pre = ARGV[2] .. ':' "
                    + "for i = 1, #h, 2 do "
                    + "  local f = h[i] "
                    + "  if f == 'mode' then mode = h[i + 1] "
                    + "  elseif f == ARGV[2] or string.sub(f, 1, #pre) == pre then "
                    + "    held = held + tonumber(h[i + 1]) "
                    + "  else others = others + 1 end end "
                    + "return o .. ' ' .. held .. ' ' .. p .. ' ' .. others .. ' ' .. mode";

    /**
     * The semaphores' snapshot: occupancy after the update, the permits available, a leased
     * permit's lease end (its score in the timeouts' sorted set, looked up by the hex id and
     * by its raw bytes, as Redisson releases store it either way) and the server's TIME.
     */
    private static final String SEMAPHORE_SNAPSHOT =
            "local o = redis.call('INCRBY', KEYS[1], ARGV[1]) "
                    + "local a = redis.call('GET', KEYS[2]) "
                    + "local e = false "
                    + "if ARGV[2] ~= '' then "
                    + "  e = redis.call('ZSCORE', KEYS[3], ARGV[2]) "
                    + "  if not e then "
                    + "    local raw = (string.gsub(ARGV[2], '..', "
                    + "      function(x) return string.char(tonumber(x, 16)) end)) "
                    + "    e = redis.call('ZSCORE', KEYS[3], raw) end end "
                    + "local t = redis.call('TIME') "
                    + "return o .. ' ' .. (a or 'nil') .. ' ' .. (e or 'nil') .. ' ' .. t[1] .. ' ' .. t[2]";

    private History() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 12) {
            System.err.println("usage: History lockTarget directTarget name kind mode threads"
                    + " millis leaseMs historyDir cell process seed");
            System.exit(2);
        }
        String lockTarget = args[0], directTarget = args[1], name = args[2], kind = args[3],
                mode = args[4];
        int threads = Integer.parseInt(args[5]);
        long millis = Long.parseLong(args[6]);
        long leaseMs = Long.parseLong(args[7]);
        Path dir = Paths.get(args[8]);
        String cell = args[9], process = args[10];
        long seed = Long.parseUnsignedLong(args[11]);
        String version = "redisson " + Redisson.class.getPackage().getImplementationVersion();
        boolean known = switch (kind) {
            case "lock", "fenced", "fair", "rw" -> List.of("lease", "watchdog", "handoff").contains(mode);
            case "semaphore" -> mode.equals("plain") || mode.equals("lease");
            case "latch" -> mode.equals("plain");
            default -> false;
        };
        if (!known) {
            System.err.println("History: unknown workload " + kind + "-" + mode);
            System.exit(2);
        }
        // The fenced resource is the Rust worker's script file, run as a function so that
        // its list reply comes back as one string (RScript's list return type is spelled
        // differently in 3.x and 4.x).
        String fencedWrite = null;
        if (kind.equals("fenced")) {
            String lua = Files.readString(Paths.get(System.getProperty("verify.lua", "lua/verify"))
                    .resolve("fenced_write.lua"));
            fencedWrite = "local r = (function() " + lua + "\nend)() return r[1] .. ' ' .. r[2]";
        }

        List<RedissonClient> clients = new ArrayList<>();
        for (int k = 0; k < threads; k++) {
            clients.add(Redisson.create(config(lockTarget, leaseMs, true)));
        }
        RedissonClient direct = Redisson.create(config(directTarget, leaseMs, false));
        if (kind.equals("semaphore")) {
            // Every process sets the same count; only the first one's takes effect.
            if (mode.equals("lease")) {
                clients.get(0).getPermitExpirableSemaphore(name).trySetPermits(2);
            } else {
                clients.get(0).getSemaphore(name).trySetPermits(2);
            }
        }

        // The runner waits for this file before it faults anything, and reads the pid and
        // client ids to find the holder's process for the SIGSTOP nemesis.
        StringBuilder ids = new StringBuilder();
        ids.append(ProcessHandle.current().pid()).append('\n');
        for (RedissonClient c : clients) {
            ids.append(Peer.clientId(c)).append('\n');
        }
        Path owners = dir.resolve(cell + "." + process + ".owners");
        Path tmp = dir.resolve(cell + "." + process + ".owners.tmp");
        Files.writeString(tmp, ids.toString());
        Files.move(tmp, owners, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);

        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        List<Thread> workers = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        Worker.Setup setup = new Worker.Setup(direct, version, name, kind, mode, leaseMs, dir, cell,
                process, fencedWrite, end);
        Rounds rounds = new Rounds(threads);
        for (int k = 0; k < threads; k++) {
            final int thread = k;
            final RedissonClient client = clients.get(k);
            Thread t = new Thread(() -> {
                try {
                    Worker w = new Worker(setup, client, thread,
                            seed ^ ((thread + 1) * 0x9E3779B97F4A7C15L));
                    if (kind.equals("latch")) {
                        w.latchRounds(rounds, threads);
                    } else {
                        w.run();
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            t.start();
            workers.add(t);
        }
        for (Thread t : workers) {
            t.join();
        }
        for (RedissonClient c : clients) {
            c.shutdown();
        }
        direct.shutdown();
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            System.exit(1);
        }
    }

    /**
     * A Redisson config for one target. Lock clients get short timeouts so that faults show
     * as failed calls rather than stalls; every client reads from masters only (Redisson reads
     * replicas by default on Sentinel and Cluster, which would make the snapshots stale) and
     * keeps small connection pools, as each JVM runs several clients.
     */
    static Config config(String target, long leaseMs, boolean lockClient) {
        Config config = new Config();
        config.setLockWatchdogTimeout(leaseMs);
        int timeout = lockClient ? 500 : 3000;
        if (target.startsWith("sentinel:")) {
            String rest = target.substring("sentinel:".length());
            int at = rest.indexOf('@');
            SentinelServersConfig s = config.useSentinelServers().setMasterName(rest.substring(0, at));
            for (String a : rest.substring(at + 1).split(",")) {
                s.addSentinelAddress(a);
            }
            s.setReadMode(ReadMode.MASTER).setScanInterval(200).setTimeout(timeout)
                    .setRetryInterval(20).setConnectTimeout(1000)
                    .setMasterConnectionMinimumIdleSize(2).setMasterConnectionPoolSize(8)
                    .setSlaveConnectionMinimumIdleSize(1).setSlaveConnectionPoolSize(2)
                    .setSubscriptionConnectionMinimumIdleSize(1).setSubscriptionConnectionPoolSize(4);
        } else if (target.startsWith("cluster:")) {
            ClusterServersConfig c = config.useClusterServers();
            for (String a : target.substring("cluster:".length()).split(",")) {
                c.addNodeAddress(a);
            }
            c.setReadMode(ReadMode.MASTER).setScanInterval(200).setTimeout(timeout)
                    .setRetryInterval(20).setConnectTimeout(1000)
                    .setMasterConnectionMinimumIdleSize(2).setMasterConnectionPoolSize(8)
                    .setSlaveConnectionMinimumIdleSize(1).setSlaveConnectionPoolSize(2)
                    .setSubscriptionConnectionMinimumIdleSize(1).setSubscriptionConnectionPoolSize(4);
        } else {
            config.useSingleServer().setAddress(target).setTimeout(timeout).setRetryInterval(20)
                    .setConnectTimeout(1000).setConnectionMinimumIdleSize(2).setConnectionPoolSize(8)
                    .setSubscriptionConnectionMinimumIdleSize(1).setSubscriptionConnectionPoolSize(4);
        }
        return config;
    }

    /**
     * The latch workload's rounds, as the Rust worker's: the process's threads meet at the
     * barrier before and after each round's count is set; {@code stop}, set by thread 0
     * before the first meeting, tells every thread after it that there is no next round.
     */
    private record Rounds(CyclicBarrier barrier, AtomicBoolean stop) {
        Rounds(int threads) {
            this(new CyclicBarrier(threads), new AtomicBoolean());
        }
    }

    /** One worker thread's loop over acquire, section and release. */
    private static final class Worker {
        /** What every thread of the process shares. */
        record Setup(RedissonClient direct, String version, String name, String kind, String mode,
                long leaseMs, Path dir, String cell, String process, String fencedWrite, long end) {}

        private final Setup s;
        private final RedissonClient client;
        private final int thread;
        private final SplittableRandom rng;
        private final String id;
        private final RScript script;
        private BufferedWriter out;
        private String base;

        Worker(Setup s, RedissonClient client, int thread, long seed) {
            this.s = s;
            this.client = client;
            this.thread = thread;
            this.rng = new SplittableRandom(seed);
            this.id = Peer.clientId(client);
            this.script = s.direct().getScript(StringCodec.INSTANCE);
        }

        void run() throws IOException, InterruptedException {
            String field = id + ":" + Thread.currentThread().getId();
            boolean semaphore = s.kind().equals("semaphore");
            base = "\"cell\":" + q(s.cell()) + ",\"process\":" + q(s.process()) + ",\"thread\":"
                    + thread + ",\"language\":\"java\",\"version\":" + q(s.version()) + ",\"kind\":"
                    + q(s.kind()) + ",\"name\":" + q(s.name()) + ",\"owner\":" + q(id) + ",\"field\":"
                    + q(field) + ",\"mode\":" + q(s.mode()) + ",\"lease_ms\":" + s.leaseMs()
                    + (semaphore ? ",\"access\":\"permit\",\"permits\":2" : "");
            String name = s.name();
            long leaseMs = s.leaseMs();
            List<Object> keys = Arrays.asList(name + ":verify:inside", name);
            List<Object> semaphoreKeys = Arrays.asList(name + ":verify:inside", name, name + ":timeout");
            List<Object> fence = Arrays.asList(name + ":verify:fence", name + ":verify:accepted",
                    name + ":verify:accepted-tokens");
            String counter = name + ":verify:counter";
            boolean watchdog = s.mode().equals("watchdog");
            boolean handoff = s.mode().equals("handoff");
            RLock lock = switch (s.kind()) {
                case "fenced" -> client.getFencedLock(name);
                case "fair" -> client.getFairLock(name);
                case "lock" -> client.getLock(name);
                default -> null;
            };
            RFencedLock fenced = lock instanceof RFencedLock f ? f : null;
            RSemaphore plain = semaphore && !s.mode().equals("lease") ? client.getSemaphore(name) : null;
            RPermitExpirableSemaphore leased = semaphore && s.mode().equals("lease")
                    ? client.getPermitExpirableSemaphore(name) : null;
            try (BufferedWriter w = Files.newBufferedWriter(
                    s.dir().resolve(s.cell() + "." + s.process() + "-t" + thread + ".jsonl"),
                    StandardCharsets.UTF_8)) {
                out = w;
                while (System.nanoTime() < s.end()) {
                    // Hand-off waiters all block: a timed one gives up before it could show a
                    // long free wait.
                    boolean blocking = handoff || rng.nextInt(2) == 0;
                    // Readers two times in three, so that reads overlap often.
                    boolean read = s.kind().equals("rw") && rng.nextInt(3) != 0;
                    String access = s.kind().equals("rw")
                            ? ",\"access\":" + q(read ? "read" : "write") : "";
                    if (s.kind().equals("rw")) {
                        lock = read ? client.getReadWriteLock(name).readLock()
                                : client.getReadWriteLock(name).writeLock();
                    }
                    // The Rust worker's call names, which the liveness checker reads.
                    String call = plain != null ? (blocking ? "acquire" : "try_acquire_for")
                            : leased != null ? (blocking ? "acquire_with_lease" : "try_acquire_with_lease")
                            : watchdog ? (blocking ? "lock" : "try_lock_for")
                            : (blocking ? "lock_with_lease" : "try_lock_with_lease");
                    String callField = ",\"call\":" + q(call) + access;
                    record("acquire", "invoke", callField);
                    boolean got;
                    Long token = null;
                    String permit = null;
                    try {
                        if (plain != null) {
                            if (blocking) {
                                plain.acquire();
                                got = true;
                            } else {
                                got = plain.tryAcquire(300, TimeUnit.MILLISECONDS);
                            }
                        } else if (leased != null) {
                            permit = blocking ? leased.acquire(leaseMs, TimeUnit.MILLISECONDS)
                                    : leased.tryAcquire(300, leaseMs, TimeUnit.MILLISECONDS);
                            got = permit != null;
                        } else if (fenced != null) {
                            token = watchdog ? (blocking ? fenced.lockAndGetToken()
                                    : fenced.tryLockAndGetToken(300, TimeUnit.MILLISECONDS))
                                    : (blocking ? fenced.lockAndGetToken(leaseMs, TimeUnit.MILLISECONDS)
                                    : fenced.tryLockAndGetToken(300, leaseMs, TimeUnit.MILLISECONDS));
                            got = token != null;
                        } else if (watchdog && blocking) {
                            lock.lock();
                            got = true;
                        } else if (watchdog) {
                            got = lock.tryLock(300, TimeUnit.MILLISECONDS);
                        } else if (blocking) {
                            lock.lock(leaseMs, TimeUnit.MILLISECONDS);
                            got = true;
                        } else {
                            got = lock.tryLock(300, leaseMs, TimeUnit.MILLISECONDS);
                        }
                    } catch (RuntimeException e) {
                        // Outcome unknown (a lost reply): a possible hold to the checkers.
                        record("acquire", "info", callField + ",\"error\":" + q(describe(e)));
                        continue;
                    }
                    if (!got) {
                        record("acquire", "fail", callField);
                        continue;
                    }
                    record("acquire", "ok", callField + (token != null ? ",\"token\":" + token : ""));
                    record("section-start", "invoke", access);
                    record("section-start", "ok", (semaphore ? semaphoreSnapshot(semaphoreKeys, permit, 1)
                            : snapshot(keys, 1)) + access);
                    long holdMs = rng.nextInt(10) == 0 ? leaseMs * (50 + rng.nextInt(80)) / 100
                            : handoff ? 50 + rng.nextInt(100) : 1 + rng.nextInt(8);
                    if (token != null) {
                        Thread.sleep(holdMs);
                        record("write", "invoke", ",\"token\":" + token);
                        final long t = token;
                        String reply = direct(() -> script.<String>eval(RScript.Mode.READ_WRITE,
                                s.fencedWrite(), RScript.ReturnType.VALUE, fence, Long.toString(t)));
                        String[] r = reply.split(" ");
                        record("write", r[0].equals("1") ? "ok" : "fail",
                                ",\"token\":" + token + ",\"top\":" + Long.parseLong(r[1]));
                    } else {
                        record("write", "invoke", "");
                        String value = direct(() -> s.direct().<String>getBucket(counter,
                                StringCodec.INSTANCE).get());
                        Thread.sleep(holdMs);
                        long next = (value == null ? 0 : Long.parseLong(value)) + 1;
                        direct(() -> {
                            s.direct().<String>getBucket(counter, StringCodec.INSTANCE)
                                    .set(Long.toString(next));
                            return null;
                        });
                        record("write", "ok", ",\"value\":" + next);
                    }
                    record("section-end", "invoke", "");
                    record("section-end", "ok", semaphore ? semaphoreSnapshot(semaphoreKeys, permit, -1)
                            : snapshot(keys, -1));
                    record("release", "invoke", "");
                    try {
                        if (plain != null) {
                            plain.release();
                        } else if (leased != null) {
                            leased.release(permit);
                        } else {
                            lock.unlock();
                        }
                        record("release", "ok", "");
                    } catch (RuntimeException e) {
                        // Not held any more (a lease ran out) is Redisson's "not held",
                        // thrown bare or wrapped; anything else leaves the outcome unknown.
                        record("release", notHeld(e) ? "fail" : "info",
                                ",\"error\":" + q(describe(e)));
                    }
                    if (handoff) {
                        // Think time, not synchronisation: the releaser stays away for one to
                        // two leases, so the lock can only go to a waiter.
                        Thread.sleep(leaseMs + rng.nextInt((int) leaseMs));
                    }
                }
            }
        }

        /**
         * The latch workload (latch-plain), as the Rust worker runs it: each round a fresh
         * RCountDownLatch of this process, {@code <name>:latch:<process>:<round>}; thread 0
         * sets its count to the number of counting threads (all but the last), the threads
         * meet once it is set, the counting ones count down after a 0-30 ms pause, and every
         * thread waits (at most 2 s) for it to open. The latch checker judges the lines. A
         * failed call is recorded and the round goes on, so no thread leaves the others
         * waiting at the barrier.
         */
        void latchRounds(Rounds rounds, int threads) throws Exception {
            base = "\"cell\":" + q(s.cell()) + ",\"process\":" + q(s.process()) + ",\"thread\":"
                    + thread + ",\"language\":\"java\",\"version\":" + q(s.version())
                    + ",\"kind\":\"latch\",\"owner\":" + q(id) + ",\"mode\":\"plain\"";
            String prefix = base;
            int counters = Math.max(threads - 1, 1);
            boolean counts = thread < counters;
            try (BufferedWriter w = Files.newBufferedWriter(
                    s.dir().resolve(s.cell() + "." + s.process() + "-t" + thread + ".jsonl"),
                    StandardCharsets.UTF_8)) {
                out = w;
                for (int round = 0;; round++) {
                    if (thread == 0 && System.nanoTime() >= s.end()) {
                        // The barrier below orders this store before every thread's read.
                        rounds.stop().set(true);
                    }
                    rounds.barrier().await();
                    if (rounds.stop().get()) {
                        break;
                    }
                    String latchName = s.name() + ":latch:" + s.process() + ":" + round;
                    base = prefix + ",\"name\":" + q(latchName);
                    RCountDownLatch latch = client.getCountDownLatch(latchName);
                    if (thread == 0) {
                        String count = ",\"count\":" + counters;
                        record("latch-set", "invoke", count);
                        try {
                            record("latch-set", latch.trySetCount(counters) ? "ok" : "fail", count);
                        } catch (RuntimeException e) {
                            record("latch-set", "info", count + ",\"error\":" + q(describe(e)));
                        }
                    }
                    rounds.barrier().await();
                    if (counts) {
                        Thread.sleep(rng.nextInt(30));
                        record("count-down", "invoke", "");
                        try {
                            latch.countDown();
                            record("count-down", "ok", "");
                        } catch (RuntimeException e) {
                            record("count-down", "info", ",\"error\":" + q(describe(e)));
                        }
                    }
                    record("latch-wait", "invoke", "");
                    try {
                        record("latch-wait", latch.await(2, TimeUnit.SECONDS) ? "ok" : "fail", "");
                    } catch (RuntimeException e) {
                        record("latch-wait", "info", ",\"error\":" + q(describe(e)));
                    }
                }
            }
        }

        /** The lock kinds' snapshot fields (see {@link History#SNAPSHOT}). */
        private String snapshot(List<Object> keys, int delta) {
            String reply = direct(() -> script.<String>eval(RScript.Mode.READ_WRITE, SNAPSHOT,
                    RScript.ReturnType.VALUE, keys, Integer.toString(delta), id));
            String[] r = reply.split(" ");
            return ",\"occupancy\":" + Long.parseLong(r[0]) + ",\"held\":" + Long.parseLong(r[1])
                    + ",\"pttl\":" + Long.parseLong(r[2]) + ",\"others\":" + Long.parseLong(r[3])
                    + (r.length > 4 ? ",\"rw_mode\":" + q(r[4]) : "");
        }

        /**
         * The semaphores' snapshot fields: a plain semaphore's permit is always this
         * section's own; a leased one is held while its lease end is after the server's time.
         */
        private String semaphoreSnapshot(List<Object> keys, String permit, int delta) {
            String reply = direct(() -> script.<String>eval(RScript.Mode.READ_WRITE,
                    SEMAPHORE_SNAPSHOT, RScript.ReturnType.VALUE, keys, Integer.toString(delta),
                    permit == null ? "" : permit));
            String[] r = reply.split(" ");
            long nowMs = Long.parseLong(r[3]) * 1000 + Long.parseLong(r[4]) / 1000;
            boolean hasEnd = !r[2].equals("nil");
            boolean held = permit == null || (hasEnd && Double.parseDouble(r[2]) > nowMs);
            return ",\"occupancy\":" + Long.parseLong(r[0]) + ",\"held\":" + (held ? 1 : 0)
                    + ",\"available\":" + (r[1].equals("nil") ? "null" : Long.parseLong(r[1]))
                    + ",\"lease_end\":" + (hasEnd ? (long) Double.parseDouble(r[2]) : "null")
                    + ",\"server_ms\":" + nowMs;
        }

        /**
         * Runs one command of the direct client, resending while it fails (a failover or a
         * killed master in its way) for up to 30 s, as the Rust worker's direct connection
         * does. A resend may run a command twice: harmless for what is sent here (reads, a
         * SET of the same value, a fenced write that accepts an equal token again, the
         * occupancy counter the checkers do not read).
         */
        private static <T> T direct(java.util.function.Supplier<T> command) {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                try {
                    return command.get();
                } catch (RuntimeException e) {
                    if (System.nanoTime() > end) {
                        throw e;
                    }
                }
                try {
                    // Paces the resends while the topology settles; no synchronisation.
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            }
        }

        private void record(String op, String type, String extra) throws IOException {
            out.write("{" + base + ",\"op\":" + q(op) + ",\"type\":" + q(type) + ",\"ns\":"
                    + System.nanoTime() + extra + "}\n");
        }
    }

    /** Whether {@code e} or a cause of it says the lock or permit was not held. */
    private static boolean notHeld(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof IllegalMonitorStateException || t instanceof IllegalArgumentException) {
                return true;
            }
        }
        return false;
    }

    /** {@code e} and its causes, for the history's {@code error} field. */
    private static String describe(Throwable e) {
        StringBuilder b = new StringBuilder(e.toString());
        for (Throwable t = e.getCause(); t != null && b.length() < 600; t = t.getCause()) {
            b.append(" <- ").append(t);
        }
        return b.toString();
    }

    /** A JSON string literal. */
    private static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
