// Package who lists conch's semaphores for people and programs: given a
// *clientv3.Client, it reads one consistent listing (snapshot, with
// the holders' lease TTLs), renders it as text, as one JSON document or as
// Prometheus metrics (D6, D6a, D6b, D16a), and follows it as it changes
// (Watch, over followListing).
//
// Everything it shows was read from etcd and may be hostile: the text
// forms are printable ASCII of bounded width, the JSON form is exact and
// always one valid document, the metrics are written by prometheus/common's
// encoder. The package does not log: what an operator should be told comes
// back as values (Warning, Note) through callbacks, and errors are
// sentinels (ErrOutputClosed, ErrOutput) or sema's (sema.ErrRefused,
// sema.ErrUnavailable) for the caller to map to its own exits.
package who
