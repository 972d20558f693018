package etcdconn

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
	DefaultEndpoint    = "127.0.0.1:2379"
	DefaultDialTimeout = 5 * time.Second // D3
)

// Settings are the resolved connection settings, each with where it came
// from: every message about a setting names its source.
type Settings struct {
	Endpoints     []string
	EndpointsFrom string // "--endpoints", "CONCH_ENDPOINTS", "ETCDCTL_ENDPOINTS", "FILE:LINE" or "the default"
	// EndpointsHint follows EndpointsFrom in Where when set: where to set other endpoints
	// (an operator whose conch talks to the default has most likely not set any yet)
	EndpointsHint string
	CACert        string
	Cert          string
	Key           string
	User          string
	Password      string
	// PasswordFile is the file the password came from, "" when it came from
	// ETCDCTL_PASSWORD or NAME:PASSWORD: it is read again once when etcd
	// rejects the password (a rotated password file).
	PasswordFile    string
	DialTimeout     time.Duration
	DialTimeoutFrom string
	// Warnings are said on stderr before anything else (a password file
	// others can read, a config file others can write).
	Warnings []string
}

// Where names the endpoints for messages: "etcd at a,b (from ETCDCTL_ENDPOINTS)",
// with any user:password in a URL redacted, and EndpointsHint after the source if set
// ("(from the default; set ...)").
func (s Settings) Where() string {
	eps := make([]string, len(s.Endpoints))
	for i, e := range s.Endpoints {
		eps[i] = RedactEndpoint(e)
	}
	from := s.EndpointsFrom
	if s.EndpointsHint != "" {
		from += "; " + s.EndpointsHint
	}
	return fmt.Sprintf("etcd at %s (from %s)", strings.Join(eps, ","), from)
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
// '@' (in "http://u:a,b@h" the password is "a,b"), so that RedactEndpoint hides all of it.
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

// SameEndpoints reports whether two lists name the same endpoints, in any order, however
// spelled: host:port and http://host:port are one endpoint (clientv3 dials both the same),
// as are a trailing '/' and a duplicate.
func SameEndpoints(a, b string) bool {
	norm := func(list []string) []string {
		for i, e := range list {
			list[i] = strings.TrimSuffix(strings.TrimPrefix(e, "http://"), "/")
		}
		slices.Sort(list)
		return slices.Compact(list)
	}
	return slices.Equal(norm(endpointList(a)), norm(endpointList(b)))
}

// ShowEndpoints is an endpoint list for messages: each endpoint redacted
// (RedactEndpoint: no user-info, hence no password), control characters
// replaced by '?'. The list may come from an unchecked lower source.
func ShowEndpoints(eps string) string {
	list := endpointList(eps)
	for i, e := range list {
		list[i] = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}, RedactEndpoint(e))
	}
	return strings.Join(list, ",")
}

// maxEndpoints bounds the endpoint list: an etcd cluster has a handful of members.
const maxEndpoints = 64

// ParseEndpoints splits a comma-separated endpoint list and checks each
// endpoint (checkEndpoint). Errors redact URL user-info.
func ParseEndpoints(eps string) ([]string, error) {
	var list []string
	for _, e := range splitEndpoints(eps) {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if err := checkEndpoint(e); err != nil {
			return nil, err
		}
		if strings.Contains(e, ",") { // elements splitEndpoints kept together around an '@'
			return nil, fmt.Errorf("invalid etcd endpoint %q: an '@' in the list (user-info?): give the user with --user and the password with --password-file", RedactEndpoint(e))
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
// http, https, unix or unixs. Anything else is a setting that can never work, not an
// unreachable etcd. User-info in a URL is refused (clientv3 would not
// use it) and never echoed.
func checkEndpoint(e string) error {
	shown := RedactEndpoint(e)
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

// RedactEndpoint replaces the user-info of an endpoint URL with "xxxxx", as
// net/url's Redacted does for the password, so no message echoes a secret.
func RedactEndpoint(e string) string {
	scheme, rest, ok := strings.Cut(e, "://")
	if !ok || strings.Contains(scheme, "@") { // no scheme, or user-info before a "://"
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

// CheckPlaintext refuses TLS material with a plaintext endpoint:
// an http:// or unix:// endpoint given with --cacert, --cert or --key would
// otherwise run in plaintext, credentials included, while the operator
// asked for TLS. The error names the endpoint (redacted) and its source.
func CheckPlaintext(s Settings) error {
	if s.CACert == "" && s.Cert == "" {
		return nil
	}
	for _, e := range s.Endpoints {
		if u, err := url.Parse(e); err == nil && (u.Scheme == "http" || u.Scheme == "unix") {
			return fmt.Errorf("endpoint %q (from %s) is plaintext, but TLS files are set (--cacert/--cert): use https:// (or unixs://), or drop the TLS settings; conch does not fall back to plaintext",
				RedactEndpoint(e), s.EndpointsFrom)
		}
	}
	return nil
}
