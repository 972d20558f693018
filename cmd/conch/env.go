package main

import (
	"slices"
	"strconv"
	"strings"

	"github.com/conch-project/conch/sema"
)

// childEnv returns the child's environment (D5): the caller's, less
// conch's own systemd plumbing (NOTIFY_SOCKET, WATCHDOG_*), with CONCH_REV,
// CONCH_SEMA, CONCH_MAX and CONCH_LEASE set last so they override inherited
// values (e.g. from an outer conch).
func childEnv(base []string, name string, max int, rev, lease int64) []string {
	set := map[string]string{
		"CONCH_REV":   strconv.FormatInt(rev, 10),
		"CONCH_SEMA":  name,
		"CONCH_MAX":   strconv.Itoa(max),
		"CONCH_LEASE": sema.FormatLeaseID(lease), // spelled as in the key name and by etcdctl
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; ours || k == "NOTIFY_SOCKET" || strings.HasPrefix(k, "WATCHDOG_") {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range []string{"CONCH_REV", "CONCH_SEMA", "CONCH_MAX", "CONCH_LEASE"} {
		out = append(out, k+"="+set[k])
	}
	return out
}

// credentialVars are conch's environment variables that carry a password or
// say where one is: the child loses them (D5a), so a job
// does not inherit write access to /conch/v1/. The user variables keep the
// name and lose a NAME:PASSWORD password.
var (
	passwordVars = []string{"ETCDCTL_PASSWORD", "CONCH_PASSWORD_FILE"}
	userVars     = []string{"ETCDCTL_USER", "CONCH_USER"}
)

// dropCredentials returns base without conch's credential variables
// (passwordVars removed, the password part of userVars cut), unless keep
// (--keep-credentials-env) says the child needs them. base is not modified.
func dropCredentials(base []string, keep bool) []string {
	if keep {
		return base
	}
	out := make([]string, 0, len(base))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(passwordVars, k):
			continue
		case slices.Contains(userVars, k):
			name, _, _ := strings.Cut(v, ":")
			kv = k + "=" + name
		}
		out = append(out, kv)
	}
	return out
}
