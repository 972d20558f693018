package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/jessevdk/go-flags"
)

// defaultConfigPath is the config file read when --config and CONCH_CONFIG are unset.
const defaultConfigPath = "/etc/conch/conch.conf"

// maxConfigFile bounds the config file: a handful of settings.
const maxConfigFile = 64 << 10 // 64 KiB

// iniEtcd is the [etcd] section of /etc/conch/conch.conf (D9), read with
// go-flags' INI parser. Values stay strings: they are checked where the
// flags' are, with the file and line as their source.
type iniEtcd struct {
	Endpoints    string `ini-name:"endpoints"`
	CACert       string `ini-name:"cacert"`
	Cert         string `ini-name:"cert"`
	Key          string `ini-name:"key"`
	User         string `ini-name:"user"`
	PasswordFile string `ini-name:"password-file"`
	DialTimeout  string `ini-name:"dial-timeout"`
}

// configFile is a read config: its settings by INI name, and where each was set.
type configFile struct {
	path     string
	values   map[string]string
	lines    map[string]int
	warnings []string
}

// source names where key was set: "FILE:LINE".
func (c configFile) source(key string) string {
	if n := c.lines[key]; n > 0 {
		return c.path + ":" + strconv.Itoa(n)
	}
	return c.path
}

// readConfig reads the INI config at path (no-op for ""), bounded and without
// blocking (etcdconn.ReadBounded). A missing file is no error unless explicit (the
// operator named it). Parse errors give FILE:LINE and what is wrong, never
// the line itself (it may hold a secret). A file others can write is
// read, with a warning: anyone could redirect the endpoints and receive the
// password. Errors are usage errors (64).
func readConfig(path string, explicit bool) (configFile, error) {
	cfg := configFile{path: path, values: map[string]string{}, lines: map[string]int{}}
	if path == "" {
		return cfg, nil
	}
	b, perm, err := etcdconn.ReadBounded(path, "config file", maxConfigFile)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if isPermission(err) {
		return cfg, configAccessError(path, explicit, err)
	}
	if err != nil {
		return cfg, err
	}
	b = stripBOM(b)
	if perm&0o002 != 0 {
		cfg.warnings = append(cfg.warnings, fmt.Sprintf("config file %s is writable by others (mode %04o): anyone could redirect conch to their own etcd and receive its password; chmod o-w it", path, perm))
	}
	var sec iniEtcd
	p := flags.NewNamedParser("conch.conf", flags.None)
	if _, err := p.AddGroup("etcd", "", &sec); err != nil {
		return cfg, err
	}
	perr := flags.NewIniParser(p).Parse(bytes.NewReader(b))
	var ie *flags.IniError
	if errors.As(perr, &ie) { // a line go-flags could not take: it knows which
		return cfg, configError(path, perr)
	}
	// go-flags names an unknown section without its line, and keeps the
	// last of a repeated key in silence: scanIni tells both with FILE:LINE
	if cfg.lines, err = scanIni(path, b); err != nil {
		return cfg, err
	}
	if perr != nil {
		return cfg, configError(path, perr)
	}
	for k, v := range map[string]string{"endpoints": sec.Endpoints, "cacert": sec.CACert, "cert": sec.Cert, "key": sec.Key,
		"user": sec.User, "password-file": sec.PasswordFile, "dial-timeout": sec.DialTimeout} {
		cfg.values[k] = v
	}
	if n := cfg.lines["endpoints"]; n > 0 && strings.TrimSpace(sec.Endpoints) == "" { // as --endpoints "" is: an empty list is a mistake, not the default
		return cfg, fmt.Errorf("config file %s:%d: endpoints is empty: name at least one endpoint (host:port or URL), or remove the line for the default %s", path, n, etcdconn.DefaultEndpoint)
	}
	return cfg, nil
}

// configError turns a go-flags INI error into FILE:LINE: what, without the
// offending line's text.
func configError(path string, err error) error {
	var ie *flags.IniError
	if !errors.As(err, &ie) {
		return fmt.Errorf("cannot read config file %s: %w", path, err)
	}
	what := "cannot be parsed"
	switch m := ie.Message; {
	case strings.HasPrefix(m, "malformed key=value"):
		what = "not a `key = value` line"
	case strings.HasPrefix(m, "malformed section"), strings.HasPrefix(m, "empty section"):
		what = "malformed [section] header"
	case strings.HasPrefix(m, "unknown option: "):
		name := strings.TrimPrefix(m, "unknown option: ")
		if len(name) > 40 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			name = name[:min(len(name), 40)] + "..."
		}
		what = fmt.Sprintf("unknown setting %q (known in [etcd]: endpoints, cacert, cert, key, user, password-file, dial-timeout)", name)
	case strings.Contains(m, "invalid syntax"):
		what = "badly quoted value"
	}
	return fmt.Errorf("config file %s:%d: %s", path, ie.LineNumber, what)
}

// configSection is the one section of conch.conf (D9).
const configSection = "etcd"

// scanIni maps each key of the [etcd] section (and of the lines before any
// section, which go-flags reads as [etcd]'s too) to the line that sets it.
// It reads lines as go-flags' INI parser does (trimmed; '#' and ';' start a
// comment). Errors, with FILE:LINE, never echo a value: a section other
// than [etcd] (go-flags would say "could not find option group" without a
// line), and a key set twice: refused, not the last one taken in silence,
// because two endpoints lines are two clusters and conch cannot know which
// one the operator meant (README "Configuration").
func scanIni(path string, b []byte) (map[string]int, error) {
	lines := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxConfigFile+1)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[':
			if name := strings.TrimSpace(strings.TrimSuffix(l[1:], "]")); !strings.HasSuffix(l, "]") || !strings.EqualFold(name, configSection) {
				return nil, fmt.Errorf("config file %s:%d: unknown section%s: conch.conf has one section, [%s]", path, n, shortName(name), configSection)
			}
		default:
			k, _, _ := strings.Cut(l, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if trailingComment(l) {
				return nil, commentError(path, n, k)
			}
			if first := lines[k]; first > 0 {
				return nil, fmt.Errorf("config file %s:%d: %s is set again (first at line %d): set each setting once", path, n, k, first)
			}
			lines[k] = n
		}
	}
	return lines, nil
}

// printable cuts s to 40 bytes and replaces control characters, for a
// name from a file quoted in a message.
func printable(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// shortName is " [name]" for a section name short enough to be a typo of [etcd] (a config
// error never echoes a whole line, which may hold a secret), else "".
func shortName(name string) string {
	if len(name) > 9 {
		return ""
	}
	return " [" + printable(name) + "]"
}

// resolveConn reads the config file at configPath (readConfig: explicit means the operator
// named it, so a missing file is an error) and hands its values, the flags (with CONCH_*,
// merged by go-flags' env tags) and getenv to etcdconn.Resolve, which applies D9's precedence
// (D9b). The config file's warnings come first. Errors name the setting's source; all are
// usage errors (64), configAccessError's line (an *exitError) among them.
func resolveConn(flagged connOptions, getenv func(string) string, configPath string, explicit bool) (etcdconn.Settings, error) {
	cfg, err := readConfig(configPath, explicit)
	if err != nil {
		return etcdconn.Settings{}, err
	}
	s, err := etcdconn.Resolve(etcdconn.Sources{
		Flagged: etcdconn.Flagged{Endpoints: string(flagged.Endpoints), CACert: flagged.CACert, Cert: flagged.Cert,
			Key: flagged.Key, User: flagged.User, PasswordFile: flagged.PasswordFile, DialTimeout: flagged.DialTimeout},
		Getenv:        getenv,
		File:          cfg.fileValues(),
		ParseDuration: parseDuration,
		DefaultHint:   defaultEndpointsHint,
	})
	s.Warnings = slices.Concat(cfg.warnings, s.Warnings)
	return s, err
}

// fileValues are the file's settings with the FILE:LINE each was set at, for etcdconn.Resolve.
func (c configFile) fileValues() map[string]etcdconn.FileValue {
	m := make(map[string]etcdconn.FileValue, len(c.values))
	for k, v := range c.values {
		m[k] = etcdconn.FileValue{Value: v, From: c.source(k)}
	}
	return m
}
