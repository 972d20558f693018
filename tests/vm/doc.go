// Package vm holds conch's tests on nodes with a real systemd (internal/systemdtest: Debian 12
// booted with systemd-nspawn). TestConchInSystemd runs single nodes against a real etcd
// (internal/etcdtest) on the host's loopback, which the nodes reach because they share the
// host's network namespace; TestMultiNode (cluster_test.go) runs 3 nodes in network namespaces
// of their own with an etcd member in each. conch is built as a static binary and bind-mounted
// at /opt/bin/conch in every node.
package vm
