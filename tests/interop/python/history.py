"""The history mode of the redis-py peer, for redmutex's verification harness
(docs/verify.md, the token-lease workload):

    python peer.py history <lock-url> <direct-url> <name> <mode> <threads> <millis> \
        <lease-ms> <history-dir> <cell> <label> <seed>

Each thread has its own redis-py client over the lock URL (the fault proxy) and loops:
acquire a ``Lock`` with a lease and about 300 ms of blocking, take the entry snapshot
(one MULTI on the direct, fault-free connection: the occupancy update, the string key's
value and its PTTL), GET and SET a counter around a pause, take the exit snapshot,
release. Every operation is a JSON line of ``<history-dir>/<cell>.<label>-t<k>.jsonl`` in
the format of the Rust and Java workers, with CLOCK_MONOTONIC nanoseconds. redis-py's
``Lock`` keeps no validity of its own, so its lines carry no ``trusted``: its lost holds
are judged by the snapshots only.
"""

import json
import os
import random
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Recorder:
    def __init__(self, path, base):
        self.out = open(path, "w", buffering=1 << 16)
        self.base = base

    def record(self, op, kind, **extra):
        line = dict(self.base)
        line.update(op=op, type=kind, ns=mono_ns())
        line.update(extra)
        self.out.write(json.dumps(line) + "\n")
        # A killed process's file must say what it held (as the Rust worker's does).
        if op in ("acquire", "release"):
            self.out.flush()


def thread(k, a, owner, end, version):
    lease_ms = a["lease_ms"]
    name = a["name"]
    path = os.path.join(a["dir"], f"{a['cell']}.{a['label']}-t{k}.jsonl")
    rec = Recorder(path, {
        "cell": a["cell"], "process": a["label"], "thread": k, "language": "python",
        "version": version, "kind": "token", "name": name, "owner": owner,
        "mode": "lease", "lease_ms": lease_ms,
    })
    lock_client = redis.Redis.from_url(a["lock_url"], socket_timeout=0.5,
                                       socket_connect_timeout=1.0)
    direct = redis.Redis.from_url(a["direct_url"])
    rng = random.Random(a["seed"] ^ (k + 1) * 0x9E3779B9)
    occupancy, counter = name + ":verify:inside", name + ":verify:counter"

    def snapshot(token, delta):
        p = direct.pipeline(transaction=True)
        p.incrby(occupancy, delta)
        p.get(name)
        p.pttl(name)
        occ, value, pttl = p.execute()
        held = value is not None and value == token
        others = [] if held or value is None else [value.decode(errors="replace")]
        return {"occupancy": occ, "held": int(held), "others": others, "pttl": pttl}

    while time.monotonic() < end:
        lock = lock_client.lock(name, timeout=lease_ms / 1000, blocking_timeout=0.3,
                                sleep=0.02)
        rec.record("acquire", "invoke", call="lock")
        try:
            got = lock.acquire()
        except (redis.ConnectionError, redis.TimeoutError) as e:
            # The SET may have run with its reply lost: a possible hold.
            rec.record("acquire", "info", call="lock", error=str(e))
            continue
        if not got:
            rec.record("acquire", "fail", call="lock")
            continue
        token = lock.local.token
        rec.record("acquire", "ok", call="lock", token=token.decode(errors="replace"))
        rec.record("section-start", "invoke")
        rec.record("section-start", "ok", **snapshot(token, 1))
        hold_ms = 1 + rng.randrange(8)
        if rng.randrange(10) == 0:
            hold_ms = lease_ms * (50 + rng.randrange(80)) // 100
        rec.record("write", "invoke")
        value = int(direct.get(counter) or 0)
        time.sleep(hold_ms / 1000)
        direct.set(counter, value + 1)
        rec.record("write", "ok", value=value + 1)
        rec.record("section-end", "invoke")
        rec.record("section-end", "ok", **snapshot(token, -1))
        rec.record("release", "invoke")
        try:
            lock.release()
            rec.record("release", "ok")
        except LockNotOwnedError as e:
            rec.record("release", "fail", error=str(e))
        except (redis.ConnectionError, redis.TimeoutError, LockError) as e:
            rec.record("release", "info", error=str(e))
    rec.out.flush()


def main(argv):
    if len(argv) != 11:
        print("usage: peer.py history <lock-url> <direct-url> <name> <mode> <threads> "
              "<millis> <lease-ms> <history-dir> <cell> <label> <seed>", file=sys.stderr)
        sys.exit(2)
    keys = ["lock_url", "direct_url", "name", "mode", "threads", "millis", "lease_ms",
            "dir", "cell", "label", "seed"]
    a = dict(zip(keys, argv))
    for k in ("threads", "millis", "lease_ms", "seed"):
        a[k] = int(a[k])
    if a["mode"] != "lease":
        print("peer.py history: only the lease mode", file=sys.stderr)
        sys.exit(2)
    owners = [f"{a['label']}-t{k}" for k in range(a["threads"])]
    path = os.path.join(a["dir"], f"{a['cell']}.{a['label']}.owners")
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()}\n" + "".join(o + "\n" for o in owners))
    os.rename(path + ".tmp", path)
    # A thread that fails (a snapshot that cannot reach the server) fails the process,
    # as a Rust worker's thread does, instead of leaving a silent gap in the history.
    threading.excepthook = lambda args: (
        print(f"history thread failed: {args.exc_value!r}", file=sys.stderr),
        os._exit(1),
    )
    version = f"redis-py {redis.__version__}"
    end = time.monotonic() + a["millis"] / 1000
    threads = [threading.Thread(target=thread, args=(k, a, owners[k], end, version))
               for k in range(a["threads"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
