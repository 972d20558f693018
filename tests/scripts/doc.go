// Package scripts tests the shell scripts under scripts/ that README and the Makefile tell
// people to run, against the real programs they drive (a real etcd built from go.mod's tool
// dependencies).
package scripts
