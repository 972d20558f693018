// Pausing a semaphore (D16): the pause key, its record, and the hooks the
// ranking reads use to honour it.

package sema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PauseVersion is the format version written in every pause record.
const PauseVersion = 1

// PauseRoot is the prefix of every pause key, outside KeyRoot so no ranking
// read ever counts a pause as a slot claim (D16).
const PauseRoot = "/conch/v1/pause/"

// PauseKey is the pause key of the semaphore (name, max): while it exists no
// new holder starts (D16). It has no lease: it lasts until deleted (a resume).
func PauseKey(name string, max int) string {
	return PauseRoot + name + "/" + strconv.Itoa(max)
}

// Pause is a pause key as read back (D16): who set it (user@node), when,
// and why. It is hostile input (any client may write the key): when the
// value cannot be read, Err says why and Raw holds its first bytes; such a
// pause still counts (never a silent start).
type Pause struct {
	Name   string    `json:"-"` // the semaphore's name, from the key (its first segment, as stored)
	Max    int       `json:"-"` // its capacity, from the key; 0 when the key is no PauseKey (a bad name or capacity): it pauses nothing
	Key    string    `json:"-"`
	Rev    int64     `json:"-"` // create revision of the key
	V      int       `json:"v"`
	Who    string    `json:"who"`
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
	Err    error     `json:"-"`
	Raw    string    `json:"-"` // with Err: the value's first 64 bytes
}

// String says who paused when and why, in one line ("?" for what is not
// known); the caller escapes it before printing (hostile input).
func (p Pause) String() string {
	if p.Err != nil {
		return fmt.Sprintf("an unreadable pause record (%v: %q)", p.Err, p.Raw)
	}
	s := fmt.Sprintf("paused by %s since %s", orUnknown(p.Who), timeOrQ(p.Since))
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func timeOrQ(t time.Time) string {
	if t.IsZero() || !renderable(t) {
		return "?"
	}
	return t.UTC().Format(time.RFC3339)
}

// DecodePause reads the pause key kv as stored (hostile input, see Pause); it
// never fails: what it cannot read is in the result.
func DecodePause(kv *mvccpb.KeyValue) Pause {
	p := Pause{Key: string(kv.Key), Rev: kv.CreateRevision}
	seg, rest, _ := strings.Cut(strings.TrimPrefix(p.Key, PauseRoot), "/")
	p.Name = seg
	if max, canon := parseCapacitySegment(rest); canon && ValidateName(seg) == nil {
		p.Max = max // the key is PauseKey(seg, max): it pauses that semaphore
	}
	v := kv.Value
	var got Pause
	switch {
	case len(v) > maxRecordBytes:
		p.Err = fmt.Errorf("pause record of %d bytes, more than the %d read", len(v), maxRecordBytes)
	case json.Unmarshal(v, &got) != nil:
		p.Err = fmt.Errorf("pause record is not a JSON object")
	case got.Who == "" && got.Since.IsZero():
		p.Err = fmt.Errorf("pause record names neither who nor when")
	}
	if p.Err != nil {
		p.Raw = string(v[:min(len(v), 64)])
		return p
	}
	p.V, p.Who, p.Since, p.Reason = got.V, got.Who, got.Since.UTC(), got.Reason
	return p
}

// pauseOp reads the semaphore's pause key in a ranking Txn (D16: in the
// same Txn as the ranking read, so a grant and a pause are ordered by
// etcd's revisions).
func (s *Semaphore) pauseOp() clientv3.Op { return clientv3.OpGet(PauseKey(s.name, s.max)) }

// withPause applies the pause read by pauseOp, whose answer is resp's
// Responses[i], to r: r.pause is set when the key exists, and then a key
// that would hold does not (r.held false, r.paused true): it stays queued
// in its place (D16).
func withPause(r ranking, resp *clientv3.TxnResponse, i int) ranking {
	kvs := resp.Responses[i].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return r
	}
	p := DecodePause(kvs[0])
	r.pause = &p
	if r.held {
		r.held, r.paused = false, true
	}
	return r
}

// pausedNow reads the pause key at once: a head of the queue promoted by a
// holder's DELETE (D1: no re-read) checks it before it holds (D16). It
// returns the pause, nil when there is none. Errors: an etcd error
// (errEtcd).
func (s *Semaphore) pausedNow(ctx context.Context) (*Pause, error) {
	resp, err := s.c.Get(ctx, PauseKey(s.name, s.max))
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read the pause of %s[max=%d]: %w", errEtcd, s.name, s.max, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	p := DecodePause(resp.Kvs[0])
	return &p, nil
}

// PausedError is Acquire's ErrNoSlot with Nonblock when the semaphore is
// paused (D16): errors.As finds it in the *WaitError, with the pause.
type PausedError struct{ Pause Pause }

func (e *PausedError) Error() string { return "semaphore " + e.Pause.String() }

// noSlot is Acquire's error with Nonblock when ranking r did not hold:
// ErrNoSlot, wrapping a *PausedError when the semaphore is paused (D16).
// pauseTry bounds the head's pause read before a promotion (pauseCheck), and its
// confirmation on its watch stream (pauseFollow.clear, D16b): a
// healthy etcd answers in milliseconds, and a failed try costs only a
// re-read, which reads the pause too.
const pauseTry = 500 * time.Millisecond

func (s *Semaphore) noSlot(r ranking) error {
	if r.pause != nil {
		return fmt.Errorf("%w in %s[max=%d]: %w", ErrNoSlot, s.name, s.max, &PausedError{Pause: *r.pause})
	}
	return fmt.Errorf("%w in %s[max=%d]", ErrNoSlot, s.name, s.max)
}

// pauseCheck is the head's check before a promotion that no ranking read
// saw (t is turnPromoted): turnRerank when the semaphore is paused, or the
// read failed, so the re-read (which reads the pause) decides; else t.
// Only for a promotion the head's pause watch could not confirm (D16b: it
// came before the watches existed, or the ranking saw a pause). The
// read is bounded by pauseTry: one that went to a member that stopped
// answering fails fast, and the re-read goes to the next connection
// (D7b (3)) instead of waiting for gRPC to close the silent one.
func (s *Semaphore) pauseCheck(ctx context.Context, t turn) turn {
	rctx, cancel := context.WithTimeout(ctx, pauseTry)
	defer cancel()
	p, err := s.pausedNow(rctx)
	if err != nil || p != nil {
		return turnRerank
	}
	return t
}

// pauseOf is the pause err carries (a *PausedError), nil for none.
func pauseOf(err error) *Pause {
	var pe *PausedError
	if errors.As(err, &pe) {
		return &pe.Pause
	}
	return nil
}
