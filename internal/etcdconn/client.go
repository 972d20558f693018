package etcdconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/conch-project/conch/internal/etcderr"
)

// New builds an etcd client from s. Beside clientv3's dial (and its login, with a user),
// it probes the endpoints (probeEndpoints: one TCP connection, and the TLS handshake when TLS
// is on, per endpoint in parallel, ending at the first that works; bounded by s.DialTimeout).
// The probe runs beside the dial rather than before it: with TLS, the two handshakes then
// overlap instead of adding up. With a user set, clientv3 logs in within s.DialTimeout. A
// password that came from a file is read again once when etcd rejects it
// (reauthInterceptor), so rotating the password file does not stop a running holder.
//
// Errors, each naming the endpoints and their source (Settings.Where): ErrTLS (at once, when
// the TLS set-up fails for good), ErrRefused (etcd refused the login), ErrUnreachable (no
// endpoint answered within s.DialTimeout, or what answered is not an etcd: IsNotEtcd), or
// an unusable setting (a TLS file that cannot be read is ErrTLS too).
//
// abort ends the attempt early (the caller got a signal while connecting): New then
// returns context.Cause(abort) at once, and leaves nothing behind. abort bounds the attempt
// only: a client that was returned lives until it is closed.
func New(abort context.Context, s Settings) (*clientv3.Client, error) {
	tc, err := tlsConfig(s, time.Now())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(abort, s.DialTimeout)
	defer cancel()
	life, stop := context.WithCancel(context.Background()) // the client's; stopped early if the attempt fails
	unhook := context.AfterFunc(abort, stop)
	defer unhook()
	made := make(chan dialResult, 1)
	go func() { made <- dial(clientConfig(s, tc, life)) }()
	perr := probeEndpoints(ctx, s, tc)
	if perr != nil {
		stop() // the probe's verdict is final: cancel the dial
	}
	d := <-made
	if perr == nil && d.err == nil && unhook() { // unhooked before abort could end life: the client is the caller's
		context.AfterFunc(d.c.Ctx(), stop) // Close ends life too
		return d.c, nil
	}
	stop()
	if d.c != nil {
		d.c.Close()
	}
	switch {
	case abort.Err() != nil:
		return nil, context.Cause(abort)
	case errors.Is(perr, ErrTLS):
		return nil, fmt.Errorf("cannot connect to %s: %w", s.Where(), perr)
	case perr != nil:
		return nil, fmt.Errorf("%w: cannot reach %s within the dial timeout %v (from %s): %w", ErrUnreachable, s.Where(), s.DialTimeout, s.DialTimeoutFrom, perr)
	case etcderr.Refused(d.err):
		return nil, classed{ErrRefused, fmt.Errorf("%s refused the login of user %q: %w", s.Where(), s.User, d.err)}
	case IsNotEtcd(d.err): // it answered at once: no dial timeout to speak of
		return nil, fmt.Errorf("%w: %s answers, but %w", ErrUnreachable, s.Where(), d.err)
	}
	// the probe connected: it accepts connections, but the login got no answer
	return nil, fmt.Errorf("%w: no answer from %s within the dial timeout %v (from %s), although it accepts connections (not an etcd, a TLS etcd reached with http://, or a cluster without a leader?): %w",
		ErrUnreachable, s.Where(), s.DialTimeout, s.DialTimeoutFrom, d.err)
}

// dialResult is what dial returns.
type dialResult struct {
	c   *clientv3.Client
	err error
}

// dial makes the client of cfg (with a user, clientv3.New dials and logs in within the dial
// timeout) and starts its connection at once: without a user, clientv3.New does not connect,
// and the connection would otherwise wait for the first request.
func dial(cfg clientv3.Config) dialResult {
	c, err := clientv3.New(cfg)
	if err != nil {
		return dialResult{nil, err}
	}
	c.ActiveConnection().Connect()
	return dialResult{c, nil}
}

// clientConfig is clientv3's configuration for s, with TLS tc, living as long as life.
func clientConfig(s Settings, tc *tls.Config, life context.Context) clientv3.Config {
	cfg := clientv3.Config{
		Endpoints:   s.Endpoints,
		DialTimeout: s.DialTimeout,
		Username:    s.User,
		Password:    s.Password,
		TLS:         tc,
		Logger:      zap.NewNop(),
		Context:     life,
	}
	cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = keepAliveTime, keepAliveTimeout // a dead member is noticed (keepalive.go)
	// a server that answers plain HTTP is said to be "not an etcd", not "no answer"
	interceptors := []grpc.UnaryClientInterceptor{notEtcdInterceptor()}
	if s.PasswordFile != "" {
		interceptors = append(interceptors, reauthInterceptor(s.Password, s.PasswordFile))
	}
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(interceptors...), grpc.WithConnectParams(reconnect)}
	return cfg
}
