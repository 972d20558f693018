package etcdconn

import "errors"

// The errors New and the readers return, tested with errors.Is. Each says what happened to
// the connection; the caller decides what that means for its exit.
var (
	// ErrUnreachable: no endpoint answered within the dial timeout, or what answered is not
	// an etcd (IsNotEtcd). Retrying later may help.
	ErrUnreachable = errors.New("etcd unavailable")

	// ErrTLS: the TLS set-up can never work: a TLS file that cannot be read, a CA file
	// without certificates, a client certificate that is expired or does not match its key,
	// a server certificate that does not verify (wrong CA, expired, wrong host name), or a
	// server that rejects our client certificate or sends none. Said at once: waiting for
	// the dial timeout cannot help.
	ErrTLS = errors.New("TLS misconfiguration")

	// ErrRefused: etcd answered the login and refused it (wrong user or password, or no
	// permission). Retrying cannot help.
	ErrRefused = errors.New("login refused")

	// ErrNotRegular: a path given to ReadBounded names a FIFO, device, socket or directory,
	// or a file of a kernel pseudo file system such as /proc (refusePseudoFile).
	ErrNotRegular = errors.New("not a regular file")
)

// classed is err, said as it is, and also of class (errors.Is finds both).
type classed struct{ class, err error }

func (e classed) Error() string   { return e.err.Error() }
func (e classed) Unwrap() []error { return []error{e.class, e.err} }
