package etcdconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Probe back-off between attempts at an endpoint that did not answer.
const (
	probeFirstBackoff = 50 * time.Millisecond
	probeMaxBackoff   = 500 * time.Millisecond
)

type probeResult struct {
	i   int // endpoint index
	err error
}

// probeEndpoints connects to each endpoint of s in parallel (TCP or unix
// socket, then the TLS handshake when tc is not nil or the URL says https or
// unixs), retrying with back-off until ctx ends. It returns nil at the first
// endpoint that works. It returns an error wrapping ErrTLS as soon as every
// endpoint was tried once and at least one failed for good (permanentTLS:
// the ones that answered reject our TLS set-up, so retrying cannot help),
// and otherwise, when ctx ends, an error naming each endpoint's kind of
// failure (describeDial). It starts one goroutine per endpoint and waits for
// them before it returns.
func probeEndpoints(ctx context.Context, s Settings, tc *tls.Config) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ch := make(chan probeResult)
	for i, e := range s.Endpoints {
		wg.Go(func() { probeUntil(ctx, i, e, tc, ch) })
	}
	last := make([]error, len(s.Endpoints))
	tried := 0
	for {
		select {
		case r := <-ch:
			if r.err == nil {
				return nil
			}
			if last[r.i] == nil {
				tried++
			}
			last[r.i] = r.err
			if tried == len(last) && anyPermanent(last) {
				return probeError(s.Endpoints, last)
			}
		case <-ctx.Done():
			return probeError(s.Endpoints, last)
		}
	}
}

func anyPermanent(errs []error) bool {
	for _, err := range errs {
		if err != nil && permanentTLS(err) {
			return true
		}
	}
	return false
}

// probeError joins each endpoint's failure; it wraps ErrTLS when one is permanent.
func probeError(eps []string, errs []error) error {
	var parts []string
	for i, err := range errs {
		if err == nil {
			err = errors.New("no answer (timed out)")
		}
		parts = append(parts, RedactEndpoint(eps[i])+": "+describeDial(err))
	}
	msg := strings.Join(parts, "; ")
	if anyPermanent(errs) {
		return fmt.Errorf("%w: %s", ErrTLS, msg)
	}
	return errors.New(msg)
}

// probeUntil tries endpoint e until it works, fails for good, or ctx ends,
// sending each attempt's result on ch.
func probeUntil(ctx context.Context, i int, e string, tc *tls.Config, ch chan<- probeResult) {
	backoff := probeFirstBackoff
	for {
		err := probeOnce(ctx, e, tc)
		select {
		case ch <- probeResult{i, err}:
		case <-ctx.Done():
			return
		}
		if err == nil || permanentTLS(err) {
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, probeMaxBackoff)
	}
}

// probeOnce connects to e once, as clientv3 would: TLS for https:// and
// unixs://, and for a bare host:port when tc is set. The handshake is tried
// with TLS 1.2 first, in which the server checks our client certificate
// before the handshake ends (TLS 1.3 reports a rejected client certificate
// only later), then with TLS 1.3 when the server refuses 1.2.
func probeOnce(ctx context.Context, e string, tc *tls.Config) error {
	network, addr, useTLS := "tcp", e, tc != nil
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		addr = strings.TrimSuffix(rest, "/")
		switch scheme {
		case "http":
			useTLS = false
		case "unix":
			network, useTLS = "unix", false
		case "unixs":
			network, useTLS = "unix", true
		case "https":
			useTLS = true
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil || !useTLS {
		if conn != nil {
			conn.Close()
		}
		return err
	}
	defer conn.Close()
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if tc != nil {
		conf = tc.Clone()
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && conf.ServerName == "" {
		conf.ServerName = host
	}
	conf.MaxVersion = tls.VersionTLS12
	err = tls.Client(conn, conf).HandshakeContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		return err
	}
	conn.Close()
	if conn, err = d.DialContext(ctx, network, addr); err != nil {
		return err
	}
	conf.MaxVersion = 0
	return tls.Client(conn, conf).HandshakeContext(ctx)
}

// permanentTLS reports whether a probe failed in a way retrying cannot fix:
// the server's certificate does not verify (unknown CA, expired, wrong
// host name), the server rejected the handshake (our client certificate
// missing, expired or from a CA it does not trust), or it does not speak
// TLS at all.
func permanentTLS(err error) bool {
	var verr *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var op *net.OpError
	return errors.As(err, &verr) || errors.As(err, &rh) || (errors.As(err, &op) && op.Op == "remote error")
}

// describeDial names the kind of a connection failure for messages:
// refused, DNS, timed out, TLS (with the x509 or handshake reason).
func describeDial(err error) string {
	var verr *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &verr):
		return "TLS: the server's certificate does not verify: " + verr.Err.Error()
	case errors.As(err, &rh):
		return "TLS: the server does not speak TLS (a plaintext etcd? then use http://)"
	case errors.As(err, &op) && op.Op == "remote error":
		return "TLS: the server rejected the handshake (" + op.Err.Error() + "): is the client certificate missing, expired, or from a CA the server does not trust?"
	case errors.As(err, &dns):
		return "DNS: cannot resolve " + dns.Name + ": " + dns.Err
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return "the connection was closed during the TLS handshake, without an answer (a plaintext etcd on this port? then use http://)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (nothing listens there)"
	case errors.Is(err, os.ErrNotExist):
		return "no such socket"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "no answer (timed out)"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "no answer (timed out)"
	}
	return err.Error()
}
