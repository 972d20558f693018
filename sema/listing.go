package sema

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PauseRoot is the prefix of the pause keys, PauseRoot + <name> + "/" +
// <max>, bound to no lease and holding who, when and why: while one
// exists, its semaphore starts no new holder.
const PauseRoot = "/conch/v1/pause/"

// Pause is a key read under PauseRoot. Everything in it is hostile
// input: Max is 0 when the key's name does not parse as <name>/<max>.
type Pause struct {
	Name  string // the name segment, as stored
	Max   int
	Key   string
	Value []byte // the who/when/why record, undecoded
}

// Listing is one consistent read of semaphores: every entry (as List
// returns them) and every pause, all at revision Rev.
type Listing struct {
	Rev     int64
	Entries []Entry
	Pauses  []Pause
}

// Snapshot reads, in one Txn, the keys of the semaphore name (every
// semaphore when name is ""), their node-wait markers (D11) and their
// pause keys, and returns them as one Listing. It does not check
// name (List does). It blocks until etcd answers or ctx ends. Errors wrap
// ErrRefused when etcd rejects the read (permissions, credentials), else
// ErrUnavailable.
func Snapshot(ctx context.Context, c *clientv3.Client, name string) (Listing, error) {
	roots := []string{KeyRoot, NodeWaitRoot, PauseRoot}
	if name != "" {
		roots = []string{NamePrefix(name), NodeWaitRoot + name + "/", PauseRoot + name + "/"}
	}
	ops := make([]clientv3.Op, 0, len(roots))
	for _, r := range roots {
		ops = append(ops, clientv3.OpGet(r, clientv3.WithPrefix(), byCreateAsc))
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if Refused(err) {
		return Listing{}, fmt.Errorf("%w: cannot list %s: %w", ErrRefused, roots[0], err)
	}
	if err != nil {
		return Listing{}, fmt.Errorf("%w: cannot list %s: %w", ErrUnavailable, roots[0], err)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	waits := resp.Responses[1].GetResponseRange().Kvs
	l := Listing{Rev: resp.Header.Revision, Entries: groupAll(kvs, waits)}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		l.Pauses = append(l.Pauses, parsePause(string(kv.Key), kv.Value))
	}
	return l, nil
}

// parsePause reads a key under PauseRoot: <name>/<max>, nothing more.
func parsePause(key string, value []byte) Pause {
	seg, rest, _ := strings.Cut(strings.TrimPrefix(key, PauseRoot), "/")
	p := Pause{Name: seg, Key: key, Value: value}
	if max, canon := ParseCapacitySegment(rest); canon && ValidateName(seg) == nil {
		p.Max = max
	}
	return p
}
