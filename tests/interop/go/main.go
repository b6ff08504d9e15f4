// Command redsyncpeer drives real go-redsync/redsync v4 mutexes (over go-redis v9) for
// redmutex's interop tests. It speaks the same line protocol as the Java Redisson peer
// (tests/interop/README.md, "Peer protocol"); its own commands are listed in
// tests/interop/go/README.md.
//
//	redsyncpeer <redis-url> [<redis-url>...]
//
// One URL gives a single-server mutex; several give redsync's quorum over one pool per URL.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// usageError is a bad command line: the reply class is IllegalArgumentException, as the
// Java peer's.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// peer is the process-wide state: the redis clients, the redsync instance and the
// per-thread-name workers.
type peer struct {
	clients []*goredislib.Client
	rs      *redsync.Redsync
	out     *output

	mu      sync.Mutex
	workers map[string]*worker
	running sync.WaitGroup
}

// output serialises reply lines: one write per line, so lines never interleave, and none
// after quit.
type output struct {
	mu     sync.Mutex
	closed bool
}

func (o *output) line(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	// Newlines and tabs inside a message would break the one-line-per-reply rule.
	s = strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s)
	os.Stdout.WriteString(s + "\n")
}

func (o *output) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: redsyncpeer <redis-url> [<redis-url>...]")
		os.Exit(2)
	}
	if os.Args[1] == "history" {
		runHistory(os.Args[2:])
		return
	}
	p := &peer{out: &output{}, workers: map[string]*worker{}}
	var pools []redis.Pool
	for _, url := range os.Args[1:] {
		opt, err := goredislib.ParseURL(url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bad redis url %q: %v\n", url, err)
			os.Exit(2)
		}
		c := goredislib.NewClient(opt)
		if err := c.Ping(context.Background()).Err(); err != nil {
			// A quorum member may be down on purpose; redsync counts it as a failed node.
			fmt.Fprintf(os.Stderr, "warning: %s: %v\n", url, err)
		}
		p.clients = append(p.clients, c)
		pools = append(pools, goredis.NewPool(c))
	}
	p.rs = redsync.New(pools...)
	p.out.line("ready " + versions())
	p.readCommands()
}

// versions names the redsync and go-redis versions compiled in, e.g.
// redsync@v4.17.0,go-redis@v9.21.0; it is the peer's id on the ready line.
func versions() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "redsync@unknown"
	}
	var rs, gr string
	for _, d := range info.Deps {
		switch d.Path {
		case "github.com/go-redsync/redsync/v4":
			rs = d.Version
		case "github.com/redis/go-redis/v9":
			gr = d.Version
		}
	}
	return "redsync@" + rs + ",go-redis@" + gr
}

// readCommands is the stdin loop: quit and halt are handled here, everything else goes to
// the worker of its thread name.
func (p *peer) readCommands() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			p.out.line(f[0] + " err IllegalArgumentException usage: <reqId> <threadName> <command> [args...]")
			continue
		}
		id, thread, cmd := f[0], f[1], f[2]
		switch cmd {
		case "quit":
			p.out.line(id + " ok")
			p.out.close()
			p.shutdown()
			os.Exit(0)
		case "halt":
			// A crash: nothing is released, no client is closed.
			p.out.line(id + " ok")
			os.Exit(0)
		}
		p.workerFor(thread).submit(id, cmd, f[3:])
	}
	// EOF: let commands already submitted reply (at most 5 s), then exit.
	done := make(chan struct{})
	go func() { p.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	p.out.close()
	p.shutdown()
	os.Exit(0)
}

func (p *peer) shutdown() {
	for _, c := range p.clients {
		_ = c.Close()
	}
}

func (p *peer) workerFor(name string) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[name]
	if !ok {
		w = newWorker(p)
		p.workers[name] = w
	}
	return w
}

// request is one command line for a worker.
type request struct {
	id   string
	cmd  string
	args []string
}

// worker is one thread name: one goroutine running its commands in order, and its own
// mutexes, so different names are different lock owners.
type worker struct {
	p       *peer
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []request
	mutexes map[string]*held
}

// held is a worker's redsync mutex for one name and whether its last acquire succeeded
// with no successful unlock since.
type held struct {
	m      *redsync.Mutex
	locked bool
}

func newWorker(p *peer) *worker {
	w := &worker{p: p, mutexes: map[string]*held{}}
	w.cond = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// submit never blocks the stdin reader: the queue is unbounded.
func (w *worker) submit(id, cmd string, args []string) {
	w.p.running.Add(1)
	w.mu.Lock()
	w.queue = append(w.queue, request{id, cmd, args})
	w.mu.Unlock()
	w.cond.Signal()
}

func (w *worker) loop() {
	for {
		w.mu.Lock()
		for len(w.queue) == 0 {
			w.cond.Wait()
		}
		r := w.queue[0]
		w.queue = w.queue[1:]
		w.mu.Unlock()
		w.p.out.line(r.id + " " + w.run(r))
		w.p.running.Done()
	}
}

// run executes one command and returns "ok [value]" or "err <Class> <message>".
func (w *worker) run(r request) (reply string) {
	defer func() {
		if e := recover(); e != nil {
			reply = "err panic " + fmt.Sprint(e)
		}
	}()
	v, err := w.dispatch(r.cmd, r.args)
	if err != nil {
		return "err " + errorClass(err) + " " + err.Error()
	}
	if v == "" {
		return "ok"
	}
	return "ok " + v
}

func (w *worker) dispatch(cmd string, a []string) (string, error) {
	switch cmd {
	case "lock", "trylock":
		if len(a) < 2 {
			return "", usageError{"usage: " + cmd + " <name> <ttlMs> [tries=N] [delay=MS] [drift=F] [timeoutfactor=F] [setnx] [failfast]"}
		}
		h, err := w.mutex(a[0], a[1], a[2:])
		if err != nil {
			return "", err
		}
		if cmd == "lock" {
			err = h.m.Lock()
		} else {
			err = h.m.TryLock()
		}
		if err == nil {
			h.locked = true
			return "true", nil
		}
		if refused(err) {
			return "false", nil
		}
		return "", err
	case "unlock":
		h, err := w.existing(a, "unlock <name>")
		if err != nil {
			return "", err
		}
		ok, err := h.m.Unlock()
		if err != nil {
			return "", err
		}
		if !ok {
			return "", errors.New("Unlock returned false without an error")
		}
		h.locked = false
		return "", nil
	case "extend":
		h, err := w.existing(a, "extend <name>")
		if err != nil {
			return "", err
		}
		ok, err := h.m.Extend()
		if err != nil {
			return "", err
		}
		if !ok {
			return "", errors.New("Extend returned false without an error")
		}
		return "", nil
	case "value":
		h, err := w.existing(a, "value <name>")
		if err != nil {
			return "", err
		}
		return orNull(h.m.Value()), nil
	case "until":
		h, err := w.existing(a, "until <name>")
		if err != nil {
			return "", err
		}
		if h.m.Until().IsZero() {
			return "null", nil
		}
		return strconv.FormatInt(time.Until(h.m.Until()).Milliseconds(), 10), nil
	case "valid":
		h, err := w.existing(a, "valid <name>")
		if err != nil {
			return "", err
		}
		// ValidContext also reports per-node errors when a quorum still agrees; the
		// verdict is the boolean.
		ok, _ := h.m.Valid()
		return strconv.FormatBool(ok), nil
	case "section":
		return w.section(a)
	case "bench":
		return w.bench(a)
	case "handoff":
		return w.handoff(a)
	case "sleep":
		if len(a) != 1 {
			return "", usageError{"usage: sleep <ms>"}
		}
		ms, err := number(a[0])
		if err != nil {
			return "", err
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return "", nil
	default:
		return "", usageError{"unknown command " + cmd}
	}
}

// mutex returns the worker's mutex for name: the one it holds (so a second acquire by the
// holder meets its own key, as in redsync), else a new one with these options.
func (w *worker) mutex(name, ttl string, opts []string) (*held, error) {
	if h, ok := w.mutexes[name]; ok && h.locked {
		return h, nil
	}
	m, err := w.newMutex(name, ttl, opts)
	if err != nil {
		return nil, err
	}
	h := &held{m: m}
	w.mutexes[name] = h
	return h, nil
}

func (w *worker) newMutex(name, ttl string, opts []string) (*redsync.Mutex, error) {
	ms, err := number(ttl)
	if err != nil {
		return nil, err
	}
	o := []redsync.Option{redsync.WithExpiry(time.Duration(ms) * time.Millisecond)}
	for _, opt := range opts {
		k, v, _ := strings.Cut(opt, "=")
		switch k {
		case "tries":
			n, err := number(v)
			if err != nil {
				return nil, err
			}
			o = append(o, redsync.WithTries(int(n)))
		case "delay":
			n, err := number(v)
			if err != nil {
				return nil, err
			}
			o = append(o, redsync.WithRetryDelay(time.Duration(n)*time.Millisecond))
		case "drift", "timeoutfactor":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, numberError{v}
			}
			if k == "drift" {
				o = append(o, redsync.WithDriftFactor(f))
			} else {
				o = append(o, redsync.WithTimeoutFactor(f))
			}
		case "setnx":
			o = append(o, redsync.WithSetNXOnExtend())
		case "failfast":
			o = append(o, redsync.WithFailFast(true))
		case "value":
			o = append(o, redsync.WithValue(v))
		default:
			return nil, usageError{"unknown mutex option " + opt}
		}
	}
	return w.p.rs.NewMutex(name, o...), nil
}

func (w *worker) existing(a []string, usage string) (*held, error) {
	if len(a) != 1 {
		return nil, usageError{"usage: " + usage}
	}
	h, ok := w.mutexes[a[0]]
	if !ok {
		return nil, usageError{"no mutex named " + a[0] + " on this thread: lock or trylock it first"}
	}
	return h, nil
}

// refused tells a lock that was not granted (the key is held elsewhere, or the retries ran
// out) from a failure to talk to a quorum of nodes.
func refused(err error) bool {
	if errors.Is(err, redsync.ErrFailed) {
		return true
	}
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) {
		return true
	}
	// A joined error where every part is "node taken" (no node failed).
	var multi interface{ Unwrap() []error }
	if errors.As(err, &multi) {
		for _, e := range multi.Unwrap() {
			var nt *redsync.ErrNodeTaken
			if !errors.As(e, &nt) {
				return false
			}
		}
		return true
	}
	var nt *redsync.ErrNodeTaken
	return errors.As(err, &nt)
}

// errorClass names an error for the err reply: the redsync error it is, else its Go type.
// A joined per-node error (errors.Join in redsync) is named by its most telling part, in
// a fixed order so the class does not depend on which node answered first: a node that
// could not be reached, then an expired lock, then a node held by another owner.
func errorClass(err error) string {
	var ue usageError
	if errors.As(err, &ue) {
		return "IllegalArgumentException"
	}
	var ne numberError
	if errors.As(err, &ne) {
		return "NumberFormatException"
	}
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	var redisErr *redsync.RedisError
	switch {
	case errors.Is(err, redsync.ErrFailed):
		return "ErrFailed"
	case errors.Is(err, redsync.ErrExtendFailed):
		return "ErrExtendFailed"
	case errors.As(err, &taken):
		return "ErrTaken"
	case errors.As(err, &redisErr):
		return "RedisError"
	case errors.Is(err, redsync.ErrLockAlreadyExpired):
		return "ErrLockAlreadyExpired"
	case errors.As(err, &nodeTaken):
		return "ErrNodeTaken"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
}

type numberError struct{ s string }

func (e numberError) Error() string { return "For input string: \"" + e.s + "\"" }

func number(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, numberError{s}
	}
	return n, nil
}

func orNull(s string) string {
	if s == "" {
		return "null"
	}
	return s
}
