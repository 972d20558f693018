package etcdconn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"
)

// tlsWanted reports whether s asks for TLS: a CA or client certificate, or
// an https:// or unixs:// endpoint.
func tlsWanted(s Settings) bool {
	if s.CACert != "" || s.Cert != "" {
		return true
	}
	for _, e := range s.Endpoints {
		if strings.HasPrefix(e, "https://") || strings.HasPrefix(e, "unixs://") {
			return true
		}
	}
	return false
}

// tlsConfig builds the client TLS configuration from s's files, each read
// bounded and without blocking (ReadBounded, maxTLSFile). It returns nil when
// s does not ask for TLS. Errors are permanent misconfigurations, wrapping
// ErrTLS: a file that cannot be read, a CA file with no certificate in it,
// a key that does not match its certificate, a client certificate that
// has expired or is not valid yet (now is the time checked against).
func tlsConfig(s Settings, now time.Time) (*tls.Config, error) {
	if !tlsWanted(s) {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CACert != "" {
		pemCA, _, err := ReadBounded(s.CACert, "CA file", maxTLSFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLS, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemCA) {
			return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrTLS, s.CACert)
		}
		tc.RootCAs = pool
	}
	if s.Cert != "" {
		certPEM, _, err := ReadBounded(s.Cert, "client certificate", maxTLSFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLS, err)
		}
		keyPEM, _, err := ReadBounded(s.Key, "client key", maxTLSFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLS, err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil { // (the message names no key material)
			return nil, fmt.Errorf("%w: client certificate %s with key %s: %w", ErrTLS, s.Cert, s.Key, err)
		}
		if err := checkValidity(pair, now); err != nil {
			return nil, fmt.Errorf("%w: client certificate %s: %w", ErrTLS, s.Cert, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// checkValidity refuses a client certificate outside its validity period:
// every etcd would reject it, so waiting for the dial timeout helps nobody.
func checkValidity(pair tls.Certificate, now time.Time) error {
	leaf := pair.Leaf
	if leaf == nil && len(pair.Certificate) > 0 {
		l, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return err
		}
		leaf = l
	}
	switch {
	case leaf == nil:
		return fmt.Errorf("no certificate in it")
	case now.After(leaf.NotAfter):
		return fmt.Errorf("expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}
