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
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * The history mode of the Redisson peer: the Java worker of redmutex's verification harness
 * (docs/verify.md). Threads contend on one {@code RLock} and write every operation as a JSON
 * line in the same format as the Rust worker ({@code redmutex verify-worker}), timed with
 * {@code System.nanoTime}, which reads CLOCK_MONOTONIC on Linux as the Rust side does.
 *
 * <pre>
 * java -cp ... dev.redmutex.interop.History &lt;lock-url&gt; &lt;direct-url&gt; &lt;name&gt; lease|watchdog
 *     &lt;threads&gt; &lt;millis&gt; &lt;leaseMs&gt; &lt;historyDir&gt; &lt;cell&gt; &lt;process&gt; &lt;seed&gt;
 * </pre>
 *
 * <p>Each critical section takes its entry and exit snapshots on a separate fault-free client
 * in one script (atomic like the Rust side's MULTI): the occupancy update, this thread's field
 * in the lock's hash, the lock's PTTL. Redisson has no "is the hold still trusted" call, so Java
 * records carry no trust fields; the checkers count Java overstays separately.
 */
public final class History {

    private static final String SNAPSHOT =
            "local o = redis.call('INCRBY', KEYS[1], ARGV[1]) "
                    + "local h = redis.call('HGET', KEYS[2], ARGV[2]) "
                    + "local p = redis.call('PTTL', KEYS[2]) "
                    + "local others = 0 "
                    + "for i, f in ipairs(redis.call('HKEYS', KEYS[2])) do "
                    + "  if f ~= ARGV[2] then others = others + 1 end end "
                    + "return o .. ' ' .. (h or '0') .. ' ' .. p .. ' ' .. others";

    private History() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 11) {
            System.err.println("usage: History lockUrl directUrl name lease|watchdog threads millis"
                    + " leaseMs historyDir cell process seed");
            System.exit(2);
        }
        String lockUrl = args[0], directUrl = args[1], name = args[2], mode = args[3];
        int threads = Integer.parseInt(args[4]);
        long millis = Long.parseLong(args[5]);
        long leaseMs = Long.parseLong(args[6]);
        Path dir = Paths.get(args[7]);
        String cell = args[8], process = args[9];
        long seed = Long.parseUnsignedLong(args[10]);
        String version = "redisson " + Redisson.class.getPackage().getImplementationVersion();

        Config config = new Config();
        config.useSingleServer().setAddress(lockUrl).setTimeout(500).setRetryInterval(20)
                .setConnectTimeout(1000);
        config.setLockWatchdogTimeout(leaseMs);
        RedissonClient client = Redisson.create(config);
        Config directConfig = new Config();
        directConfig.useSingleServer().setAddress(directUrl);
        RedissonClient direct = Redisson.create(directConfig);
        String id = Peer.clientId(client);

        // The runner waits for this file before it faults anything, and reads the pid and
        // client id to find the holder's process for the SIGSTOP nemesis.
        Path owners = dir.resolve(cell + "." + process + ".owners");
        Path tmp = dir.resolve(cell + "." + process + ".owners.tmp");
        Files.writeString(tmp, ProcessHandle.current().pid() + "\n" + id + "\n");
        Files.move(tmp, owners, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);

        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        List<Thread> workers = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int k = 0; k < threads; k++) {
            final int thread = k;
            Thread t = new Thread(() -> {
                try {
                    run(client, direct, id, version, name, mode, leaseMs, dir, cell, process, thread,
                            seed ^ ((thread + 1) * 0x9E3779B97F4A7C15L), end);
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
        client.shutdown();
        direct.shutdown();
        if (!failures.isEmpty()) {
            failures.get(0).printStackTrace();
            System.exit(1);
        }
    }

    private static void run(RedissonClient client, RedissonClient direct, String id, String version,
            String name, String mode, long leaseMs, Path dir, String cell, String process, int thread,
            long seed, long end) throws IOException, InterruptedException {
        String field = id + ":" + Thread.currentThread().getId();
        String base = "\"cell\":" + q(cell) + ",\"process\":" + q(process) + ",\"thread\":" + thread
                + ",\"language\":\"java\",\"version\":" + q(version) + ",\"kind\":\"lock\",\"name\":"
                + q(name) + ",\"owner\":" + q(id) + ",\"field\":" + q(field) + ",\"mode\":" + q(mode)
                + ",\"lease_ms\":" + leaseMs;
        SplittableRandom rng = new SplittableRandom(seed);
        RLock lock = client.getLock(name);
        RScript script = direct.getScript(StringCodec.INSTANCE);
        List<Object> keys = Arrays.asList(name + ":verify:inside", name);
        String counter = name + ":verify:counter";
        boolean watchdog = mode.equals("watchdog");
        try (BufferedWriter out = Files.newBufferedWriter(
                dir.resolve(cell + "." + process + "-t" + thread + ".jsonl"), StandardCharsets.UTF_8)) {
            while (System.nanoTime() < end) {
                boolean blocking = rng.nextInt(2) == 0;
                String call = watchdog ? (blocking ? "lock" : "tryLock(wait)")
                        : (blocking ? "lock(lease)" : "tryLock(wait, lease)");
                record(out, base, "acquire", "invoke", ",\"call\":" + q(call));
                boolean got;
                try {
                    if (watchdog && blocking) {
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
                    record(out, base, "acquire", "info", ",\"error\":" + q(e.toString()));
                    continue;
                }
                if (!got) {
                    record(out, base, "acquire", "fail", "");
                    continue;
                }
                record(out, base, "acquire", "ok", "");
                record(out, base, "section-start", "invoke", "");
                record(out, base, "section-start", "ok", snapshot(script, keys, field, 1));
                long holdMs = rng.nextInt(10) == 0 ? leaseMs * (50 + rng.nextInt(80)) / 100
                        : 1 + rng.nextInt(8);
                record(out, base, "write", "invoke", "");
                String value = direct.<String>getBucket(counter, StringCodec.INSTANCE).get();
                Thread.sleep(holdMs);
                long next = (value == null ? 0 : Long.parseLong(value)) + 1;
                direct.<String>getBucket(counter, StringCodec.INSTANCE).set(Long.toString(next));
                record(out, base, "write", "ok", ",\"value\":" + next);
                record(out, base, "section-end", "invoke", "");
                record(out, base, "section-end", "ok", snapshot(script, keys, field, -1));
                record(out, base, "release", "invoke", "");
                try {
                    lock.unlock();
                    record(out, base, "release", "ok", "");
                } catch (IllegalMonitorStateException e) {
                    record(out, base, "release", "fail", ",\"error\":" + q(e.toString()));
                } catch (RuntimeException e) {
                    record(out, base, "release", "info", ",\"error\":" + q(e.toString()));
                }
            }
        }
    }

    /** The snapshot fields: occupancy after the update, this thread's hold count, PTTL. */
    private static String snapshot(RScript script, List<Object> keys, String field, int delta) {
        // One string (VALUE): the list return type is spelled differently in 3.x and 4.x.
        String reply = script.eval(RScript.Mode.READ_WRITE, SNAPSHOT, RScript.ReturnType.VALUE,
                keys, Integer.toString(delta), field);
        String[] r = reply.split(" ");
        return ",\"occupancy\":" + Long.parseLong(r[0]) + ",\"held\":" + Long.parseLong(r[1])
                + ",\"pttl\":" + Long.parseLong(r[2]) + ",\"others\":" + Long.parseLong(r[3]);
    }

    private static void record(BufferedWriter out, String base, String op, String type, String extra)
            throws IOException {
        out.write("{" + base + ",\"op\":" + q(op) + ",\"type\":" + q(type) + ",\"ns\":"
                + System.nanoTime() + extra + "}\n");
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
