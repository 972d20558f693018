package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/conch-project/conch/internal/systemdtest"
)

// The history of a multi-node scenario has two sources, both independent of conch's logs:
// what the children recorded (testdata/histchild: start and end, CLOCK_MONOTONIC, node,
// CONCH_REV, CONCH_LEASE), completed by the end of each child as seen from the host through a
// pidfd (a SIGKILLed child records no end), and etcd's own watch history of conch's keys,
// observed from the host on every member. All times are CLOCK_MONOTONIC nanoseconds: nodes
// share the host's kernel.

// childRec is one child's history.
type childRec struct {
	ID    string
	Node  string `json:"node"`
	PID   int    `json:"pid"`
	Sema  string `json:"sema"`
	Max   string `json:"max"`
	Rev   string `json:"rev"`
	Lease string `json:"lease"`
	Start int64  `json:"mono_ns"`
	End   int64  // from the end record, 0 if none
	How   string // "done", "term", "" without an end record
	Gone  int64  // when the process was seen ending from the host (pidfd), 0 if not seen
}

// until returns when the child ended: its own end record (written just before it exits), else
// its end as seen from the host through a pidfd (a SIGKILLed child records nothing), else never
// (math.MaxInt64: still running, or its end is unknown).
func (c childRec) until() int64 {
	switch {
	case c.End > 0:
		return c.End
	case c.Gone > 0:
		return c.Gone
	default:
		return 1<<63 - 1
	}
}

func (c childRec) rev() int64 { v, _ := strconv.ParseInt(c.Rev, 10, 64); return v }

// monoNow returns CLOCK_MONOTONIC in nanoseconds, the clock of the history.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// recorder follows the history folder: it reads the children's records and, for each child it
// sees start, opens a pidfd on the child's host PID to note when it ends.
type recorder struct {
	dir   string
	nodes func() map[string]*systemdtest.Node // by machine name, at this moment

	mu   sync.Mutex
	gone map[string]int64 // by child ID
	seen map[string]bool
	stop chan struct{}
	wg   sync.WaitGroup
}

func newRecorder(dir string, nodes func() map[string]*systemdtest.Node) *recorder {
	r := &recorder{dir: dir, nodes: nodes, gone: map[string]int64{}, seen: map[string]bool{}, stop: make(chan struct{})}
	r.wg.Go(r.follow)
	return r
}

// close stops the recorder's goroutines and waits for them.
func (r *recorder) close() {
	close(r.stop)
	r.wg.Wait()
}

// follow polls the folder every 10 ms for new start records until stop.
func (r *recorder) follow() {
	for {
		entries, _ := os.ReadDir(r.dir)
		for _, e := range entries {
			id, ok := strings.CutSuffix(e.Name(), ".start")
			if !ok || r.isSeen(id) {
				continue
			}
			c, err := readChild(r.dir, id)
			if err != nil || c.End > 0 {
				continue // half written (retry), or over before we looked
			}
			r.markSeen(id)
			r.watchPID(c)
		}
		select {
		case <-r.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (r *recorder) isSeen(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id]
}

func (r *recorder) markSeen(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[id] = true
}

// watchPID finds the child's PID in the host's namespace and waits for it on a pidfd.
func (r *recorder) watchPID(c childRec) {
	n := r.nodes()[c.Node]
	if n == nil {
		return
	}
	ns, err := n.PIDNamespace()
	if err != nil {
		return
	}
	pid := hostPID(ns, c.PID)
	if pid == 0 {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	r.wg.Go(func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 100)
			if n > 0 || (err != nil && !errors.Is(err, unix.EINTR)) {
				r.mu.Lock()
				r.gone[c.ID] = monoNow()
				r.mu.Unlock()
				return
			}
			select {
			case <-r.stop:
				return
			default:
			}
		}
	})
}

// hostPID returns the host PID of the process that is nsPID in the PID namespace ns, or 0.
func hostPID(ns string, nsPID int) int {
	entries, _ := os.ReadDir("/proc")
	want := strconv.Itoa(nsPID)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || l != ns {
			continue
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == want {
				return pid
			}
		}
	}
	return 0
}

// readChild reads one child's start record and, if present, its end record.
func readChild(dir, id string) (childRec, error) {
	c := childRec{ID: id}
	data, err := os.ReadFile(filepath.Join(dir, id+".start"))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, err
	}
	if data, err := os.ReadFile(filepath.Join(dir, id+".end")); err == nil {
		var end struct {
			Mono int64  `json:"mono_ns"`
			How  string `json:"how"`
		}
		if err := json.Unmarshal(data, &end); err != nil {
			return c, err
		}
		c.End, c.How = end.Mono, end.How
	}
	return c, nil
}

// children returns the history of every child of semaphore name so far.
func (r *recorder) children(name string) []childRec {
	entries, _ := os.ReadDir(r.dir)
	var out []childRec
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".start")
		if !ok {
			continue
		}
		c, err := readChild(r.dir, id)
		if err != nil || c.Sema != name {
			continue
		}
		r.mu.Lock()
		c.Gone = r.gone[id]
		r.mu.Unlock()
		out = append(out, c)
	}
	return out
}

// keyEvent is one event of etcd's watch history of conch's keys, as the host saw it first.
type keyEvent struct {
	Put       bool
	Key       string
	CreateRev int64
	ModRev    int64
	Lease     int64
	Mono      int64 // when the first member's watch delivered it
}

// observer watches conch's key prefix on every member separately (one client per member, so
// a cut or frozen member delays only its own copy) and keeps the union of the events, each at
// the time it was first seen.
type observer struct {
	mu     sync.Mutex
	events map[string]keyEvent // by "modrev key type"
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newObserver starts watching prefix from revision from on each client.
func newObserver(clients []*clientv3.Client, prefix string, from int64) *observer {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{events: map[string]keyEvent{}, cancel: cancel}
	for _, cli := range clients {
		o.wg.Go(func() { o.follow(ctx, cli, prefix, from) })
	}
	return o
}

func (o *observer) close() {
	o.cancel()
	o.wg.Wait()
}

// follow watches from rev, starting again after the last revision seen when the watch ends.
func (o *observer) follow(ctx context.Context, cli *clientv3.Client, prefix string, rev int64) {
	for ctx.Err() == nil {
		for wr := range cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithPrevKV()) {
			if wr.CompactRevision > 0 { // history lost: the checker sees a gap, not a hang
				rev = wr.CompactRevision
			}
			if wr.Err() != nil {
				break
			}
			now := monoNow()
			for _, ev := range wr.Events {
				o.add(ev, now)
				rev = max(rev, ev.Kv.ModRevision+1)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (o *observer) add(ev *clientv3.Event, now int64) {
	e := keyEvent{Put: ev.Type == clientv3.EventTypePut, Key: string(ev.Kv.Key), CreateRev: ev.Kv.CreateRevision,
		ModRev: ev.Kv.ModRevision, Lease: ev.Kv.Lease, Mono: now}
	if !e.Put && ev.PrevKv != nil { // a DELETE carries only the key and its revision
		e.CreateRev, e.Lease = ev.PrevKv.CreateRevision, ev.PrevKv.Lease
	}
	id := fmt.Sprintf("%d %s %v", e.ModRev, e.Key, e.Put)
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.events[id]; !ok || old.Mono > now {
		o.events[id] = e
	}
}

// history returns the events under prefix in revision order.
func (o *observer) history(prefix string) []keyEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []keyEvent
	for _, e := range o.events {
		if strings.HasPrefix(e.Key, prefix) {
			out = append(out, e)
		}
	}
	sortEvents(out)
	return out
}
