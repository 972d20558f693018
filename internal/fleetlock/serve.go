package fleetlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
)

// The HTTP server's limits. A client trickling its headers (slowloris) is cut after
// headerTimeout and holds only its own connection meanwhile; a body must arrive within
// readTimeout; an answer waits for etcd at most Config.Timeout, well within writeTimeout.
const (
	headerTimeout  = 10 * time.Second
	readTimeout    = 30 * time.Second
	writeTimeout   = 60 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 64 << 10
	// ShutdownGrace bounds the wait for requests in flight at a stop: a request waits for
	// etcd at most Config.Timeout, so they all end within it.
	ShutdownGrace = DefaultTimeout + 5*time.Second
)

// Serve serves s on ln (HTTPS when tc is not nil) until ctx ends, then stops accepting,
// lets the requests in flight finish within ShutdownGrace, closes what is left and returns
// nil. It blocks. Errors: the listener's, when it fails while serving.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tc *tls.Config) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		TLSConfig:         tc,
		ErrorLog:          log.New(io.Discard, "", 0), // a client's broken TLS handshake is not ours to log
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// maxTLSFile bounds a certificate, key or CA file.
const maxTLSFile = 1 << 20

// TLSConfig builds the server's TLS configuration (TLS 1.2 or later) from a certificate and
// key file, and, when clientCA is not "", requires client certificates signed by a CA of
// that file. Files are read as the etcd connection's are (etcdconn.ReadBounded: regular
// files only, bounded, never blocking). Errors say which file and why.
func TLSConfig(certFile, keyFile, clientCA string) (*tls.Config, error) {
	certPEM, _, err := etcdconn.ReadBounded(certFile, "TLS certificate", maxTLSFile)
	if err != nil {
		return nil, err
	}
	keyPEM, _, err := etcdconn.ReadBounded(keyFile, "TLS key", maxTLSFile)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if clientCA != "" {
		pemCA, _, err := etcdconn.ReadBounded(clientCA, "client CA file", maxTLSFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemCA) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificate", clientCA)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
