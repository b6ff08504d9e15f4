"""A redis-py ``Lock`` peer for redmutex's interop tests.

Speaks the line protocol of the Java Redisson peer (tests/interop/README.md, "Peer
protocol"); the commands are listed in tests/interop/python/README.md.

    python peer.py <redis-url>
"""

import json
import os
import queue
import sys
import threading
import time

import redis
from redis.lock import Lock


class Usage(Exception):
    """A bad command line; replied as IllegalArgumentException, like the Java peer."""


class BadNumber(Exception):
    """A bad number; replied as NumberFormatException, like the Java peer."""


CRITICAL_SECTION_NS = 20_000


def number(s):
    try:
        return int(s)
    except ValueError:
        raise BadNumber(f'For input string: "{s}"') from None


def options(args, allowed):
    """key=value words after the positional arguments."""
    out = {}
    for word in args:
        key, _, value = word.partition("=")
        if key not in allowed:
            raise Usage(f"unknown option {word}")
        out[key] = value
    return out


def seconds(ms):
    """redis-py takes seconds; a TTL of 0 or below means no TTL."""
    return None if ms <= 0 else ms / 1000


def rank(n, q):
    # floor(x + 0.5): the rank rule of the Java and Rust benches (Python's round() would
    # round halves to even).
    return int((n - 1) * q + 0.5)


def pct_us(sorted_ns, q):
    if not sorted_ns:
        return None
    return round(sorted_ns[rank(len(sorted_ns), q)] / 1000, 1)


class Output:
    """Reply lines: one write and flush per line, none after quit."""

    def __init__(self):
        self.lock = threading.Lock()
        self.closed = False

    def line(self, s):
        s = s.replace("\n", " ").replace("\r", " ").replace("\t", " ")
        with self.lock:
            if self.closed:
                return
            sys.stdout.write(s + "\n")
            sys.stdout.flush()

    def close(self):
        with self.lock:
            self.closed = True


class Peer:
    def __init__(self, url):
        self.url = url
        self.redis = redis.Redis.from_url(url)
        self.out = Output()
        self.workers = {}
        self.pending = 0
        self.idle = threading.Condition()

    def new_lock(self, name, ttl_ms, sleep_ms=None):
        kwargs = {}
        if sleep_ms is not None:
            kwargs["sleep"] = sleep_ms / 1000
        return Lock(self.redis, name, timeout=seconds(ttl_ms), **kwargs)

    def run(self):
        self.out.line(f"ready redis-py@{redis.__version__}")
        for raw in sys.stdin:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            words = line.split()
            if len(words) < 3:
                self.out.line(
                    f"{words[0]} err IllegalArgumentException usage: "
                    "<reqId> <threadName> <command> [args...]"
                )
                continue
            req, thread, cmd, args = words[0], words[1], words[2], words[3:]
            if cmd == "quit":
                self.out.line(f"{req} ok")
                self.out.close()
                self.redis.close()
                os._exit(0)
            if cmd == "halt":
                # A crash: nothing released, no client closed.
                self.out.line(f"{req} ok")
                os._exit(0)
            worker = self.workers.get(thread)
            if worker is None:
                worker = Worker(self, thread)
                self.workers[thread] = worker
            with self.idle:
                self.pending += 1
            worker.queue.put((req, cmd, args))
        # EOF: let submitted commands reply (at most 5 s), then exit.
        with self.idle:
            self.idle.wait_for(lambda: self.pending == 0, timeout=5)
        self.out.close()
        os._exit(0)

    def done(self):
        with self.idle:
            self.pending -= 1
            self.idle.notify_all()


class Worker:
    """One thread name: one thread running its commands in order, with its own Lock
    objects, so different names are different owners."""

    def __init__(self, peer, name):
        self.peer = peer
        self.locks = {}
        self.queue = queue.SimpleQueue()
        threading.Thread(target=self.loop, name=name, daemon=True).start()

    def loop(self):
        while True:
            req, cmd, args = self.queue.get()
            try:
                value = self.dispatch(cmd, args)
                reply = "ok" if value is None else f"ok {value}"
            except Usage as e:
                reply = f"err IllegalArgumentException {e}"
            except BadNumber as e:
                reply = f"err NumberFormatException {e}"
            except Exception as e:  # every failure is a reply, never a dead worker
                reply = f"err {type(e).__name__} {e}".rstrip()
            self.peer.out.line(f"{req} {reply}")
            self.peer.done()

    def lock_for(self, name, ttl_ms, sleep_ms):
        """The Lock this worker holds on name (a second acquire by the holder then meets
        its own key, as in redis-py), else a new one with these settings."""
        held = self.locks.get(name)
        if held is not None and held.local.token is not None:
            return held
        lk = self.peer.new_lock(name, ttl_ms, sleep_ms)
        self.locks[name] = lk
        return lk

    def existing(self, args, usage):
        if not args:
            raise Usage(f"usage: {usage}")
        lk = self.locks.get(args[0])
        if lk is None:
            raise Usage(f"no lock named {args[0]} on this thread: lock or trylock it first")
        return lk

    def dispatch(self, cmd, a):
        if cmd in ("lock", "trylock"):
            if len(a) < 2:
                raise Usage(f"usage: {cmd} <name> <ttlMs> [blocking_timeout=MS] [sleep=MS]")
            opt = options(a[2:], ("blocking_timeout", "sleep"))
            sleep = number(opt["sleep"]) if "sleep" in opt else None
            lk = self.lock_for(a[0], number(a[1]), sleep)
            if cmd == "trylock":
                return str(lk.acquire(blocking=False)).lower()
            bt = opt.get("blocking_timeout")
            bt = None if bt is None or number(bt) < 0 else number(bt) / 1000
            return str(lk.acquire(blocking=True, blocking_timeout=bt)).lower()
        if cmd == "unlock":
            self.existing(a, "unlock <name>").release()
            return None
        if cmd == "extend":
            if len(a) not in (2, 3) or (len(a) == 3 and a[2] != "replace"):
                raise Usage("usage: extend <name> <addMs> [replace]")
            lk = self.existing(a, "extend <name> <addMs> [replace]")
            lk.extend(number(a[1]) / 1000, replace_ttl=len(a) == 3)
            return None
        if cmd == "reacquire":
            self.existing(a, "reacquire <name>").reacquire()
            return None
        if cmd == "token":
            token = self.existing(a, "token <name>").local.token
            return "null" if token is None else token.decode()
        if cmd == "owned":
            return str(self.existing(a, "owned <name>").owned()).lower()
        if cmd == "locked":
            return str(self.existing(a, "locked <name>").locked()).lower()
        if cmd == "section":
            return self.section(a)
        if cmd == "bench":
            return self.bench(a)
        if cmd == "handoff":
            return self.handoff(a)
        if cmd == "sleep":
            if len(a) != 1:
                raise Usage("usage: sleep <ms>")
            time.sleep(number(a[0]) / 1000)
            return None
        raise Usage(f"unknown command {cmd}")

    def section(self, a):
        """n times { acquire; GET counter; SET counter+1; release }: the read-modify-write
        is protected only by the lock."""
        if len(a) < 4:
            raise Usage("usage: section <name> <ttlMs> <counterKey> <n> [pause=MS] [sleep=MS]")
        n = number(a[3])
        opt = options(a[4:], ("pause", "sleep"))
        pause = number(opt.get("pause", "0")) / 1000
        sleep = number(opt["sleep"]) if "sleep" in opt else None
        lk = self.peer.new_lock(a[0], number(a[1]), sleep)
        r = self.peer.redis
        for _ in range(n):
            lk.acquire(blocking=True)
            value = r.get(a[2])
            r.set(a[2], int(value or 0) + 1)
            # Raises LockNotOwnedError if the key was no longer ours: the increment was
            # then not protected, and the reply says so.
            lk.release()
            if pause:
                time.sleep(pause)
        return str(n)

    def bench(self, a):
        """warmup + cycles uncontended acquire/release pairs; a JSON object in ns."""
        if len(a) < 3:
            raise Usage("usage: bench <name> <ttlMs> <cycles> [warmup=N]")
        cycles = number(a[2])
        if cycles < 1:
            raise Usage("bench needs at least one cycle")
        opt = options(a[3:], ("warmup",))
        warmup = number(opt.get("warmup", str(cycles // 10)))
        lk = self.peer.new_lock(a[0], number(a[1]))
        for _ in range(warmup):
            lk.acquire()
            lk.release()
        samples = []
        clock = time.perf_counter_ns
        for _ in range(cycles):
            t0 = clock()
            lk.acquire()
            lk.release()
            samples.append(clock() - t0)
        total = sum(samples)
        samples.sort()
        return json.dumps(
            {
                "library": f"redis-py@{redis.__version__}",
                "cycles": cycles,
                "mean_ns": total // cycles,
                "p50_ns": samples[rank(cycles, 0.5)],
                "p99_ns": samples[rank(cycles, 0.99)],
                "min_ns": samples[0],
            },
            separators=(",", ":"),
        )

    def handoff(self, a):
        """threads threads, each with its own Lock on one key, loop acquire; ~20 µs busy;
        release for durationMs. Same fields and definitions as the Java Bench's line."""
        if len(a) < 4:
            raise Usage("usage: handoff <name> <ttlMs> <threads> <durationMs> [sleep=MS]")
        threads = number(a[2])
        duration = number(a[3]) / 1000
        if threads < 1:
            raise Usage("handoff needs at least one thread")
        opt = options(a[4:], ("sleep",))
        sleep = number(opt["sleep"]) if "sleep" in opt else None
        ttl = number(a[1])
        clock = time.perf_counter_ns
        rec = threading.Lock()
        state = {"last": -1, "last_unlock": 0, "starts": [], "handoff": [], "takeover": []}
        ops = [0] * threads
        errors = []
        start = threading.Event()
        deadline = [0]

        def acquired(me, called):
            now = clock()
            with rec:
                if state["last"] >= 0 and state["last"] != me:
                    state["handoff"].append(now - state["last_unlock"])
                state["last"] = -1
                # The first unlock-call start at or after the call.
                starts = state["starts"]
                lo, hi = 0, len(starts)
                while lo < hi:
                    mid = (lo + hi) // 2
                    if starts[mid] < called:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < len(starts):
                    state["takeover"].append(now - starts[lo])

        def releasing(me):
            with rec:
                now = clock()
                state["last"] = me
                state["last_unlock"] = now
                state["starts"].append(now)

        def body(me):
            lk = self.peer.new_lock(a[0], ttl, sleep)
            start.wait()
            try:
                while clock() < deadline[0]:
                    called = clock()
                    lk.acquire(blocking=True)
                    acquired(me, called)
                    spin = clock()
                    while clock() - spin < CRITICAL_SECTION_NS:
                        pass
                    releasing(me)
                    lk.release()
                    ops[me] += 1
            except Exception as e:
                errors.append(e)

        pool = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(threads)]
        for t in pool:
            t.start()
        t0 = clock()
        deadline[0] = t0 + int(duration * 1e9)
        start.set()
        for t in pool:
            t.join()
        elapsed = (clock() - t0) / 1e9
        if errors:
            raise errors[0]
        h = sorted(state["handoff"])
        t = sorted(state["takeover"])
        return json.dumps(
            {
                "library": f"redis-py@{redis.__version__}",
                "scenario": "handoff",
                "threads": threads,
                "ops": sum(ops),
                "ops_per_sec": round(sum(ops) / elapsed, 1),
                "handoff_samples": len(h),
                "handoff_p50_us": pct_us(h, 0.50),
                "handoff_p99_us": pct_us(h, 0.99),
                "handoff_p999_us": pct_us(h, 0.999),
                "takeover_samples": len(t),
                "takeover_p50_us": pct_us(t, 0.50),
                "takeover_p99_us": pct_us(t, 0.99),
            },
            separators=(",", ":"),
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "history":
        # history.py sits beside this file; no bytecode cache written into the source tree.
        sys.dont_write_bytecode = True
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import history

        history.main(sys.argv[2:])
        sys.exit(0)
    if len(sys.argv) != 2:
        print("usage: peer.py <redis-url>", file=sys.stderr)
        sys.exit(2)
    Peer(sys.argv[1]).run()
