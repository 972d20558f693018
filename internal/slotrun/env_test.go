package slotrun

import (
	"strings"
	"testing"
)

// D5: the slot's variables override inherited ones, the service manager's plumbing goes.
func TestChildEnv(t *testing.T) {
	got := ChildEnv([]string{"A=1", "CONCH_REV=9", "NOTIFY_SOCKET=/x", "WATCHDOG_USEC=5", "WATCHDOG_PID=3", "CONCH_CLUSTER_ID=1", "B=2"}, "n", 2, 42, 0xabc, 0xdef)
	want := "A=1 B=2 CONCH_REV=42 CONCH_SEMA=n CONCH_MAX=2 CONCH_LEASE=0000000000000abc CONCH_CLUSTER_ID=0000000000000def" // the padded spelling
	if strings.Join(got, " ") != want {
		t.Fatalf("ChildEnv = %q, want %q", got, want)
	}
}

// D5a: the child loses conch's credential variables unless the caller keeps them.
func TestDropCredentials(t *testing.T) {
	base := []string{"A=1", "ETCDCTL_PASSWORD=p1", "CONCH_PASSWORD_FILE=/etc/pw", "ETCDCTL_USER=bob:p2", "CONCH_USER=amy", "ETCDCTL_ENDPOINTS=h:1"}
	got := strings.Join(DropCredentials(base, false), " ")
	if want := "A=1 ETCDCTL_USER=bob CONCH_USER=amy ETCDCTL_ENDPOINTS=h:1"; got != want {
		t.Errorf("DropCredentials = %q, want %q", got, want)
	}
	if got := DropCredentials(base, true); strings.Join(got, " ") != strings.Join(base, " ") {
		t.Errorf("kept: %q", got)
	}
}
