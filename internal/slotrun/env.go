package slotrun

import (
	"slices"
	"strconv"
	"strings"

	"github.com/conch-project/conch/internal/fleet"
	"github.com/conch-project/conch/sema/schema"
)

// ChildEnv returns the child's environment (D5): base (the caller's), less the service
// manager's plumbing meant for the process that holds the slot (NOTIFY_SOCKET, WATCHDOG_*),
// with CONCH_REV (rev, the fencing token), CONCH_SEMA (name), CONCH_MAX (max) and
// CONCH_LEASE (lease, in hex as in the key's name) and CONCH_CLUSTER_ID (cluster, the etcd
// cluster that granted the slot, D18; left out when 0) set last so they override inherited
// values (e.g. from an outer run). base is not modified.
func ChildEnv(base []string, name string, max int, rev, lease int64, cluster uint64) []string {
	set := map[string]string{
		fleet.EnvCluster: schema.FormatClusterID(cluster),
		fleet.EnvRev:     strconv.FormatInt(rev, 10),
		fleet.EnvName:    name,
		fleet.EnvMax:     strconv.Itoa(max),
		fleet.EnvLease:   schema.FormatLeaseID(lease), // spelled as in the key name and by etcdctl
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; ours || k == "NOTIFY_SOCKET" || strings.HasPrefix(k, "WATCHDOG_") {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range []string{fleet.EnvRev, fleet.EnvName, fleet.EnvMax, fleet.EnvLease, fleet.EnvCluster} { // what SlotFromEnv reads, and the epoch
		if k != fleet.EnvCluster || cluster != 0 {
			out = append(out, k+"="+set[k])
		}
	}
	return out
}

// passwordVars and userVars are the environment variables that carry an etcd password or
// say where one is: the child loses them (D5a), so a job does not inherit write access to
// /conch/v1/. The user variables keep the name and lose a NAME:PASSWORD password.
var (
	passwordVars = []string{"ETCDCTL_PASSWORD", "CONCH_PASSWORD_FILE"}
	userVars     = []string{"ETCDCTL_USER", "CONCH_USER"}
)

// DropCredentials returns base without the credential variables (passwordVars removed, the
// password part of userVars cut), unless keep says the child needs them (D5a). base is not
// modified.
func DropCredentials(base []string, keep bool) []string {
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
