package sema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcderr"
	"github.com/conch-project/conch/sema/schema"
)

// lease is an etcd lease kept alive by conch's own keep-alive stream rather
// than clientv3's Lease.KeepAlive, whose TTL/3 cadence and whose "done"
// signal (after the server already expired the lease) are too late for
// self-fencing (D7).
//
// The deadline is tracked on the local monotonic clock: the send time of the
// last keep-alive the server confirmed, plus the granted TTL. The server
// cannot expire the lease before that instant.
type lease struct {
	id  clientv3.LeaseID
	ttl time.Duration // as granted, whole seconds (D4)
	c   *clientv3.Client

	mu        sync.Mutex
	confirmed time.Time                       // send time of the last confirmed keep-alive
	margin    time.Duration                   // fence this long before the deadline; 0 while waiting (not holding)
	fast      bool                            // holding cadence (head of the queue, or holding)
	waitEvery time.Duration                   // waiting cadence (setWaitInterval); 0: TTL/3
	changed   chan struct{}                   // poked when the cadence or margin change
	onRenew   func(fence, deadline time.Time) // Options.OnRenew, while holding
	cluster   uint64                          // the cluster ID of the grant's answer (D18)
	maxRev    int64                           // the highest revision seen in etcd's answers (D18)
	onReach   func(down bool)                 // told when keep-alives stop or start being answered (reach.go)
	down      bool                            // onReach was last told down
	failSince time.Time                       // keep-alives failing since then (zero: answered)
	lastSend  time.Time                       // when the last keep-alive was sent (noteSend)
	sendGap   time.Duration                   // the longest gap between two sends since the last confirmation
	// outlived: the last confirmation came this long after the one before, a TTL or more,
	// while conch sent on time (etcd was silent past the TTL, D7h: a stopped etcd may expire
	// the lease at its thaw though a keep-alive sent during the stall was answered); 0 once a
	// confirmation comes within the TTL again
	outlived time.Duration

	done   chan struct{} // closed when the lease is lost or stopped
	cause  error
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// grantLease grants a lease of ttl (rounded up to whole seconds) and starts
// keeping it alive in the waiting cadence. The goroutines it starts end on
// stop or when the lease is lost. Errors are the server's or ctx's.
func grantLease(ctx context.Context, c *clientv3.Client, ttl time.Duration) (*lease, error) {
	secs := int64(RoundTTL(ttl) / time.Second)
	sent := time.Now()
	resp, err := c.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("cannot grant lease: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &lease{
		id:        resp.ID,
		ttl:       time.Duration(resp.TTL) * time.Second,
		c:         c,
		confirmed: sent,
		cluster:   resp.ResponseHeader.GetClusterId(),
		maxRev:    resp.ResponseHeader.GetRevision(),
		changed:   make(chan struct{}, 1),
		done:      make(chan struct{}),
		cancel:    cancel,
	}
	l.wg.Add(1)
	go l.run(lctx)
	return l, nil
}

// Done is closed when the lease is lost (Err says why) or stopped.
func (l *lease) Done() <-chan struct{} { return l.done }

// Err returns why Done was closed: ErrLeaseLost, ErrFenced or ErrReleased.
func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// useHoldCadence switches to the holding cadence without fencing yet: the head of
// the queue is about to hold, and must not start holding on a stale
// confirmation.
func (l *lease) useHoldCadence() {
	l.mu.Lock()
	changed := !l.fast
	l.fast = true
	l.mu.Unlock()
	if changed {
		l.poke()
	}
}

// startFencing switches to the holding cadence and starts fencing margin before the
// deadline (D7: kill-after + 1 s, so the child is gone before the server can
// hand the slot on). If the last confirmation is too old for that fence to be
// at least one keep-alive interval away (a waiter promoted from deep in the
// queue, on the slow cadence), it first confirms the lease with one
// keep-alive, so a healthy lease is never fenced at once (confirmOnce: tried
// again while the lease may live). margin must be > 0 (0 means waiting).
// Errors: ErrLeaseLost if the server no longer knows the lease, ErrFenced if
// no answer came before the lease's deadline or ctx ended.
func (l *lease) startFencing(ctx context.Context, margin time.Duration, onRenew func(fence, deadline time.Time)) error {
	l.mu.Lock()
	l.onRenew = onRenew
	l.mu.Unlock()
	l.mu.Lock()
	iv := keepAliveInterval(l.ttl, true)
	stale := time.Until(l.confirmed.Add(fenceDelay(l.ttl, margin))) < iv
	l.mu.Unlock()
	if stale {
		if err := l.confirmOnce(ctx, iv); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.fast, l.margin = true, margin
	l.mu.Unlock()
	l.poke()
	l.renewed()
	return nil
}

// renewed tells onRenew, while holding, the fence instant and the deadline of the last
// confirmation (D7b: the child's guardian keeps a copy of them).
func (l *lease) renewed() {
	l.mu.Lock()
	fn, holding := l.onRenew, l.margin > 0
	fence, deadline := l.confirmed.Add(fenceDelay(l.ttl, l.margin)), l.confirmed.Add(l.ttl)
	l.mu.Unlock()
	if fn != nil && holding {
		fn(fence, deadline)
	}
}

func (l *lease) poke() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *lease) interval() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.fast && l.waitEvery > 0 {
		return l.waitEvery
	}
	return keepAliveInterval(l.ttl, l.fast)
}

func (l *lease) fenceAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmed.Add(fenceDelay(l.ttl, l.margin))
}

func (l *lease) fail(err error) {
	l.mu.Lock()
	if l.cause == nil {
		l.cause = err
		close(l.done)
	}
	l.mu.Unlock()
}

type kaResult struct {
	gen     int
	ttl     int64
	cluster uint64 // the answer's header (D18)
	rev     int64
	err     error
}

// run owns the keep-alive stream. It returns when ctx ends or the lease is lost.
func (l *lease) run(ctx context.Context) {
	defer l.wg.Done()
	ka := &kaStream{lc: clientv3.RetryLeaseClient(l.c), results: make(chan kaResult, 8)}
	defer ka.drop()
	tick := time.NewTimer(l.interval())
	defer tick.Stop()
	fence := time.NewTimer(time.Until(l.fenceAt()))
	defer fence.Stop()
	for {
		select {
		case <-ctx.Done():
			l.fail(ErrReleased)
			return
		case <-l.changed:
			tick.Reset(0)
			fence.Reset(time.Until(l.fenceAt()))
		case <-fence.C:
			if time.Now().Before(l.fenceAt()) { // confirmed meanwhile
				fence.Reset(time.Until(l.fenceAt()))
				continue
			}
			if !l.holding() { // D7b (5): only the server's answer ends a waiting lease
				fence.Reset(l.interval())
				continue
			}
			l.fail(l.lateCause(ErrFenced))
			return
		case <-tick.C:
			l.noteSend()
			ka.send(ctx, l)
			tick.Reset(l.nextSend(ka))
			l.tellReach(ka)
		case r := <-ka.results:
			sent, ok := ka.answered(r)
			if !ok {
				if ka.stream == nil { // it failed: try again soon (nextSend)
					tick.Reset(l.nextSend(ka))
				}
				continue
			}
			if err := l.epochCheck(ctx, r.cluster, r.rev); err != nil { // D18
				l.fail(err)
				return
			}
			if r.ttl <= 0 {
				l.fail(l.notFoundCause())
				return
			}
			l.confirm(sent)
			l.tellReach(ka)
			l.renewed()
			fence.Reset(time.Until(l.fenceAt()))
		}
	}
}

// kaRetry is how soon a holder (or the head of the queue) tries again when its keep-alive
// failed: during a leader election every member refuses it ("no leader") until the
// new leader is there, and each second of waiting for the next regular send is a second less
// before the fence (D7: a routine election must not stop the child; tests/vm scenario 5 was
// fenced once after a 4 s election on a loaded machine). Only while failing, so it costs etcd
// a few requests per election.
const kaRetry = 200 * time.Millisecond

// nextSend is the pause before the next keep-alive: the lease's cadence while keep-alives
// are answered. After a failed one (an error, or no answer within an interval) a holder or
// the head of the queue retries every kaRetry, and every other waiter at the holding cadence,
// min(TTL/6, 1 s), until one is answered (D7b): on the slow TTL/3 cadence a waiter's third
// try after an outage fell on its lease's deadline, and an etcd outage shorter than the TTL
// cost it its place in the queue.
func (l *lease) nextSend(ka *kaStream) time.Duration {
	d := l.interval()
	l.mu.Lock()
	fast := l.fast
	l.mu.Unlock()
	switch {
	case !ka.failing:
		return d
	case fast:
		return min(d, kaRetry)
	}
	return min(d, keepAliveInterval(l.ttl, true))
}

// holding reports whether the lease holds a slot: its fence ends it with ErrFenced (the child
// must stop, D7). A waiting lease is not ended by its deadline on our clock while etcd does
// not answer (D7b (5)): etcd expires no lease while it is down or has no leader, and renews
// every lease by a whole TTL when it is back, so a waiter that gave up its key at its own
// deadline lost its place in the queue to an outage shorter than the TTL. It ends only when
// the server says the lease is gone (TTL 0 to a keep-alive); a head of the queue promoted
// on a stale confirmation checks with the server first (startFencing).
func (l *lease) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.margin > 0
}

// lateCause is err, wrapped with ErrDeadlinePassed when the lease is held and its deadline
// (the last confirmed send + TTL) has passed already: the loss is noticed too late for the
// grace (D7b (1)), as after a stall of this process longer than the fence margin.
func (l *lease) lateCause(err error) error {
	l.mu.Lock()
	holding, deadline := l.margin > 0, l.confirmed.Add(l.ttl)
	l.mu.Unlock()
	if over := time.Since(deadline); holding && over >= 0 {
		return fmt.Errorf("%w; %w, %v late: conch was stopped, frozen or starved", err, ErrDeadlinePassed, over.Round(time.Millisecond))
	}
	return err
}

// confirm records that the keep-alive sent at sent was answered: the lease lives at least
// until sent + TTL (D7: the deadline counts from the send, on our own clock).
func (l *lease) confirm(sent time.Time) {
	iv := l.interval()
	l.mu.Lock()
	if sent.After(l.confirmed) {
		l.outlived = 0
		if gap := sent.Sub(l.confirmed); gap >= l.ttl && l.sendGap <= iv+sendSlack {
			l.outlived = gap
		}
		l.confirmed = sent
		l.sendGap = 0
	}
	l.mu.Unlock()
}

// kaStream is run's keep-alive stream: opened on demand, dropped on any error, and
// answered in order (pending holds the send times). gen tells a dropped stream's late
// answers from the current one's. Only run's goroutine uses it.
type kaStream struct {
	lc      pb.LeaseClient
	results chan kaResult
	stream  pb.Lease_LeaseKeepAliveClient
	cancel  context.CancelFunc
	gen     int
	pending []time.Time
	failing bool // the last keep-alive failed or went unanswered: retry sooner (nextSend)
}

// drop closes the stream, if any; the next send opens a new one.
func (k *kaStream) drop() {
	if k.cancel != nil {
		k.cancel()
	}
	k.stream, k.cancel, k.pending = nil, nil, nil
	k.gen++
}

// send sends one keep-alive for l, opening a stream first when there is none (its receiver
// goroutine is joined by l.wg). A stream whose oldest keep-alive is unanswered for a whole
// interval is dropped first: it may sit on a member that is cut off or frozen (no RST, and
// gRPC's own keep-alive needs 13 s); a new stream goes to another member (round robin), well
// before the fence (tests/vm scenario 3b).
func (k *kaStream) send(ctx context.Context, l *lease) {
	if len(k.pending) > 0 && time.Since(k.pending[0]) >= l.interval() {
		k.drop()
		k.failing = true
	}
	if k.stream == nil {
		sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		s, err := k.lc.LeaseKeepAlive(sctx)
		if err != nil {
			cancel()
			k.failing = true
			return
		}
		k.stream, k.cancel = s, cancel
		l.wg.Add(1)
		go l.recv(ctx, s, k.gen, k.results)
	}
	k.pending = append(k.pending, time.Now())
	if err := k.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(l.id)}); err != nil {
		k.drop()
		k.failing = true
	}
}

// answered takes one result off the stream: the send time it answers and true, or false
// for a dropped stream's late answer, a failed stream (dropped now) or an unasked answer.
func (k *kaStream) answered(r kaResult) (time.Time, bool) {
	if r.gen != k.gen {
		return time.Time{}, false
	}
	if r.err != nil || len(k.pending) == 0 {
		k.drop()
		k.failing = true
		return time.Time{}, false
	}
	sent := k.pending[0]
	k.pending = k.pending[1:]
	k.failing = false
	return sent, true
}

func (l *lease) recv(ctx context.Context, s pb.Lease_LeaseKeepAliveClient, gen int, out chan<- kaResult) {
	defer l.wg.Done()
	for {
		resp, err := s.Recv()
		r := kaResult{gen: gen, err: err}
		if err == nil {
			r.ttl, r.cluster, r.rev = resp.TTL, resp.Header.GetClusterId(), resp.Header.GetRevision()
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// stop ends the keep-alive loop and waits for its goroutines.
func (l *lease) stop() {
	l.cancel()
	l.wg.Wait()
}

// revoke stops keeping the lease alive and revokes it, which deletes every
// key bound to it (D2: clean release is one LeaseRevoke). It uses a fresh
// context bounded by within, so it works after ctx was cancelled;
// if it fails the key still goes at lease expiry.
func (l *lease) revoke(ctx context.Context, within time.Duration) error {
	l.stop()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
	defer cancel()
	if _, err := l.c.Revoke(rctx, l.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("cannot revoke lease %s: %w", schema.FormatLeaseID(int64(l.id)), err)
	}
	return nil
}

// revokeRetrying is revoke, each try bounded by within, tried again every releaseRetry while
// it fails for want of an answer and until total has passed since the call (Holder.Release,
// D7b); a refusal (permission denied...) is not tried again. It returns the last try's error.
func (l *lease) revokeRetrying(ctx context.Context, within, total time.Duration) error {
	return retryUntil(time.Now().Add(total), within, 0, func(bound time.Duration) error {
		return l.revoke(ctx, bound)
	})
}

// retryUntil calls try with the bound of that try (within, cut to what is left before end,
// but at least floor), again every releaseRetry while it fails for want of an answer and end
// has not come; a refusal (etcderr.Refused) is not tried again. It returns the last try's error. It is
// the one retry policy of the requests that end a holding (revoke, the move of D13).
func retryUntil(end time.Time, within, floor time.Duration, try func(bound time.Duration) error) error {
	for {
		err := try(max(min(within, time.Until(end)), floor))
		if err == nil || etcderr.Refused(err) || time.Until(end) < releaseRetry {
			return err
		}
		time.Sleep(releaseRetry)
	}
}

// releaseRetry is the pause between two tries of a revoke that failed: etcd was unreachable,
// or had no leader yet after its restart.
const releaseRetry = 200 * time.Millisecond

// Bounds on the clean-up revoke. A healthy etcd answers in milliseconds; a
// lease that was already lost, or a wait that ran out, must not hold conch
// much past the wait's bound or the child's end: the key goes at expiry anyway.
const (
	releaseTimeout = 5 * time.Second
	giveUpTimeout  = time.Second
	// releaseTry bounds each try of a holder's revoke: a healthy etcd answers in
	// milliseconds, and a try that went to a silent member must not keep the slot taken
	// (D7b (3)); a try that was slow but done is answered "lease not found" next time,
	// which counts as revoked.
	releaseTry = time.Second
)

// untilDeadline runs try, each time within min(5 s, what is left before end) but at least
// releaseTry (so one try is made even at end), again every releaseRetry while it fails for
// want of an answer and end has not come (retryUntil); a refusal is not tried again. Each try
// gets up to 5 s, not a revoke's releaseTry: a grant or a move on a loaded etcd may need more,
// and nothing waits on it but the end of the run, which end bounds. It returns the last try's
// error.
func untilDeadline(ctx context.Context, end time.Time, try func(context.Context) error) error {
	return retryUntil(end, releaseTimeout, releaseTry, func(bound time.Duration) error {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		defer cancel()
		return try(tctx)
	})
}
