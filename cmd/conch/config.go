package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jessevdk/go-flags"
)

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
// blocking (readBounded). A missing file is no error unless explicit (the
// operator named it). Parse errors give FILE:LINE and what is wrong, never
// the line itself (it may hold a secret). A file others can write is
// read, with a warning: anyone could redirect the endpoints and receive the
// password. Errors are usage errors (64).
func readConfig(path string, explicit bool) (configFile, error) {
	cfg := configFile{path: path, values: map[string]string{}, lines: map[string]int{}}
	if path == "" {
		return cfg, nil
	}
	b, perm, err := readBounded(path, "config file", maxConfigFile)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	if perm&0o002 != 0 {
		cfg.warnings = append(cfg.warnings, fmt.Sprintf("config file %s is writable by others (mode %04o): anyone could redirect conch to their own etcd and receive its password; chmod o-w it", path, perm))
	}
	var sec iniEtcd
	p := flags.NewNamedParser("conch.conf", flags.None)
	if _, err := p.AddGroup("etcd", "", &sec); err != nil {
		return cfg, err
	}
	if err := flags.NewIniParser(p).Parse(bytes.NewReader(b)); err != nil {
		return cfg, configError(path, err)
	}
	for k, v := range map[string]string{"endpoints": sec.Endpoints, "cacert": sec.CACert, "cert": sec.Cert, "key": sec.Key,
		"user": sec.User, "password-file": sec.PasswordFile, "dial-timeout": sec.DialTimeout} {
		cfg.values[k] = v
	}
	cfg.lines = iniLines(b)
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

// iniLines maps each key of the [etcd] section to the line that set it last
// (go-flags keeps the last value of a repeated key).
func iniLines(b []byte) map[string]int {
	lines := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxConfigFile+1)
	inEtcd := false
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "["):
			inEtcd = strings.EqualFold(strings.TrimSpace(strings.Trim(l, "[]")), "etcd")
		case inEtcd:
			if k, _, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, ";") {
				lines[strings.ToLower(strings.TrimSpace(k))] = n
			}
		}
	}
	return lines
}
