package etcdconn

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

// MaxConfigFile bounds the config file: a handful of settings.
const MaxConfigFile = 64 << 10 // 64 KiB

// ErrConfig: the config file cannot be used: it cannot be read (the error is then also
// ReadBounded's, so errors.Is finds fs.ErrPermission, fs.ErrNotExist or ErrNotRegular), a
// line is not `key = value` or a [section] header, a value is badly quoted, a setting or
// section is unknown, a setting is set twice or has a comment after its value, or
// `endpoints =` is empty. The message names the file and the line ("FILE:LINE: what") and
// never echoes a line, which may hold a secret; only the operator can fix it.
var ErrConfig = errors.New("unusable config file")

// configSection is the one section of conch.conf (D9).
const configSection = "etcd"

// configKeys are the settings of the [etcd] section, by their INI names.
var configKeys = []string{"endpoints", "cacert", "cert", "key", "user", "password-file", "dial-timeout"}

// iniEtcd is the [etcd] section of conch.conf (D9), the schema go-flags' INI parser reads
// (D9c). Values stay strings: Resolve checks them where it checks the flags', with the file
// and line as their source.
type iniEtcd struct {
	Endpoints    string `ini-name:"endpoints"`
	CACert       string `ini-name:"cacert"`
	Cert         string `ini-name:"cert"`
	Key          string `ini-name:"key"`
	User         string `ini-name:"user"`
	PasswordFile string `ini-name:"password-file"`
	DialTimeout  string `ini-name:"dial-timeout"`
}

// ReadConfig reads the INI config file at path (D9, D9a, D9c): its one section, [etcd], and
// the lines before any section, set the settings named in configKeys. It reads the file
// bounded and without blocking (ReadBounded); "" reads nothing. A missing file is no error
// unless required (the operator named it). It returns every setting of configKeys with its
// value ("" when unset) and where it was set ("FILE:LINE", or FILE for an unset one), ready
// for Sources.File, and the warnings to show (a file others can write: anyone could
// redirect the endpoints and receive the password). Errors are of class ErrConfig.
func ReadConfig(path string, required bool) (map[string]FileValue, []string, error) {
	if path == "" {
		return map[string]FileValue{}, nil, nil
	}
	b, perm, err := ReadBounded(path, "config file", MaxConfigFile)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return map[string]FileValue{}, nil, nil
	}
	if err != nil {
		return nil, nil, classed{ErrConfig, err}
	}
	vals, err := parseConfig(path, stripBOM(b))
	if err != nil {
		return nil, nil, classed{ErrConfig, err}
	}
	var warnings []string
	if perm&0o002 != 0 {
		warnings = append(warnings, fmt.Sprintf("config file %s is writable by others (mode %04o): anyone could redirect conch to their own etcd and receive its password; chmod o-w it", path, perm))
	}
	return vals, warnings, nil
}

// parseConfig reads the file's text b with go-flags' INI parser into iniEtcd (the lines'
// form, quoting and the settings' names are its checks), then scanIni's (sections, comments
// after a value, repeats, and each setting's line), then refuses an empty `endpoints =`.
func parseConfig(path string, b []byte) (map[string]FileValue, error) {
	var sec iniEtcd
	p := flags.NewNamedParser("conch.conf", flags.None)
	if _, err := p.AddGroup(configSection, "", &sec); err != nil {
		return nil, err
	}
	perr := flags.NewIniParser(p).Parse(bytes.NewReader(b))
	var ie *flags.IniError
	if errors.As(perr, &ie) { // a line go-flags could not take: it knows which
		return nil, iniError(path, ie)
	}
	// go-flags names an unknown section without its line, and keeps the last of a repeated
	// key in silence: scanIni tells both with FILE:LINE
	lines, err := scanIni(path, b)
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, fmt.Errorf("cannot read config file %s: %w", path, perr)
	}
	vals := []string{sec.Endpoints, sec.CACert, sec.Cert, sec.Key, sec.User, sec.PasswordFile, sec.DialTimeout}
	m := make(map[string]FileValue, len(configKeys))
	for i, k := range configKeys {
		m[k] = FileValue{Value: vals[i], From: path}
		if n := lines[k]; n > 0 {
			m[k] = FileValue{Value: vals[i], From: path + ":" + strconv.Itoa(n)}
		}
	}
	if n := lines["endpoints"]; n > 0 && strings.TrimSpace(sec.Endpoints) == "" { // as --endpoints "" is: an empty list is a mistake, not the default
		return nil, fmt.Errorf("config file %s:%d: endpoints is empty: name at least one endpoint (host:port or URL), or remove the line for the default %s", path, n, DefaultEndpoint)
	}
	return m, nil
}

// iniError turns go-flags' INI error into "FILE:LINE: what", without the line's text.
func iniError(path string, ie *flags.IniError) error {
	what := "cannot be parsed"
	switch m := ie.Message; {
	case strings.HasPrefix(m, "malformed key=value"):
		what = "not a `key = value` line"
	case strings.HasPrefix(m, "malformed section"), strings.HasPrefix(m, "empty section"):
		what = "malformed [section] header"
	case strings.HasPrefix(m, "unknown option: "):
		what = fmt.Sprintf("unknown setting %q (known in [etcd]: %s)", cutName(strings.TrimPrefix(m, "unknown option: ")), strings.Join(configKeys, ", "))
	case strings.Contains(m, "invalid syntax"):
		what = "badly quoted value"
	}
	return fmt.Errorf("config file %s:%d: %s", path, ie.LineNumber, what)
}

// cutName cuts an unknown setting's name to 40 bytes when it is longer or holds a control
// character, for a message that quotes it.
func cutName(name string) string {
	if len(name) > 40 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return name[:min(len(name), 40)] + "..."
	}
	return name
}

// scanIni maps each key of the [etcd] section (and of the lines before any section, which
// are read as [etcd]'s too) to the line that sets it. It reads lines as go-flags' INI parser
// does (trimmed; '#' and ';' start a comment only at a line's start).
// Errors, with FILE:LINE, never echo a value: a section other than [etcd], a value with a
// comment after it (trailingComment), and a key set twice: refused, not the last one taken
// in silence, because two endpoints lines are two clusters and conch cannot know which one
// the operator meant (docs/configuration.md).
func scanIni(path string, b []byte) (map[string]int, error) {
	lines := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, MaxConfigFile+1)
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

// utf8BOM is the byte order mark some editors put at the start of a UTF-8 file.
var utf8BOM = []byte("\xef\xbb\xbf")

// stripBOM returns b without a leading UTF-8 byte order mark: conch.conf saved by such an
// editor reads as the same file (D9a).
func stripBOM(b []byte) []byte { return bytes.TrimPrefix(b, utf8BOM) }

// trailingComment reports whether the value of a `key = value` line (as scanIni reads it)
// has a comment after it: a ';' or '#' after a blank. go-flags' INI parser starts a comment
// only at the start of a line, so the comment would become part of the value (endpoints
// "127.0.0.1:2379 ; old cluster"); such a line is refused rather than guessed at (D9a).
func trailingComment(line string) bool {
	_, v, ok := strings.Cut(line, "=")
	if !ok {
		return false
	}
	for _, mark := range []string{" ;", "\t;", " #", "\t#"} {
		if strings.Contains(v, mark) {
			return true
		}
	}
	return false
}

// commentError is the FILE:LINE error for a value with a comment after it (trailingComment).
func commentError(path string, n int, key string) error {
	return fmt.Errorf("config file %s:%d: %s has a comment after its value (a ';' or '#' after a blank): put comments on lines of their own", path, n, key)
}
