package sema

import (
	"time"

	"github.com/conch-project/conch/sema/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults (04_sema.md "Flags", D3, D7).
const (
	DefaultTTL            = 10 * time.Second
	defaultConnectTimeout = 5 * time.Second
	DefaultFenceMargin    = 6 * time.Second // the default stop grace 5 s + 1 s (D7)
	retryMin              = 100 * time.Millisecond
	retryMax              = 2 * time.Second
)

// Options tune a Semaphore. The zero value of each field means its default.
type Options struct {
	// TTL is the lease TTL requested; etcd leases are whole seconds, so it
	// is rounded up, and the server may raise it to its minimum (D4).
	TTL time.Duration
	// ConnectTimeout bounds the very first request: if etcd does not answer
	// within it, Acquire returns ErrUnavailable whatever its ctx says (D3).
	ConnectTimeout time.Duration
	// FenceMargin is how long before the lease deadline a holder's context
	// is cancelled with ErrFenced: the child's stop grace + 1 s (D7).
	FenceMargin time.Duration
	// WaitKeepAlive is the keep-alive interval of our lease while our key
	// waits behind the head of the queue. Zero means TTL/6 (D7h); it is clamped
	// to [min(TTL/6, 1 s), TTL/3] (see waitKeepAlive). The head of the
	// queue and a holder always use min(TTL/6, 1 s) (D7).
	WaitKeepAlive time.Duration
	// Nonblock makes Acquire give up with ErrNoSlot instead of waiting
	// (flock -n style).
	Nonblock bool
	// Terse says the caller words no refusal (conch -q): a wait that ends
	// without a slot then skips the read that names the slots kept after a
	// run (WaitError.HeldAfter stays nil, D13e), one request fewer.
	Terse bool
	// Spread allows at most one slot per node (D11): our key is
	// Prefix(name, max) + Node instead of + our lease ID, still bound to
	// our lease, so a node that already has a key there (held or waiting)
	// finds "no slot free": Nonblock returns ErrNoSlot with errNodeHasKey,
	// otherwise Acquire waits for that key to go, then enqueues at the back.
	Spread bool
	// Node is this node's name, the suffix of its Spread key: the
	// kernel hostname or a name the caller gives (D11). Required with Spread; New checks it
	// with ValidateNode.
	Node string
	// AllowOtherCapacity lets Acquire enqueue while keys of the same name
	// live under another capacity: a separate semaphore beside them, for
	// a deliberate change of capacity while the old one drains (D17; the
	// Enqueued event counts those keys). Without it Acquire refuses with
	// a *CapacityError, checked at the enqueue's own revision (its key goes).
	AllowOtherCapacity bool
	// Record is the template of the value written under our key; Version
	// and Since are filled in by Acquire (D6).
	Record schema.Record
	// OnRenew, if set, is called while a slot is held, once when the holding begins and
	// again after every confirmed keep-alive, with the instant at which the holder will be
	// fenced (its context cancelled with ErrFenced) unless the lease is confirmed again
	// before, and the lease's deadline: the last confirmed keep-alive's send time plus the
	// TTL, before which the server cannot expire the lease. Both are local times with a
	// monotonic reading. It runs on the keep-alive goroutine and must not block (D7b: the
	// child's guardian keeps a copy, to fence on its own should this process go silent).
	OnRenew func(fence, deadline time.Time)
	// OnEvent, if set, is called synchronously from Acquire's goroutine on
	// every queue transition, for logging and sd_notify STATUS= (D10).
	OnEvent func(Event)
}

// Semaphore is the counting semaphore (name, max) on one etcd client. It is
// safe for one Acquire at a time.
type Semaphore struct {
	c      *clientv3.Client
	name   string
	max    int
	prefix string
	opts   Options
	// seams, nil in production, are where a test looks into or changes the recipe
	// (seams.go, set by export_test.go).
	seams *seams
	wr    waitReport // the Waiting event stood on, for the lease's word on etcd (reach.go)
}

// New returns the semaphore (name, max) using client c, which the caller
// keeps and closes. It validates name and max (D4), and the node name with
// Spread (D11), and makes no request: errors wrap ErrBadName, ErrBadMax or
// ErrBadNode.
func New(c *clientv3.Client, name string, max int, opts Options) (*Semaphore, error) {
	if err := schema.ValidateSemaphore(name, max); err != nil {
		return nil, err
	}
	if opts.Spread {
		if err := schema.ValidateNode(opts.Node); err != nil {
			return nil, err
		}
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = defaultConnectTimeout
	}
	if opts.FenceMargin <= 0 {
		opts.FenceMargin = DefaultFenceMargin
	}
	return &Semaphore{c: c, name: name, max: max, prefix: schema.Prefix(name, max), opts: opts}, nil
}

// keyOf is our key on lease l: the lease ID suffix, or with Spread the
// node's name (D11).
func (s *Semaphore) keyOf(l *lease) string {
	if s.opts.Spread {
		return schema.NodeKey(s.prefix, s.opts.Node)
	}
	return schema.LeaseKey(s.prefix, l.id)
}
