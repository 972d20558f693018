package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/sema"
	"github.com/jessevdk/go-flags"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	defaultEndpoint    = "127.0.0.1:2379"
	defaultDialTimeout = 5 * time.Second // D3
	defaultConfigPath  = "/etc/conch/conch.conf"
)

// fileConfig is /etc/conch/conch.conf: an INI file read with go-flags' INI
// parser, whose [etcd] section takes the connection settings (D9).
type fileConfig struct {
	Etcd connOptions `group:"etcd"`
}

// connSettings are the resolved connection settings.
type connSettings struct {
	Endpoints   []string
	CACert      string
	Cert        string
	Key         string
	User        string
	Password    string
	DialTimeout time.Duration
}

// resolveConn applies D9's precedence to each setting: flags > CONCH_*
// environment (both already in flagged, by go-flags' env tags) > ETCDCTL_*
// environment > the config file > the default. configPath is read if it
// exists; explicit means the operator named it, so a missing file is an
// error. Errors are usage errors (exit 64).
func resolveConn(flagged connOptions, getenv func(string) string, configPath string, explicit bool) (connSettings, error) {
	var file fileConfig
	if err := readConfig(configPath, explicit, &file); err != nil {
		return connSettings{}, err
	}
	pick := func(flag, etcdctl, fromFile string) string {
		for _, v := range []string{flag, getenv("ETCDCTL_" + etcdctl), fromFile} {
			if v = strings.TrimSpace(v); v != "" {
				return v
			}
		}
		return ""
	}
	var s connSettings
	eps := pick(flagged.Endpoints, "ENDPOINTS", file.Etcd.Endpoints)
	if eps == "" {
		eps = defaultEndpoint
	}
	for _, e := range strings.Split(eps, ",") {
		if e = strings.TrimSpace(e); e != "" {
			if err := checkEndpoint(e); err != nil {
				return s, err
			}
			s.Endpoints = append(s.Endpoints, e)
		}
	}
	if len(s.Endpoints) == 0 {
		return s, fmt.Errorf("no etcd endpoint in %q (comma-separated host:port or URLs)", eps)
	}
	s.CACert = pick(flagged.CACert, "CACERT", file.Etcd.CACert)
	s.Cert = pick(flagged.Cert, "CERT", file.Etcd.Cert)
	s.Key = pick(flagged.Key, "KEY", file.Etcd.Key)
	s.User = pick(flagged.User, "USER", file.Etcd.User)
	if (s.Cert == "") != (s.Key == "") {
		return s, errors.New("--cert and --key must be given together")
	}
	// etcdctl's NAME:PASSWORD form is accepted wherever a user is given.
	// The password ranks like the user (D9): at each level (flags and
	// CONCH_*, then ETCDCTL_*, then the config file) a password file or
	// ETCDCTL_PASSWORD first, then that level's NAME:PASSWORD.
	s.User, _, _ = strings.Cut(s.User, ":")
	for _, lv := range []struct{ passwordFile, password, user string }{
		{flagged.PasswordFile, "", flagged.User},
		{"", getenv("ETCDCTL_PASSWORD"), getenv("ETCDCTL_USER")},
		{file.Etcd.PasswordFile, "", file.Etcd.User},
	} {
		_, userPass, _ := strings.Cut(lv.user, ":")
		if strings.TrimSpace(lv.passwordFile) != "" {
			p, err := readPassword(lv.passwordFile)
			if err != nil {
				return s, err
			}
			s.Password = p
		} else if s.Password = cmp.Or(lv.password, userPass); s.Password == "" {
			continue
		}
		break
	}
	if s.Password != "" && s.User == "" {
		return s, errors.New("a password was given without --user")
	}
	s.DialTimeout = defaultDialTimeout
	if v := pick(flagged.DialTimeout, "DIAL_TIMEOUT", file.Etcd.DialTimeout); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return s, fmt.Errorf("--dial-timeout: %w", err)
		}
		if d <= 0 {
			return s, errors.New("--dial-timeout must be positive")
		}
		s.DialTimeout = d
	}
	return s, nil
}

// checkEndpoint accepts what clientv3 dials: host:port, or a URL with scheme
// http, https, unix or unixs. Anything else is a usage error (64), not an
// unreachable etcd (69).
func checkEndpoint(e string) error {
	bad := func(why string) error {
		return fmt.Errorf("invalid etcd endpoint %q: %s (want host:port or http(s)://host:port)", e, why)
	}
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		switch scheme {
		case "unix", "unixs":
			if rest == "" {
				return bad("empty socket path")
			}
			return nil
		case "http", "https":
			e = strings.TrimSuffix(rest, "/")
		default:
			return bad("unknown scheme " + scheme)
		}
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		return bad(err.Error())
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return bad("needs a host and a port 1..65535")
	}
	return nil
}

func readConfig(path string, explicit bool, into *fileConfig) error {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	p := flags.NewNamedParser("conch.conf", flags.None)
	if _, err := p.AddGroup("etcd", "", &into.Etcd); err != nil {
		return err
	}
	if err := flags.NewIniParser(p).ParseFile(path); err != nil {
		return fmt.Errorf("cannot read config %s: %w", path, err)
	}
	return nil
}

func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read password file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// newClient builds an etcd client from s. It does not contact etcd (unless a
// user is set: then clientv3 logs in at once, and a failure wraps
// errUnreachable when etcd did not answer, see exitStatus): the
// first request, bounded by s.DialTimeout, does (D3). Errors (bad TLS files)
// are usage errors.
func newClient(s connSettings) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   s.Endpoints,
		DialTimeout: s.DialTimeout,
		Username:    s.User,
		Password:    s.Password,
		Logger:      zap.NewNop(),
	}
	tlsNeeded := s.CACert != "" || s.Cert != ""
	for _, e := range s.Endpoints {
		tlsNeeded = tlsNeeded || strings.HasPrefix(e, "https://")
	}
	if tlsNeeded {
		info := transport.TLSInfo{CertFile: s.Cert, KeyFile: s.Key, TrustedCAFile: s.CACert}
		tc, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("cannot set up TLS: %w", err)
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg) // with a user, this dials and logs in within DialTimeout
	switch {
	case sema.Refused(err):
		return nil, fmt.Errorf("etcd at %s refused the login: %w", strings.Join(s.Endpoints, ","), err)
	case err != nil:
		return nil, fmt.Errorf("%w: cannot reach etcd at %s within --dial-timeout %v: %w", errUnreachable, strings.Join(s.Endpoints, ","), s.DialTimeout, err)
	}
	return c, nil
}

// errUnreachable marks a newClient failure that is etcd not answering (D3:
// 69), as opposed to bad settings or a refused login (64): see exitStatus.
var errUnreachable = errors.New("etcd unavailable")
