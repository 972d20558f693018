package etcdconn

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
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

// configAliases are the other names a setting was read under when go-flags' INI parser read
// the file (the struct fields' names, exact case, and an empty name for the first field);
// ReadConfig keeps taking them (D9c).
var configAliases = map[string]string{"": "endpoints", "PasswordFile": "password-file", "DialTimeout": "dial-timeout"}

// iniLine is one `key = value` line: the section it is in, its key and (unquoted) value.
type iniLine struct {
	section, key, value string
	n                   int
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

// parseConfig reads the file's text b: the lines in order (readIni), the settings' names
// (known), then the sections, comments and repeats (scanIni), the first error found by each
// step in turn, as go-flags' INI parser and conch's own scan did before (D9c).
func parseConfig(path string, b []byte) (map[string]FileValue, error) {
	kv, err := readIni(path, b)
	if err != nil {
		return nil, err
	}
	for _, l := range kv {
		if _, ok := settingOf(l); !ok && (l.section == "" || strings.EqualFold(l.section, configSection)) {
			return nil, fmt.Errorf("config file %s:%d: unknown setting %q (known in [etcd]: %s)", path, l.n, cutName(l.key), strings.Join(configKeys, ", "))
		}
	}
	lines, err := scanIni(path, b)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	for _, l := range kv {
		if k, ok := settingOf(l); ok {
			vals[k] = l.value
		}
	}
	m := make(map[string]FileValue, len(configKeys))
	for _, k := range configKeys {
		m[k] = FileValue{Value: vals[k], From: path}
		if n := lines[k]; n > 0 {
			m[k] = FileValue{Value: vals[k], From: path + ":" + strconv.Itoa(n)}
		}
	}
	if n := lines["endpoints"]; n > 0 && strings.TrimSpace(vals["endpoints"]) == "" { // as --endpoints "" is: an empty list is a mistake, not the default
		return nil, fmt.Errorf("config file %s:%d: endpoints is empty: name at least one endpoint (host:port or URL), or remove the line for the default %s", path, n, DefaultEndpoint)
	}
	return m, nil
}

// settingOf names the setting a line sets: its key in any case, or an alias.
func settingOf(l iniLine) (string, bool) {
	for _, k := range configKeys {
		if strings.EqualFold(l.key, k) {
			return k, true
		}
	}
	k, ok := configAliases[l.key]
	return k, ok
}

// readIni reads b's lines as an INI file: trimmed; blank lines and those starting with '#'
// or ';' skipped; a [section] header; else `key = value`, the value trimmed and, when it
// starts with '"', unquoted as a Go string. Errors, at the first line that is none of these:
// a malformed header (no closing ']', or an empty name), a line without '=', a badly quoted
// value.
func readIni(path string, b []byte) ([]iniLine, error) {
	var kv []iniLine
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, MaxConfigFile+1)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[':
			if l[len(l)-1] != ']' || strings.TrimSpace(l[1:len(l)-1]) == "" {
				return nil, fmt.Errorf("config file %s:%d: malformed [section] header", path, n)
			}
			section = strings.TrimSpace(l[1 : len(l)-1])
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return nil, fmt.Errorf("config file %s:%d: not a `key = value` line", path, n)
			}
			v = strings.TrimSpace(v)
			if v != "" && v[0] == '"' {
				var err error
				if v, err = strconv.Unquote(v); err != nil {
					return nil, fmt.Errorf("config file %s:%d: badly quoted value", path, n)
				}
			}
			kv = append(kv, iniLine{section: section, key: strings.TrimSpace(k), value: v, n: n})
		}
	}
	return kv, nil
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
// are read as [etcd]'s too) to the line that sets it. It reads lines as readIni does.
// Errors, with FILE:LINE, never echo a value: a section other than [etcd], a value with a
// comment after it (trailingComment), and a key set twice: refused, not the last one taken
// in silence, because two endpoints lines are two clusters and conch cannot know which one
// the operator meant (README "Configuration").
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
// has a comment after it: a ';' or '#' after a blank. A comment starts only at the start of
// a line, so the comment would become part of the value (endpoints "127.0.0.1:2379 ; old
// cluster"); such a line is refused rather than guessed at (D9a).
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
