// Package etcdconn owns conch's connection to etcd: given Settings (the endpoints, TLS files,
// user and password, dial timeout, each with the name of the source it came from, for
// messages), New returns a ready *clientv3.Client, or an error classified for its caller:
// ErrUnreachable when no etcd answered in time, ErrTLS when the TLS set-up can never work,
// anything else (a refused login, unusable settings) when retrying cannot help.
//
// It owns what a connection needs beyond clientv3's dial: checking and redacting endpoints,
// reading the files it is given without blocking and within a bound, building the TLS
// configuration, probing the endpoints beside the dial so a dead or misconfigured cluster
// is named at once, re-reading a rotated password file, gRPC keep-alive that leaves a
// silent member, telling "not an etcd" from "no answer", and warming the protobuf tables.
// It does not know where settings come from (flags, environment, config file): its caller
// resolves them. It imports no other conch package.
package etcdconn
