package dev.redmutex.interop;

import java.io.BufferedWriter;
import java.lang.management.ManagementFactory;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson lock micro-benchmark, the Java baseline for redmutex's benchmarks
 * ({@code benches/lock/}). Both sides use the same scenarios and the same definitions.
 *
 * <p>Usage: {@code Bench <target> <scenario> <threads> <durationMs> <keys> [samplesFile]}
 * prints one JSON line on stdout. {@code Bench <target> suite <durationMs> <samplesDir>
 * [<scenario>:<threads>:<keys>...]} runs, in one JVM after one shared warm-up, the scenarios
 * given (by default uncontended 1 thread / 1 key, uncontended 16 threads / 1,000 keys and
 * hand-off at 2, 4 and 16 threads), printing one JSON line each and writing the hand-off
 * samples to {@code <samplesDir>/handoff-<threads>.csv}.
 *
 * <p>{@code <target>} is the deployment: a {@code redis://} or {@code rediss://} URL (one
 * server), the path of a Redisson YAML config file ({@code Config.fromYAML}: cluster, sentinel,
 * ...), {@code cluster:<url>,<url>...} (cluster seed nodes) or
 * {@code sentinel:<masterName>@<url>,<url>...} (the sentinels). {@code
 * -Dbench.checkLockSyncedSlaves=true|false} overrides Redisson's {@code checkLockSyncedSlaves}.
 *
 * <ul>
 *   <li>{@code uncontended}: thread t loops lock()/unlock() on {@code bench:u:<i>} with
 *       i = t, t + threads, t + 2 * threads, ... below {@code keys}, then t again: 16 threads
 *       over 1,000 keys touch every key and never share one.
 *   <li>{@code handoff}: all threads loop lock(); ~20 µs busy critical section; unlock() on
 *       {@code bench:h}. Two latencies are recorded:
 *       <ul>
 *         <li>hand-off: just before calling unlock() the holder records (its thread, now). When
 *             the next acquisition is by a different thread, the time from that unlock-call start
 *             to that lock() return is one sample. A re-acquisition by the releaser is not one.
 *         <li>takeover: for an acquisition whose lock() call started before some unlock-call
 *             start, the time from the first such unlock-call start to the lock() return: how
 *             long a waiter went on waiting once the lock had first been released while it
 *             waited (it includes releases lost to other threads).
 *       </ul>
 * </ul>
 *
 * <p>The same scenario first runs for 2 s (or {@code -Dbench.warmupMs}) to warm up the JIT. If {@code samplesFile} is given,
 * every sample is written to it as {@code <metric>,<microseconds>} lines.
 */
public final class Bench {

    /** Warm-up before measuring; {@code -Dbench.warmupMs=N} overrides it. */
    private static final long WARMUP_MS = Long.getLong("bench.warmupMs", 2_000);
    private static final long CRITICAL_NS = 20_000;

    /** Guards the hand-off record; the Rust side holds one mutex for the same bookkeeping. */
    private static final Object REC = new Object();
    /** Thread index of the last releaser, or -1. */
    private static int lastReleaser = -1;
    /** nanoTime at which the last releaser started its unlock() call. */
    private static long lastUnlockStart;
    /** Every unlock-call start of the run, in order (they are serialized by the lock). */
    private static long[] unlockStarts = new long[1 << 16];
    private static int unlockCount;

    private Bench() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length >= 4 && args[1].equals("redlock")) {
            out.println(redLock(args[0], Long.parseLong(args[2]), Arrays.copyOfRange(args, 3, args.length)));
            out.flush();
            System.exit(0);
        }
        if (args.length == 3 && args[1].equals("fair-child")) {
            fairChild(args[0], args[2], out);
            System.exit(0);
        }
        boolean suite = args.length >= 4 && args[1].equals("suite");
        // "rounds" after the suite's arguments keeps the JVM for interleaved hand-off rounds.
        boolean withRounds = suite && args.length >= 5 && args[args.length - 1].equals("rounds");
        int scenarioEnd = withRounds ? args.length - 1 : args.length;
        if (!suite && args.length != 5 && args.length != 6) {
            System.err.println("usage: Bench <target> <uncontended|handoff> <threads> <durationMs> <keys> [samplesFile]");
            System.err.println("       Bench <target> suite <durationMs> <samplesDir> [<scenario>:<threads>:<keys>...] [rounds]");
            System.err.println("       Bench <redis-url> redlock <durationMs> <redis-url>...");
            System.err.println("       Bench <target> fair-child <lock>   (stdin: go, stop; stdout: ready, sections n...)");
            System.err.println("target: redis-url | redisson.yaml | cluster:<url>,... | sentinel:<master>@<url>,...");
            System.exit(2);
        }
        if (!suite && !isScenario(args[1])) {
            System.err.println("unknown scenario " + args[1]);
            System.exit(2);
        }

        RedissonClient client = Redisson.create(config(args[0]));
        try {
            if (suite) {
                // One JVM for every scenario: a shared warm-up (split between the scenarios)
                // gets the JIT much further than a short one per process.
                long durationMs = Long.parseLong(args[2]);
                String dir = args[3];
                Object[][] scenarios = scenarioEnd == 4 ? DEFAULT_SUITE : parseScenarios(args, 4, scenarioEnd);
                for (Object[] sc : scenarios) {
                    run(client, (String) sc[0], (Integer) sc[1], WARMUP_MS / scenarios.length, (Integer) sc[2], null);
                }
                for (Object[] sc : scenarios) {
                    String samples = sc[0].equals("handoff")
                        ? Paths.get(dir, "handoff-" + sc[1] + ".csv").toString() : null;
                    out.println(measure(client, (String) sc[0], (Integer) sc[1], durationMs, (Integer) sc[2], samples));
                    out.flush();
                }
                if (withRounds) {
                    rounds(client, out);
                }
            } else {
                String scenario = args[1];
                int threads = Integer.parseInt(args[2]);
                long durationMs = Long.parseLong(args[3]);
                int keys = Math.max(1, Integer.parseInt(args[4]));
                run(client, scenario, threads, WARMUP_MS, keys, null);
                out.println(measure(client, scenario, threads, durationMs, keys, args.length == 6 ? args[5] : null));
                out.flush();
            }
        } finally {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        }
        System.exit(0);
    }

    /** The suite's scenarios when none are given: the single-server rows. */
    private static final Object[][] DEFAULT_SUITE = {
        {"uncontended", 1, 1}, {"uncontended", 16, 1000},
        {"handoff", 2, 1}, {"handoff", 4, 1}, {"handoff", 16, 1},
    };

    static boolean isScenario(String s) {
        return s.equals("uncontended") || s.equals("handoff");
    }

    /** {@code <scenario>:<threads>:<keys>} arguments from {@code from} to {@code to}. */
    static Object[][] parseScenarios(String[] args, int from, int to) {
        Object[][] out = new Object[to - from][];
        for (int i = from; i < to; i++) {
            String[] p = args[i].split(":");
            if (p.length != 3 || !isScenario(p[0])) {
                System.err.println("bad scenario " + args[i] + " (want <uncontended|handoff>:<threads>:<keys>)");
                System.exit(2);
            }
            out[i - from] = new Object[] {p[0], Integer.parseInt(p[1]), Integer.parseInt(p[2])};
        }
        return out;
    }

    /** The Redisson config for a {@code <target>} argument (see the class comment). */
    static Config config(String target) throws IOException {
        Config config;
        if (target.startsWith("redis://") || target.startsWith("rediss://")) {
            config = new Config();
            config.useSingleServer().setAddress(target);
        } else if (target.startsWith("cluster:")) {
            config = new Config();
            config.useClusterServers().addNodeAddress(target.substring("cluster:".length()).split(","));
        } else if (target.startsWith("sentinel:")) {
            String rest = target.substring("sentinel:".length());
            int at = rest.indexOf('@');
            if (at < 0) {
                throw new IllegalArgumentException("want sentinel:<masterName>@<url>,...: " + target);
            }
            config = new Config();
            config.useSentinelServers()
                .setMasterName(rest.substring(0, at))
                .addSentinelAddress(rest.substring(at + 1).split(","));
        } else {
            config = Config.fromYAML(new File(target));
        }
        String synced = System.getProperty("bench.checkLockSyncedSlaves");
        if (synced != null) {
            config.setCheckLockSyncedSlaves(Boolean.parseBoolean(synced));
        }
        return config;
    }

    /**
     * {@code redlock}: a RedissonRedLock over {@code url} and {@code others} (one client per
     * server, lock {@code bench:family:jred}) against one RLock on {@code url}
     * ({@code bench:family:jsingle}), lock()/unlock() cycles on one thread, after a warm-up, in
     * alternating 25 ms slices for {@code durationMs}, as benches/lock/family.rs measures the
     * Rust pair. Prints both mean rates and the median per-slice time ratio.
     */
    @SuppressWarnings("deprecation")
    static String redLock(String url, long durationMs, String[] others) {
        RedissonClient[] clients = new RedissonClient[others.length + 1];
        RLock[] members = new RLock[clients.length];
        for (int i = 0; i < clients.length; i++) {
            Config config = new Config();
            config.useSingleServer().setAddress(i == 0 ? url : others[i - 1]);
            clients[i] = Redisson.create(config);
            members[i] = clients[i].getLock("bench:family:jred");
        }
        try {
            RLock red = clients[0].getRedLock(members);
            RLock single = clients[0].getLock("bench:family:jsingle");
            Runnable redCycle = () -> { red.lock(); red.unlock(); };
            Runnable singleCycle = () -> { single.lock(); single.unlock(); };
            long warm = System.nanoTime() + WARMUP_MS * 1_000_000L;
            while (System.nanoTime() < warm) {
                redCycle.run();
                singleCycle.run();
            }
            int slices = (int) Math.max(4, durationMs / 25);
            double[] ratios = new double[slices / 2];
            double redSum = 0;
            double singleSum = 0;
            for (int k = 0; k < ratios.length; k++) {
                double r = slice(k % 2 == 0 ? redCycle : singleCycle);
                double o = slice(k % 2 == 0 ? singleCycle : redCycle);
                double redRate = k % 2 == 0 ? r : o;
                double singleRate = k % 2 == 0 ? o : r;
                redSum += redRate;
                singleSum += singleRate;
                ratios[k] = singleRate / redRate;
            }
            Arrays.sort(ratios);
            return "{\"scenario\":\"redlock\",\"members\":" + clients.length
                + ",\"redlock_cycles_per_sec\":" + fmt(redSum / ratios.length)
                + ",\"single_cycles_per_sec\":" + fmt(singleSum / ratios.length)
                + ",\"redlock_cycle_ratio\":" + String.format(Locale.ROOT, "%.3f", ratios[ratios.length / 2]) + "}";
        } finally {
            for (RedissonClient c : clients) {
                c.shutdown(0, 2, TimeUnit.SECONDS);
            }
        }
    }

    /** Runs {@code op} for 25 ms; its rate per second. */
    static double slice(Runnable op) {
        long start = System.nanoTime();
        long end = start + 25_000_000L;
        long n = 0;
        long now;
        do {
            op.run();
            n++;
            now = System.nanoTime();
        } while (now < end);
        return n / ((now - start) / 1e9);
    }

    /**
     * {@code rounds}: after the suite, in the same warm JVM, one hand-off measurement per
     * stdin line {@code handoff <threads> <durationMs> <samplesFile>}, each answered with its
     * JSON line, until stdin ends; "ready" says the first line may come. The Rust side
     * alternates these with its own, so both libraries meet the same noise.
     */
    static void rounds(RedissonClient client, PrintStream out) throws IOException, InterruptedException {
        java.io.BufferedReader in = new java.io.BufferedReader(
            new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("ready");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w.length != 4 || !w[0].equals("handoff")) {
                out.println("{\"error\":\"bad round " + line.replace('"', ' ') + "\"}");
                out.flush();
                continue;
            }
            out.println(measure(client, "handoff", Integer.parseInt(w[1]), Long.parseLong(w[2]), 1, w[3]));
            out.flush();
        }
    }

    /**
     * The Java side of the bench's cross-language fairness scenario, the same protocol as
     * the Rust bench's {@code --fairness-child}: eight threads loop lock(), a 20 µs section,
     * unlock() on one lock between a "go" and a "stop" line on stdin; the process says
     * "ready" once warmed up and "sections n1 ... n8" at the end.
     */
    static void fairChild(String target, String name, PrintStream out) throws Exception {
        final int threads = 8;
        RedissonClient client = Redisson.create(config(target));
        try {
            // JIT warm-up on a lock of its own, so the measured window is not the JVM's
            // slow start.
            run(client, "uncontended", 1, WARMUP_MS, 1, null);
            AtomicLong[] counts = new AtomicLong[threads];
            CountDownLatch go = new CountDownLatch(1);
            java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            Thread[] workers = new Thread[threads];
            for (int t = 0; t < threads; t++) {
                AtomicLong count = counts[t] = new AtomicLong();
                workers[t] = new Thread(() -> {
                    RLock lock = client.getLock(name);
                    try {
                        go.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    while (!stop.get()) {
                        lock.lock();
                        try {
                            long spin = System.nanoTime();
                            while (System.nanoTime() - spin < CRITICAL_NS) {
                                Thread.onSpinWait();
                            }
                            count.incrementAndGet();
                        } finally {
                            lock.unlock();
                        }
                    }
                });
                workers[t].start();
            }
            java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
            out.println("ready");
            out.flush();
            in.readLine(); // "go"
            go.countDown();
            in.readLine(); // "stop", or the parent went away
            stop.set(true);
            for (Thread w : workers) {
                w.join();
            }
            StringBuilder sb = new StringBuilder("sections");
            for (AtomicLong c : counts) {
                sb.append(' ').append(c.get());
            }
            out.println(sb);
            out.flush();
        } finally {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        }
    }

    /** CPU ns of this JVM process so far, all threads; -1 where the JVM does not report it. */
    static long processCpuNs() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean sun) {
            return sun.getProcessCpuTime();
        }
        return -1;
    }

    /** Measures one scenario; returns its JSON line and writes its samples if asked. */
    static String measure(RedissonClient client, String scenario, int threads, long durationMs, int keys,
                          String samplesFile) throws InterruptedException, IOException {
        Samples samples = new Samples();
        long cpu0 = processCpuNs();
        long t0 = System.nanoTime();
        long ops = run(client, scenario, threads, durationMs, keys, samples);
        double elapsedS = (System.nanoTime() - t0) / 1e9;
        long cpu1 = processCpuNs();

        StringBuilder sb = new StringBuilder();
        sb.append("{\"scenario\":\"").append(scenario).append('"');
        sb.append(",\"threads\":").append(threads);
        sb.append(",\"ops\":").append(ops);
        sb.append(",\"ops_per_sec\":").append(fmt(ops / elapsedS));
        // The whole JVM's CPU (every thread: callers, Netty's event loops, JIT, GC) per
        // operation, to set beside the Rust client's own; null where the JVM cannot say.
        sb.append(",\"cpu_us_per_op\":")
            .append(cpu0 < 0 || cpu1 < 0 || ops == 0 ? "null" : fmt((cpu1 - cpu0) / 1e3 / ops));
        long[] handoff = samples.handoff.sorted();
        long[] takeover = samples.takeover.sorted();
        boolean h = scenario.equals("handoff");
        sb.append(",\"handoff_samples\":").append(h ? String.valueOf(handoff.length) : "null");
        sb.append(",\"handoff_p50_us\":").append(h ? pct(handoff, 0.50) : "null");
        sb.append(",\"handoff_p99_us\":").append(h ? pct(handoff, 0.99) : "null");
        sb.append(",\"handoff_p999_us\":").append(h ? pct(handoff, 0.999) : "null");
        sb.append(",\"takeover_samples\":").append(h ? String.valueOf(takeover.length) : "null");
        sb.append(",\"takeover_p50_us\":").append(h ? pct(takeover, 0.50) : "null");
        sb.append(",\"takeover_p99_us\":").append(h ? pct(takeover, 0.99) : "null");
        sb.append('}');
        if (samplesFile != null) {
            try (BufferedWriter w = Files.newBufferedWriter(Paths.get(samplesFile), StandardCharsets.UTF_8)) {
                write(w, "handoff", handoff);
                write(w, "takeover", takeover);
            }
        }
        return sb.toString();
    }

    static void write(BufferedWriter w, String metric, long[] nanos) throws IOException {
        for (long ns : nanos) {
            w.write(metric);
            w.write(',');
            w.write(String.format(Locale.ROOT, "%.3f", ns / 1000.0));
            w.newLine();
        }
    }

    static String fmt(double d) {
        return String.format(Locale.ROOT, "%.1f", d);
    }

    /** Percentile of sorted nanosecond samples in µs, with the Rust side's rank rule; null if none. */
    static String pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return "null";
        }
        int idx = (int) Math.round((sorted.length - 1) * q);
        return fmt(sorted[idx] / 1000.0);
    }

    /** A growable array of longs. */
    static final class Longs {
        private long[] a = new long[1024];
        private int n;

        synchronized void add(long v) {
            if (n == a.length) {
                a = Arrays.copyOf(a, n * 2);
            }
            a[n++] = v;
        }

        synchronized long[] sorted() {
            long[] s = Arrays.copyOf(a, n);
            Arrays.sort(s);
            return s;
        }
    }

    static final class Samples {
        final Longs handoff = new Longs();
        final Longs takeover = new Longs();
    }

    /** Records an acquisition by thread {@code id} whose lock() call started at {@code called}. */
    static void acquired(int id, long called, Samples samples) {
        long now = System.nanoTime();
        synchronized (REC) {
            if (samples == null) {
                return;
            }
            if (lastReleaser >= 0 && lastReleaser != id) {
                samples.handoff.add(now - lastUnlockStart);
            }
            lastReleaser = -1;
            // The first unlock-call start at or after our call: binary search.
            int lo = 0;
            int hi = unlockCount;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (unlockStarts[mid] < called) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if (lo < unlockCount) {
                samples.takeover.add(now - unlockStarts[lo]);
            }
        }
    }

    /** Called by the holder just before unlock(). */
    static void releasing(int id) {
        synchronized (REC) {
            long now = System.nanoTime();
            lastReleaser = id;
            lastUnlockStart = now;
            if (unlockCount == unlockStarts.length) {
                unlockStarts = Arrays.copyOf(unlockStarts, unlockCount * 2);
            }
            unlockStarts[unlockCount++] = now;
        }
    }

    /** Runs the scenario for durationMs on `threads` threads; returns completed lock/unlock pairs. */
    static long run(RedissonClient client, String scenario, int threads, long durationMs, int keys,
                    Samples samples) throws InterruptedException {
        boolean handoff = scenario.equals("handoff");
        AtomicLong ops = new AtomicLong();
        CountDownLatch start = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(threads);
        long[] deadline = new long[1];
        synchronized (REC) {
            lastReleaser = -1;
            unlockCount = 0;
        }
        for (int t = 0; t < threads; t++) {
            final int id = t;
            Thread thread = new Thread(() -> {
                RLock handoffLock = handoff ? client.getLock("bench:h") : null;
                long count = 0;
                try {
                    start.await();
                    long end = deadline[0];
                    int i = id;
                    while (System.nanoTime() < end) {
                        if (handoff) {
                            long called = System.nanoTime();
                            handoffLock.lock();
                            acquired(id, called, samples);
                            long spin = System.nanoTime();
                            while (System.nanoTime() - spin < CRITICAL_NS) {
                                Thread.onSpinWait();
                            }
                            releasing(id);
                            handoffLock.unlock();
                        } else {
                            RLock lock = client.getLock("bench:u:" + i);
                            lock.lock();
                            lock.unlock();
                            i = i + threads < keys ? i + threads : id;
                        }
                        count++;
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } catch (RuntimeException e) {
                    System.err.println("bench thread " + id + " failed: " + e);
                } finally {
                    ops.addAndGet(count);
                    done.countDown();
                }
            }, "bench-" + t);
            thread.start();
        }
        deadline[0] = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(durationMs);
        start.countDown();
        done.await();
        return ops.get();
    }
}
