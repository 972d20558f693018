// Package etcdconn owns conch's connection to etcd: given Settings (the endpoints, TLS files,
// user and password, dial timeout, each with the name of the source it came from, for
// messages), New returns a ready *clientv3.Client, or an error classified for its caller:
// ErrUnreachable when no etcd answered in time, ErrTLS when the TLS set-up can never work,
// anything else (a refused login, unusable settings) when retrying cannot help.
//
// Resolve makes those Settings from their Sources (D9, D9b): the flagged values, the
// environment and the config file's values, each setting from the first source that sets it,
// with the override warning and errors of class ErrSettings that name the source.
//
// It owns what a connection needs beyond clientv3's dial: checking and redacting endpoints,
// reading the files it is given without blocking and within a bound, building the TLS
// configuration, probing the endpoints beside the dial so a dead or misconfigured cluster
// is named at once, re-reading a rotated password file, gRPC keep-alive that leaves a
// silent member, telling "not an etcd" from "no answer", and warming the protobuf tables.
// ReadConfig reads the config file, which holds only these settings (D9c): its [etcd]
// section's values with their FILE:LINE, ready for Resolve, and errors of class ErrConfig. It
// parses no flag: its caller does, and hands the values to Resolve. It imports no other conch
// package; it uses go-flags for its INI parser only.
package etcdconn
