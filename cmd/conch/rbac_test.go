package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/conch-project/conch/internal/etcdtest"
)

// authServer starts an etcd with auth on: root (all), rw (readwrite on
// /conch/v1/ only), ro (read), wo (write), norole (no role); each user's
// password is "pw-" + name, in the file e.path(name). It returns the env
// (root's client in e.c) and that client.
func authServer(t *testing.T, c etcdtest.Config) *env {
	t.Helper()
	srv := etcdtest.StartConfig(t, c)
	open := srv.Client(t)
	ctx := t.Context()
	rng := clientv3.GetPrefixRangeEnd("/conch/v1/")
	steps := []func() error{
		func() error { _, err := open.RoleAdd(ctx, "root"); return err },
		func() error { _, err := open.UserAdd(ctx, "root", "pw-root"); return err },
		func() error { _, err := open.UserGrantRole(ctx, "root", "root"); return err },
	}
	for role, perm := range map[string]clientv3.PermissionType{"rw": clientv3.PermissionType(clientv3.PermReadWrite), "ro": clientv3.PermissionType(clientv3.PermRead), "wo": clientv3.PermissionType(clientv3.PermWrite)} {
		steps = append(steps,
			func() error { _, err := open.RoleAdd(ctx, "conch-"+role); return err },
			func() error {
				_, err := open.RoleGrantPermission(ctx, "conch-"+role, "/conch/v1/", rng, perm)
				return err
			},
			func() error { _, err := open.UserAdd(ctx, role, "pw-"+role); return err },
			func() error { _, err := open.UserGrantRole(ctx, role, "conch-"+role); return err },
		)
	}
	steps = append(steps,
		func() error { _, err := open.UserAdd(ctx, "norole", "pw-norole"); return err },
		func() error { _, err := open.AuthEnable(ctx); return err },
	)
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	srv.Username, srv.Password = "root", "pw-root"
	e := rawEnv(t, srv, srv.Client(t))
	e.vars = append(e.vars, "CONCH_ENDPOINTS="+srv.Endpoint)
	for _, u := range []string{"rw", "ro", "wo", "norole"} {
		if err := os.WriteFile(e.path(u), []byte("pw-"+u+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Auth and RBAC. The role with readwrite on /conch/v1/ only is
// enough; no role, read-only and write-only are refused with 64 and the
// reason, and nothing is left behind (keys or leases, read as root).
func TestAuthRBAC(t *testing.T) {
	t.Parallel()
	e := authServer(t, etcdtest.Config{})
	os.WriteFile(e.path("wrong"), []byte("not-the-password\n"), 0o600)
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"readwrite on /conch/v1/", []string{"--user", "rw", "--password-file", e.path("rw"), "--", "true"}, 0, ""},
		{"no role", []string{"--user", "norole", "--password-file", e.path("norole"), "--", "true"}, 64, "permission denied"},
		{"read-only", []string{"--user", "ro", "--password-file", e.path("ro"), "--", "true"}, 64, "permission denied"},
		{"write-only", []string{"--user", "wo", "--password-file", e.path("wo"), "--", "true"}, 64, "permission denied"},
		{"wrong password", []string{"--user", "rw", "--password-file", e.path("wrong"), "--", "true"}, 64, "refused the login of user \"rw\""},
		{"user without password", []string{"--user", "rw", "--", "true"}, 64, "has no password"},
		{"read-only --who", []string{"--user", "ro", "--password-file", e.path("ro"), "--who"}, 1, "no holders"},
		{"write-only --who", []string{"--user", "wo", "--password-file", e.path("wo"), "--who"}, 64, "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(append([]string{"sema", "rbac", "--max", "1"}, tc.args...)...)
			if r.status != tc.status || !strings.Contains(r.stderr+r.stdout, tc.want) || strings.Contains(r.stderr, "pw-") {
				t.Fatalf("%v\nwant status %d and %q, and no password", r, tc.status, tc.want)
			}
			e.nothingHalfWritten(tc.name)
		})
	}
}

// Rotating the password (etcd invalidates the user's tokens, so
// clientv3 logs in again) does not stop a holder whose password file has
// the new password: conch reads the file again once when etcd rejects the
// old one. The holder must outlive its fencing point (4 s after the last
// confirmed keep-alive with --ttl 6 --kill-after 1) with keep-alives confirmed.
func TestPasswordRotationWhileHolding(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := authServer(t, etcdtest.Config{})
	h := e.holdAndCheck("rot", func() {
		if _, err := e.c.UserChangePassword(t.Context(), "rw", "pw-rw-2"); err != nil {
			t.Fatal(err)
		}
		tmp := e.path("rw.new")
		os.WriteFile(tmp, []byte("pw-rw-2\n"), 0o600)
		if err := os.Rename(tmp, e.path("rw")); err != nil {
			t.Fatal(err)
		}
	})
	if h.exited() {
		t.Fatalf("holder stopped after the password rotation: %v", h.wait(t))
	}
	os.WriteFile(e.path("rot.done"), nil, 0o600)
	if r := h.wait(t); r.status != 0 {
		t.Fatalf("holder: %v", r)
	}
	e.nothingHalfWritten("after the rotation")
}

// holdAndCheck starts a holder of name as user rw (--ttl 6: keep-alives every
// second, fencing 4 s after the last confirmed one), waits until it holds,
// runs change, then waits until a keep-alive was confirmed more than 5 s
// later (past the fencing point) and returns the still-running holder.
func (e *env) holdAndCheck(name string, change func()) *proc {
	e.t.Helper()
	h := e.start("sema", name, "--max", "1", "--ttl", "6", "--kill-after", "1", "--user", "rw", "--password-file", e.path("rw"),
		"--", "sh", "-c", "while [ ! -e "+e.path(name+".done")+" ]; do sleep 0.05; done")
	waitFor(e.t, "holder", func() bool { return e.keys("/conch/v1/sema/"+name+"/") == 1 })
	leases, err := e.c.Leases(e.t.Context())
	if err != nil || len(leases.Leases) != 1 {
		e.t.Fatalf("leases: %v, %v", leases, err)
	}
	change()
	changed := time.Now()
	waitFor(e.t, "a keep-alive confirmed past the fencing point", func() bool {
		ttl, err := e.c.TimeToLive(context.Background(), leases.Leases[0].ID)
		return err == nil && time.Since(changed) > 5*time.Second && ttl.TTL >= 5 || h.exited()
	})
	return h
}

// An auth token that expires (1 s here) while holding is renewed
// by clientv3's login with the same password: the holder runs on.
func TestTokenExpiryWhileHolding(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := authServer(t, etcdtest.Config{AuthTokenTTL: 1})
	h := e.holdAndCheck("tok", func() {})
	if h.exited() {
		t.Fatalf("holder stopped while its token expired: %v", h.wait(t))
	}
	os.WriteFile(e.path("tok.done"), nil, 0o600)
	if r := h.wait(t); r.status != 0 {
		t.Fatalf("holder: %v", r)
	}
	e.nothingHalfWritten("after the token expiries")
}

// A role revoked while holding. etcd then refuses the keep-alives
// of a lease with our key on it (they need the key's permission), so the
// lease cannot be confirmed: conch fences, stops the child and exits 70 (D7);
// the release is refused too, and the key goes at lease expiry (6 s).
func TestRoleRevokedWhileHolding(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos, long timers or system nodes): not in the -short tier")
	}
	e := authServer(t, etcdtest.Config{})
	h := e.start("sema", "revoked", "--max", "1", "--ttl", "6", "--kill-after", "1", "--user", "rw", "--password-file", e.path("rw"),
		"--", "sh", "-c", "while :; do sleep 0.05; done")
	waitFor(t, "holder", func() bool { return e.keys("/conch/v1/sema/revoked/") == 1 })
	if _, err := e.c.UserRevokeRole(t.Context(), "rw", "conch-rw"); err != nil {
		t.Fatal(err)
	}
	r := h.wait(t)
	if r.status != 70 || !strings.Contains(r.stderr, "slot lost while the child ran") || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("holder: %v\nwant 70, the child stopped and the refused release", r)
	}
	waitFor(t, "the key gone at lease expiry", func() bool { return e.keys("/conch/v1/") == 0 })
	e.nothingHalfWritten("after the expiry")
}
