package main

// The history mode of the redsync peer, for redmutex's verification harness
// (docs/verify.md, the token-lease workload):
//
//	redsyncpeer history <lock-url> <direct-url> <name> <mode> <threads> <millis> <lease-ms> <history-dir> <cell> <label> <seed>
//
// Each thread has its own go-redsync mutex over the lock URL (the fault proxy) and
// loops: try to lock for about 300 ms with a lease, take the entry snapshot (one MULTI
// on the direct, fault-free connection: the occupancy update, the string key's value and
// its PTTL), GET and SET a counter around a pause, take the exit snapshot, unlock. Every
// operation is a JSON line of <history-dir>/<cell>.<label>-t<k>.jsonl, in the format of
// the Rust and Java workers, with CLOCK_MONOTONIC nanoseconds. `trusted` is the mutex's
// own validity (Until, dated by redsync from before its SET was sent).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// monoNs reads CLOCK_MONOTONIC, the clock of every worker's history on this host (Go's
// own monotonic reading has no fixed origin).
func monoNs() uint64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return uint64(ts.Sec)*1_000_000_000 + uint64(ts.Nsec)
}

type historyRecorder struct {
	out  *bufio.Writer
	file *os.File
	base map[string]any
}

// record appends one line; acquires and releases are flushed at once, so that a killed
// process's file says what it held (as the Rust worker does).
func (r *historyRecorder) record(op, kind string, extra map[string]any) {
	line := map[string]any{}
	for k, v := range r.base {
		line[k] = v
	}
	line["op"], line["type"], line["ns"] = op, kind, monoNs()
	for k, v := range extra {
		line[k] = v
	}
	b, _ := json.Marshal(line)
	r.out.Write(append(b, '\n'))
	if op == "acquire" || op == "release" {
		r.out.Flush()
	}
}

func runHistory(a []string) {
	if len(a) != 11 {
		fmt.Fprintln(os.Stderr, "usage: redsyncpeer history <lock-url> <direct-url> <name> <mode> <threads> <millis> <lease-ms> <history-dir> <cell> <label> <seed>")
		os.Exit(2)
	}
	lockURL, directURL, name, mode := a[0], a[1], a[2], a[3]
	threads, _ := strconv.Atoi(a[4])
	millis, _ := strconv.Atoi(a[5])
	leaseMs, _ := strconv.Atoi(a[6])
	dir, cell, label := a[7], a[8], a[9]
	seed, _ := strconv.ParseInt(a[10], 10, 64)
	if mode != "lease" {
		fmt.Fprintln(os.Stderr, "redsyncpeer history: only the lease mode (redsync has no watchdog)")
		os.Exit(2)
	}
	lockOpt, err := goredislib.ParseURL(lockURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	directOpt, err := goredislib.ParseURL(directURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The workers' timeouts, as the Rust worker's client has them.
	lockOpt.ReadTimeout, lockOpt.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	lockOpt.DialTimeout = time.Second
	ids := make([]string, threads)
	for k := range ids {
		ids[k] = fmt.Sprintf("%s-t%d", label, k)
	}
	owners := filepath.Join(dir, cell+"."+label+".owners")
	body := fmt.Sprintf("%d\n", os.Getpid())
	for _, id := range ids {
		body += id + "\n"
	}
	if err := os.WriteFile(owners+".tmp", []byte(body), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Rename(owners+".tmp", owners)
	end := time.Now().Add(time.Duration(millis) * time.Millisecond)
	lease := time.Duration(leaseMs) * time.Millisecond
	var wg sync.WaitGroup
	for k := 0; k < threads; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			historyThread(k, ids[k], lockOpt, directOpt, name, cell, label, dir, lease, end, seed)
		}(k)
	}
	wg.Wait()
}

func historyThread(k int, owner string, lockOpt, directOpt *goredislib.Options, name, cell, label, dir string, lease time.Duration, end time.Time, seed int64) {
	path := filepath.Join(dir, fmt.Sprintf("%s.%s-t%d.jsonl", cell, label, k))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rec := &historyRecorder{out: bufio.NewWriter(f), file: f, base: map[string]any{
		"cell": cell, "process": label, "thread": k, "language": "go", "version": versions(),
		"kind": "token", "name": name, "owner": owner, "mode": "lease", "lease_ms": lease.Milliseconds(),
	}}
	defer func() { rec.out.Flush(); f.Close() }()
	ctx := context.Background()
	rs := redsync.New(goredis.NewPool(goredislib.NewClient(lockOpt)))
	direct := goredislib.NewClient(directOpt)
	rng := rand.New(rand.NewSource(seed ^ int64(k+1)*0x9E3779B9))
	occupancy, counter := name+":verify:inside", name+":verify:counter"
	snapshot := func(token string, delta int64, trusted func() bool) map[string]any {
		var occ *goredislib.IntCmd
		var get *goredislib.StringCmd
		var pttl *goredislib.DurationCmd
		_, err := direct.TxPipelined(ctx, func(p goredislib.Pipeliner) error {
			occ = p.IncrBy(ctx, occupancy, delta)
			get = p.Get(ctx, name)
			pttl = p.PTTL(ctx, name)
			return nil
		})
		if err != nil && err != goredislib.Nil {
			fmt.Fprintln(os.Stderr, "snapshot:", err)
			os.Exit(1)
		}
		value, _ := get.Result()
		held := 0
		others := []string{}
		if value == token {
			held = 1
		} else if value != "" {
			others = append(others, value)
		}
		ms := pttl.Val().Milliseconds()
		if pttl.Val() < 0 {
			ms = int64(pttl.Val()) // -1 or -2, as Redis answers
		}
		return map[string]any{"occupancy": occ.Val(), "held": held, "others": others, "pttl": ms, "trusted": trusted()}
	}
	// About 300 ms of tries, as the Rust worker's timed acquires wait.
	tries := 15
	for time.Now().Before(end) {
		m := rs.NewMutex(name, redsync.WithExpiry(lease), redsync.WithTries(tries),
			redsync.WithRetryDelay(20*time.Millisecond))
		rec.record("acquire", "invoke", map[string]any{"call": "lock"})
		if err := m.LockContext(ctx); err != nil {
			kind := "info"
			if refused(err) {
				kind = "fail"
			}
			rec.record("acquire", kind, map[string]any{"call": "lock", "error": err.Error()})
			continue
		}
		token := m.Value()
		trusted := func() bool { return time.Now().Before(m.Until()) }
		rec.record("acquire", "ok", map[string]any{"call": "lock", "token": token})
		if !trusted() {
			rec.record("section-skip", "ok", nil)
		} else {
			rec.record("section-start", "invoke", nil)
			rec.record("section-start", "ok", snapshot(token, 1, trusted))
			hold := time.Duration(1+rng.Intn(8)) * time.Millisecond
			if rng.Intn(10) == 0 {
				hold = lease * time.Duration(50+rng.Intn(80)) / 100
			}
			rec.record("write", "invoke", nil)
			v, err := direct.Get(ctx, counter).Int64()
			if err != nil && err != goredislib.Nil {
				fmt.Fprintln(os.Stderr, "counter:", err)
				os.Exit(1)
			}
			time.Sleep(hold)
			if err := direct.Set(ctx, counter, v+1, 0).Err(); err != nil {
				fmt.Fprintln(os.Stderr, "counter:", err)
				os.Exit(1)
			}
			rec.record("write", "ok", map[string]any{"value": v + 1})
			rec.record("section-end", "invoke", nil)
			rec.record("section-end", "ok", snapshot(token, -1, trusted))
		}
		rec.record("release", "invoke", nil)
		ok, err := m.UnlockContext(ctx)
		switch {
		case ok:
			rec.record("release", "ok", nil)
		case err == nil || refused(err) || isExpired(err):
			rec.record("release", "fail", map[string]any{"error": fmt.Sprint(err)})
		default:
			rec.record("release", "info", map[string]any{"error": err.Error()})
		}
	}
}

// isExpired: redsync's "the lock was already expired" (joined per node).
func isExpired(err error) bool {
	return errors.Is(err, redsync.ErrLockAlreadyExpired)
}
