package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	defaultEndpoint    = "127.0.0.1:2379"
	defaultDialTimeout = 5 * time.Second // D3
	defaultConfigPath  = "/etc/conch/conch.conf"
)

// connSettings are the resolved connection settings, each with where it came
// from (issue 10: every message about a setting names its source).
type connSettings struct {
	Endpoints     []string
	EndpointsFrom string // "--endpoints", "CONCH_ENDPOINTS", "ETCDCTL_ENDPOINTS", "FILE:LINE" or "the default"
	CACert        string
	Cert          string
	Key           string
	User          string
	Password      string
	// PasswordFile is the file the password came from, "" when it came from
	// ETCDCTL_PASSWORD or NAME:PASSWORD: it is read again once when etcd
	// rejects the password (a rotated password file, issue 9).
	PasswordFile    string
	DialTimeout     time.Duration
	DialTimeoutFrom string
	// Warnings are said on stderr before anything else (a password file
	// others can read, a config file others can write).
	Warnings []string
}

// where names the endpoints for messages: "etcd at a,b (from ETCDCTL_ENDPOINTS)",
// with any user:password in a URL redacted.
func (s connSettings) where() string {
	eps := make([]string, len(s.Endpoints))
	for i, e := range s.Endpoints {
		eps[i] = redactEndpoint(e)
	}
	return fmt.Sprintf("etcd at %s (from %s)", strings.Join(eps, ","), endpointsFromText(s.EndpointsFrom))
}

// resolveConn applies D9's precedence to each setting: flags > CONCH_*
// environment (both already in flagged, by go-flags' env tags) > ETCDCTL_*
// environment > the config file > the default. configPath is read if it
// exists; explicit means the operator named it, so a missing file is an
// error. Errors are usage errors (exit 64) and name the setting's source.
func resolveConn(flagged connOptions, getenv func(string) string, configPath string, explicit bool) (connSettings, error) {
	cfg, err := readConfig(configPath, explicit)
	if err == nil {
		err = cfg.checkValues()
	}
	if err != nil {
		return connSettings{}, err
	}
	r := resolver{flagged: flagged, getenv: getenv, cfg: cfg}
	s := connSettings{Warnings: cfg.warnings}
	var warn string
	if s.Endpoints, s.EndpointsFrom, warn, err = r.endpoints(); err != nil {
		return s, err
	}
	if warn != "" {
		s.Warnings = append(s.Warnings, warn)
	}
	s.CACert, _ = r.pick(flagged.CACert, "cacert")
	s.Cert, _ = r.pick(flagged.Cert, "cert")
	s.Key, _ = r.pick(flagged.Key, "key")
	if (s.Cert == "") != (s.Key == "") {
		return s, errors.New("--cert and --key must be given together (a client certificate needs its key)")
	}
	if err := checkPlaintext(s); err != nil {
		return s, err
	}
	if err := r.credentials(&s); err != nil {
		return s, err
	}
	s.DialTimeout, s.DialTimeoutFrom = defaultDialTimeout, "the default"
	if v, from := r.pick(flagged.DialTimeout, "dial-timeout"); v != "" {
		if s.DialTimeout, err = parseDialTimeout(v, from); err != nil {
			return s, err
		}
		s.DialTimeoutFrom = from
	}
	return s, nil
}

// parseDialTimeout parses the dial timeout v that came from from: a duration over 0.
func parseDialTimeout(v, from string) (time.Duration, error) {
	d, err := parseDuration(v)
	if err == nil && d <= 0 {
		err = errors.New("must be more than 0")
	}
	if err != nil {
		return 0, fmt.Errorf("dial timeout from %s: %w", from, err)
	}
	return d, nil
}

// checkValues checks the endpoints and the dial timeout the config file sets, whether or not
// a flag or a variable overrides them (D9: the file is checked as a whole), so that a typo in
// it shows on every host, not only on those that do not override it.
func (c configFile) checkValues() error {
	if v := strings.TrimSpace(c.values["endpoints"]); v != "" {
		if _, err := parseEndpoints(v); err != nil {
			return fmt.Errorf("endpoints from %s: %w", c.source("endpoints"), err)
		}
	}
	if v := strings.TrimSpace(c.values["dial-timeout"]); v != "" {
		if _, err := parseDialTimeout(v, c.source("dial-timeout")); err != nil {
			return err
		}
	}
	return nil
}

// resolver picks each setting from its first source (D9).
type resolver struct {
	flagged connOptions
	getenv  func(string) string
	cfg     configFile
}

// envName is the variable suffix of an INI key: dial-timeout -> DIAL_TIMEOUT.
func envName(key string) string { return strings.ToUpper(strings.ReplaceAll(key, "-", "_")) }

// pick returns the value of the setting key (its INI name) and its source:
// the flag or CONCH_* value flagged (go-flags merges them: the source is
// CONCH_x when that variable holds the same value), ETCDCTL_x, then the
// config file (FILE:LINE). An empty or blank value counts as unset.
func (r resolver) pick(flagged, key string) (value, source string) {
	if v := strings.TrimSpace(flagged); v != "" {
		if strings.TrimSpace(r.getenv("CONCH_"+envName(key))) == v {
			return v, "CONCH_" + envName(key)
		}
		return v, "--" + key
	}
	if v := strings.TrimSpace(r.getenv("ETCDCTL_" + envName(key))); v != "" {
		return v, "ETCDCTL_" + envName(key)
	}
	if v := strings.TrimSpace(r.cfg.values[key]); v != "" {
		return v, r.cfg.source(key)
	}
	return "", ""
}

// endpoints resolves the endpoint list: the first of endpointSources, or
// the default. An explicitly empty --endpoints is refused by its flag type
// (endpointsValue), an empty one in the file by readConfig; a list with no
// endpoint in it (",") is refused here. When the chosen source overrides
// another that names other endpoints, warn names both (issue 10: a stale
// ETCDCTL_ENDPOINTS over the config file sent two --max 1 holders to two
// clusters without a word); warn is "" otherwise.
func (r resolver) endpoints() (list []string, from, warn string, err error) {
	srcs := r.endpointSources()
	if len(srcs) == 0 {
		srcs = []setting{{defaultEndpoint, "the default"}}
	}
	eps, from := srcs[0].value, srcs[0].from
	if list, err = parseEndpoints(eps); err != nil {
		return nil, from, "", fmt.Errorf("endpoints from %s: %w", from, err)
	}
	return list, from, overrideWarning(srcs), nil
}

// setting is one source's value of a setting, and the source's name.
type setting struct{ value, from string }

// endpointSources lists every source that sets the endpoints, in D9's
// order: --endpoints, CONCH_ENDPOINTS (go-flags merges the two: the flag
// wins, and the variable counts as a source of its own when it differs),
// ETCDCTL_ENDPOINTS, the config file (FILE:LINE). Blank values count as unset.
func (r resolver) endpointSources() []setting {
	var srcs []setting
	flagged := strings.TrimSpace(string(r.flagged.Endpoints))
	env := strings.TrimSpace(r.getenv("CONCH_ENDPOINTS"))
	if flagged != "" && flagged != env {
		srcs = append(srcs, setting{flagged, "--endpoints"})
	}
	if env != "" && flagged != "" { // flagged empty: go-flags had no CONCH_ENDPOINTS to merge
		srcs = append(srcs, setting{env, "CONCH_ENDPOINTS"})
	}
	if v := strings.TrimSpace(r.getenv("ETCDCTL_ENDPOINTS")); v != "" {
		srcs = append(srcs, setting{v, "ETCDCTL_ENDPOINTS"})
	}
	if v := strings.TrimSpace(r.cfg.values["endpoints"]); v != "" {
		srcs = append(srcs, setting{v, r.cfg.source("endpoints")})
	}
	return srcs
}

// overrideWarning is the warning for srcs[0] overriding lower sources that
// name other endpoints (the same endpoints in another order or spacing are
// no override), or "". Endpoints are shown redacted (showEndpoints).
func overrideWarning(srcs []setting) string {
	var over []string
	for _, s := range srcs[1:] {
		if sameEndpoints(s.value, srcs[0].value) {
			continue
		}
		over = append(over, fmt.Sprintf("%s (%s)", s.from, showEndpoints(s.value)))
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("endpoints from %s (%s) override those of %s (D9: flags > CONCH_* > ETCDCTL_* > config file); unset or correct the one that is stale",
		srcs[0].from, showEndpoints(srcs[0].value), strings.Join(over, " and "))
}

// endpointList is a comma-separated endpoint list's trimmed, non-empty
// elements, in their order.
func endpointList(eps string) []string {
	var out []string
	for _, e := range splitEndpoints(eps) {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// splitEndpoints splits a comma-separated endpoint list, keeping a user-info with commas in
// it whole: an element with an '@' takes back every element since the previous one with an
// '@' (in "http://u:a,b@h" the password is "a,b"), so that redactEndpoint hides all of it.
// Lists with user-info are refused anyway (checkEndpoint); this only decides what is shown.
func splitEndpoints(eps string) []string {
	parts := strings.Split(eps, ",")
	var out []string
	since := 0 // index in out after the last element with an '@'
	for _, p := range parts {
		if strings.Contains(p, "@") && since < len(out) {
			p = strings.Join(append(out[since:len(out):len(out)], p), ",")
			out = out[:since]
		}
		out = append(out, p)
		if strings.Contains(p, "@") {
			since = len(out)
		}
	}
	return out
}

// sameEndpoints reports whether two lists name the same endpoints, in any order, however
// spelled: host:port and http://host:port are one endpoint (clientv3 dials both the same),
// as are a trailing '/' and a duplicate.
func sameEndpoints(a, b string) bool {
	norm := func(list []string) []string {
		for i, e := range list {
			list[i] = strings.TrimSuffix(strings.TrimPrefix(e, "http://"), "/")
		}
		slices.Sort(list)
		return slices.Compact(list)
	}
	return slices.Equal(norm(endpointList(a)), norm(endpointList(b)))
}

// showEndpoints is an endpoint list for messages: each endpoint redacted
// (redactEndpoint: no user-info, hence no password), control characters
// replaced by '?'. The list may come from an unchecked lower source.
func showEndpoints(eps string) string {
	list := endpointList(eps)
	for i, e := range list {
		list[i] = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}, redactEndpoint(e))
	}
	return strings.Join(list, ",")
}

// maxEndpoints bounds the endpoint list: an etcd cluster has a handful of members.
const maxEndpoints = 64

// parseEndpoints splits a comma-separated endpoint list and checks each
// endpoint (checkEndpoint). Errors redact URL user-info.
func parseEndpoints(eps string) ([]string, error) {
	var list []string
	for _, e := range splitEndpoints(eps) {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if err := checkEndpoint(e); err != nil {
			return nil, err
		}
		if strings.Contains(e, ",") { // elements splitEndpoints kept together around an '@'
			return nil, fmt.Errorf("invalid etcd endpoint %q: an '@' in the list (user-info?): give the user with --user and the password with --password-file", redactEndpoint(e))
		}
		list = append(list, e)
	}
	switch {
	case len(list) == 0:
		return nil, errors.New("no endpoint in the list (want comma-separated host:port or URLs)")
	case len(list) > maxEndpoints:
		return nil, fmt.Errorf("%d endpoints, more than the %d allowed", len(list), maxEndpoints)
	}
	return list, nil
}

// checkEndpoint accepts what clientv3 dials: host:port, or a URL with scheme
// http, https, unix or unixs. Anything else is a usage error (64), not an
// unreachable etcd (69). User-info in a URL is refused (clientv3 would not
// use it) and never echoed.
func checkEndpoint(e string) error {
	shown := redactEndpoint(e)
	bad := func(why string) error {
		return fmt.Errorf("invalid etcd endpoint %q: %s (want host:port or http(s)://host:port)", shown, why)
	}
	if strings.ContainsFunc(e, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return bad("control character in it")
	}
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		switch scheme {
		case "unix", "unixs":
			if rest == "" {
				return bad("empty socket path")
			}
			return nil
		case "http", "https":
			if strings.Contains(rest, "@") {
				return bad("user-info in the URL: give the user with --user and the password with --password-file")
			}
			e = strings.TrimSuffix(rest, "/")
		default:
			return bad("unknown scheme")
		}
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		return bad("not host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return bad("needs a host and a port 1..65535")
	}
	return nil
}

// redactEndpoint replaces the user-info of an endpoint URL with "xxxxx", as
// net/url's Redacted does for the password, so no message echoes a secret.
func redactEndpoint(e string) string {
	scheme, rest, ok := strings.Cut(e, "://")
	if !ok {
		if at := strings.LastIndex(e, "@"); at >= 0 {
			return "xxxxx@" + e[at+1:]
		}
		return e
	}
	// The last '@' anywhere, not only before the first '/': a password may hold a '/'
	// (base64), and hiding too much is the safe way to be wrong.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://xxxxx@" + rest[at+1:]
	}
	return e
}

// checkPlaintext refuses TLS material with a plaintext endpoint (issue 9):
// an http:// or unix:// endpoint given with --cacert, --cert or --key would
// otherwise run in plaintext, credentials included, while the operator
// asked for TLS. Usage error (64).
func checkPlaintext(s connSettings) error {
	if s.CACert == "" && s.Cert == "" {
		return nil
	}
	for _, e := range s.Endpoints {
		if u, err := url.Parse(e); err == nil && (u.Scheme == "http" || u.Scheme == "unix") {
			return fmt.Errorf("endpoint %q (from %s) is plaintext, but TLS files are set (--cacert/--cert): use https:// (or unixs://), or drop the TLS settings; conch does not fall back to plaintext",
				redactEndpoint(e), s.EndpointsFrom)
		}
	}
	return nil
}
