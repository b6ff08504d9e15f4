package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredislib "github.com/redis/go-redis/v9"
)

// criticalSection is the busy work inside a hand-off critical section, as in the Java
// and Rust benchmarks.
const criticalSection = 20 * time.Microsecond

// acquire locks m, calling Lock again whenever redsync gives up (its tries ran out while
// another owner held the key); it returns how many times it gave up.
func acquire(lock func() error) (int, error) {
	gaveUp := 0
	for {
		err := lock()
		if err == nil {
			return gaveUp, nil
		}
		if !refused(err) {
			return gaveUp, err
		}
		gaveUp++
	}
}

// splitOpts separates key=value options this command reads itself from the mutex options.
func splitOpts(a []string, own ...string) (map[string]string, []string) {
	mine := map[string]string{}
	var rest []string
	for _, opt := range a {
		k, v, _ := strings.Cut(opt, "=")
		if slices.Contains(own, k) {
			mine[k] = v
		} else {
			rest = append(rest, opt)
		}
	}
	return mine, rest
}

// section: n times { Lock; GET counter; SET counter+1; Unlock }, the read-modify-write
// protected only by the lock. The counter lives on the first redis URL.
func (w *worker) section(a []string) (string, error) {
	if len(a) < 4 {
		return "", usageError{"usage: section <name> <ttlMs> <counterKey> <n> [pause=MS] [mutex options]"}
	}
	n, err := number(a[3])
	if err != nil {
		return "", err
	}
	mine, opts := splitOpts(a[4:], "pause")
	var pause time.Duration
	if v, ok := mine["pause"]; ok {
		ms, err := number(v)
		if err != nil {
			return "", err
		}
		pause = time.Duration(ms) * time.Millisecond
	}
	m, err := w.newMutex(a[0], a[1], opts)
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	counter := w.p.clients[0]
	gaveUp := 0
	for i := int64(0); i < n; i++ {
		g, err := acquire(m.Lock)
		gaveUp += g
		if err != nil {
			return "", err
		}
		v, err := counter.Get(ctx, a[2]).Int64()
		if errors.Is(err, goredislib.Nil) {
			v, err = 0, nil
		}
		if err != nil {
			return "", err
		}
		if err := counter.Set(ctx, a[2], v+1, 0).Err(); err != nil {
			return "", err
		}
		if _, err := m.Unlock(); err != nil {
			// The key was no longer ours: the increment was not protected.
			return "", fmt.Errorf("lock lost inside the critical section: %w", err)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	if gaveUp > 0 {
		fmt.Fprintf(os.Stderr, "section %s: redsync gave up %d times and was called again\n", a[0], gaveUp)
	}
	return strconv.FormatInt(n, 10), nil
}

// bench: warmup + cycles uncontended Lock/Unlock pairs on one mutex; the reply is a JSON
// object with the measured cycles' mean and percentiles in nanoseconds.
func (w *worker) bench(a []string) (string, error) {
	if len(a) < 3 {
		return "", usageError{"usage: bench <name> <ttlMs> <cycles> [warmup=N] [mutex options]"}
	}
	cycles, err := number(a[2])
	if err != nil {
		return "", err
	}
	if cycles < 1 {
		return "", usageError{"bench needs at least one cycle"}
	}
	mine, opts := splitOpts(a[3:], "warmup")
	warmup := cycles / 10
	if v, ok := mine["warmup"]; ok {
		if warmup, err = number(v); err != nil {
			return "", err
		}
	}
	m, err := w.newMutex(a[0], a[1], opts)
	if err != nil {
		return "", err
	}
	cycle := func() error {
		if err := m.Lock(); err != nil {
			return err
		}
		_, err := m.Unlock()
		return err
	}
	for i := int64(0); i < warmup; i++ {
		if err := cycle(); err != nil {
			return "", err
		}
	}
	samples := make([]int64, 0, cycles)
	for i := int64(0); i < cycles; i++ {
		t0 := time.Now()
		if err := cycle(); err != nil {
			return "", err
		}
		samples = append(samples, time.Since(t0).Nanoseconds())
	}
	var sum int64
	for _, s := range samples {
		sum += s
	}
	slices.Sort(samples)
	return jsonLine(map[string]any{
		"library": versions(),
		"cycles":  cycles,
		"mean_ns": sum / cycles,
		"p50_ns":  samples[rank(len(samples), 0.50)],
		"p99_ns":  samples[rank(len(samples), 0.99)],
		"min_ns":  samples[0],
	})
}

// recorder keeps the hand-off bookkeeping of the Java and Rust benchmarks: who released
// last and when, and every unlock-call start (serialised by the lock itself).
type recorder struct {
	mu           sync.Mutex
	lastReleaser int
	lastUnlock   time.Time
	unlockStarts []time.Time
	handoff      []int64
	takeover     []int64
}

// acquired records an acquisition by thread id whose Lock call started at called.
func (r *recorder) acquired(id int, called time.Time) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastReleaser >= 0 && r.lastReleaser != id {
		r.handoff = append(r.handoff, now.Sub(r.lastUnlock).Nanoseconds())
	}
	r.lastReleaser = -1
	// The first unlock-call start at or after the call: how long the waiter went on
	// waiting once the lock had first been released while it waited.
	i, _ := slices.BinarySearchFunc(r.unlockStarts, called, func(t, c time.Time) int { return t.Compare(c) })
	if i < len(r.unlockStarts) {
		r.takeover = append(r.takeover, now.Sub(r.unlockStarts[i]).Nanoseconds())
	}
}

// releasing is called by the holder just before Unlock.
func (r *recorder) releasing(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.lastReleaser = id
	r.lastUnlock = now
	r.unlockStarts = append(r.unlockStarts, now)
}

// handoff: threads goroutines, each with its own mutex on one key, loop Lock; ~20 µs busy;
// Unlock for durationMs. The reply is a JSON object with the same fields as the Java
// Bench's handoff line, plus how often redsync's Lock gave up and was called again.
func (w *worker) handoff(a []string) (string, error) {
	if len(a) < 4 {
		return "", usageError{"usage: handoff <name> <ttlMs> <threads> <durationMs> [mutex options]"}
	}
	threads, err := number(a[2])
	if err != nil {
		return "", err
	}
	durationMs, err := number(a[3])
	if err != nil {
		return "", err
	}
	if threads < 1 {
		return "", usageError{"handoff needs at least one thread"}
	}
	rec := &recorder{lastReleaser: -1}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ops    int64
		gaveUp int
		first  error
	)
	start := make(chan struct{})
	var deadline time.Time
	for t := 0; t < int(threads); t++ {
		m, err := w.newMutex(a[0], a[1], a[4:])
		if err != nil {
			return "", err
		}
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			<-start
			var count int64
			var g int
			var failed error
			for time.Now().Before(deadline) {
				called := time.Now()
				n, err := acquire(m.Lock)
				g += n
				if err != nil {
					failed = err
					break
				}
				rec.acquired(id, called)
				spin := time.Now()
				for time.Since(spin) < criticalSection {
				}
				rec.releasing(id)
				if _, err := m.Unlock(); err != nil {
					failed = err
					break
				}
				count++
			}
			mu.Lock()
			ops += count
			gaveUp += g
			if first == nil {
				first = failed
			}
			mu.Unlock()
		}(t)
	}
	t0 := time.Now()
	deadline = t0.Add(time.Duration(durationMs) * time.Millisecond)
	close(start)
	wg.Wait()
	elapsed := time.Since(t0).Seconds()
	if first != nil {
		return "", first
	}
	slices.Sort(rec.handoff)
	slices.Sort(rec.takeover)
	return jsonLine(map[string]any{
		"library":          versions(),
		"scenario":         "handoff",
		"threads":          threads,
		"ops":              ops,
		"ops_per_sec":      round1(float64(ops) / elapsed),
		"handoff_samples":  len(rec.handoff),
		"handoff_p50_us":   pct(rec.handoff, 0.50),
		"handoff_p99_us":   pct(rec.handoff, 0.99),
		"handoff_p999_us":  pct(rec.handoff, 0.999),
		"takeover_samples": len(rec.takeover),
		"takeover_p50_us":  pct(rec.takeover, 0.50),
		"takeover_p99_us":  pct(rec.takeover, 0.99),
		"lock_gave_up":     gaveUp,
	})
}

// rank is the index of quantile q in n sorted samples, the Rust and Java benches' rule.
func rank(n int, q float64) int {
	return int(math.Round(float64(n-1) * q))
}

// pct is quantile q of sorted nanosecond samples in µs, or nil when there are none.
func pct(sorted []int64, q float64) any {
	if len(sorted) == 0 {
		return nil
	}
	return round1(float64(sorted[rank(len(sorted), q)]) / 1000)
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func jsonLine(v map[string]any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
