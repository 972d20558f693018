package main

import "os"

// Helpers for etcd's own state failures (D18) on the etcd binary: a backup of the member's
// data directory restored (a rewind that keeps the cluster ID), and a store rebuilt empty
// with a new cluster token (a new cluster ID).

// backup copies the member's data directory, with the member stopped (SIGKILL: etcd's data
// directory is crash-consistent) and started again on it, and returns the copy's path: the
// state of etcd at this instant, as a file-system backup or a VM snapshot keeps it.
func (e *etcdProc) backup() string {
	e.t.Helper()
	e.kill()
	to := e.t.TempDir() + "/backup"
	if err := os.CopyFS(to, os.DirFS(e.dir)); err != nil {
		e.t.Fatalf("copy etcd's data: %v", err)
	}
	e.start()
	return to
}

// restore stops the member (SIGKILL) and starts it again on a copy of from (backup): the
// same member, the same cluster ID, the store rewound to the backup's revision.
func (e *etcdProc) restore(from string) {
	e.t.Helper()
	e.kill()
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Fatal(err)
	}
	if err := os.CopyFS(e.dir, os.DirFS(from)); err != nil {
		e.t.Fatalf("restore etcd's data: %v", err)
	}
	e.start()
}

// rebuild stops the member (SIGKILL) and starts it again on an empty data directory with
// the cluster token token: a new store whose cluster ID differs from the old one when the
// token does (etcd's advice for a restore).
func (e *etcdProc) rebuild(token string) {
	e.t.Helper()
	e.kill()
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Fatal(err)
	}
	e.token = token
	e.start()
}
