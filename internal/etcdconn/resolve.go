package etcdconn

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// resolve is Resolve, its errors not yet classed.
func resolve(src Sources) (Settings, error) {
	if err := checkFile(src); err != nil {
		return Settings{}, err
	}
	r := resolver{flagged: src.Flagged, getenv: src.Getenv, file: src.File}
	var s Settings
	var warn string
	var err error
	if s.Endpoints, s.EndpointsFrom, warn, err = r.endpoints(); err != nil {
		return s, err
	}
	if warn != "" {
		s.Warnings = append(s.Warnings, warn)
	}
	if s.EndpointsFrom == "the default" {
		s.EndpointsHint = src.DefaultHint
	}
	s.CACert, _ = r.pick(src.Flagged.CACert, "cacert")
	s.Cert, _ = r.pick(src.Flagged.Cert, "cert")
	s.Key, _ = r.pick(src.Flagged.Key, "key")
	if (s.Cert == "") != (s.Key == "") {
		return s, errors.New("--cert and --key must be given together (a client certificate needs its key)")
	}
	if err := CheckPlaintext(s); err != nil {
		return s, err
	}
	if err := r.credentials(&s); err != nil {
		return s, err
	}
	s.DialTimeout, s.DialTimeoutFrom = DefaultDialTimeout, "the default"
	if v, from := r.pick(src.Flagged.DialTimeout, "dial-timeout"); v != "" {
		if s.DialTimeout, err = parseDialTimeout(src.ParseDuration, v, from); err != nil {
			return s, err
		}
		s.DialTimeoutFrom = from
	}
	return s, nil
}

// parseDialTimeout parses the dial timeout v that came from from with parse: a duration over 0.
func parseDialTimeout(parse func(string) (time.Duration, error), v, from string) (time.Duration, error) {
	d, err := parse(v)
	if err == nil && d <= 0 {
		err = errors.New("must be more than 0")
	}
	if err != nil {
		return 0, fmt.Errorf("dial timeout from %s: %w", from, err)
	}
	return d, nil
}

// checkFile checks the endpoints and the dial timeout the config file sets, whether or not
// a flag or a variable overrides them (D9b: the file is checked as a whole), so that a typo in
// it shows on every host, not only on those that do not override it.
func checkFile(src Sources) error {
	if v := strings.TrimSpace(src.File["endpoints"].Value); v != "" {
		if _, err := ParseEndpoints(v); err != nil {
			return fmt.Errorf("endpoints from %s: %w", src.File["endpoints"].From, err)
		}
	}
	if v := strings.TrimSpace(src.File["dial-timeout"].Value); v != "" {
		if _, err := parseDialTimeout(src.ParseDuration, v, src.File["dial-timeout"].From); err != nil {
			return err
		}
	}
	return nil
}

// resolver picks each setting from its first source (D9).
type resolver struct {
	flagged Flagged
	getenv  func(string) string
	file    map[string]FileValue
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
	if v := strings.TrimSpace(r.file[key].Value); v != "" {
		return v, r.file[key].From
	}
	return "", ""
}

// endpoints resolves the endpoint list: the first of endpointSources, or
// the default. An explicitly empty --endpoints is refused by the caller's
// flag type, an empty one in the file by the caller's reader; a list with no
// endpoint in it (",") is refused here. When the chosen source overrides
// another that names other endpoints, warn names both (a stale
// ETCDCTL_ENDPOINTS over the config file would send two --max 1 holders to two
// clusters without a word); warn is "" otherwise.
func (r resolver) endpoints() (list []string, from, warn string, err error) {
	srcs := r.endpointSources()
	if len(srcs) == 0 {
		srcs = []setting{{DefaultEndpoint, "the default"}}
	}
	eps, from := srcs[0].value, srcs[0].from
	if list, err = ParseEndpoints(eps); err != nil {
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
	flagged := strings.TrimSpace(r.flagged.Endpoints)
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
	if v := strings.TrimSpace(r.file["endpoints"].Value); v != "" {
		srcs = append(srcs, setting{v, r.file["endpoints"].From})
	}
	return srcs
}

// overrideWarning is the warning for srcs[0] overriding lower sources that
// name other endpoints (the same endpoints in another order or spacing are
// no override), or "". Endpoints are shown redacted (ShowEndpoints).
func overrideWarning(srcs []setting) string {
	var over []string
	for _, s := range srcs[1:] {
		if SameEndpoints(s.value, srcs[0].value) {
			continue
		}
		over = append(over, fmt.Sprintf("%s (%s)", s.from, ShowEndpoints(s.value)))
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("endpoints from %s (%s) override those of %s (flags win over CONCH_*, which win over ETCDCTL_*, which win over the config file); unset or correct the one that is stale",
		srcs[0].from, ShowEndpoints(srcs[0].value), strings.Join(over, " and "))
}
