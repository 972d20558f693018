package etcdconn

import (
	"errors"
	"time"
)

// ErrSettings: a setting cannot be used as given (an endpoint list that does not parse, a dial
// timeout that is not a duration over 0, a certificate without its key, TLS files with a
// plaintext endpoint, a user name with a control character, a user without a password or the
// reverse, a password file that cannot be read). The message names the setting's source;
// only the operator can fix it.
var ErrSettings = errors.New("unusable connection settings")

// Flagged are the settings the caller's flags hold, each the flag's value or, when the flag
// is not given, its CONCH_* variable's (the caller's flag parser merges the two; Resolve tells
// them apart by reading CONCH_x back through Sources.Getenv). "" or blank is unset.
type Flagged struct {
	Endpoints, CACert, Cert, Key, User, PasswordFile, DialTimeout string
}

// FileValue is one setting of the config file: its text and where it was set ("FILE:LINE").
type FileValue struct{ Value, From string }

// Sources are where Resolve takes each setting from (D9).
type Sources struct {
	// Flagged are the flags and CONCH_* variables: the first source.
	Flagged Flagged
	// Getenv reads CONCH_* (to name a flagged value's source) and ETCDCTL_*; nil reads none.
	Getenv func(string) string
	// File are the config file's settings by their INI names (endpoints, cacert, cert, key,
	// user, password-file, dial-timeout); a missing or blank one is unset. nil: no file.
	File map[string]FileValue
	// ParseDuration parses a dial timeout's text (the caller's duration syntax); nil:
	// time.ParseDuration.
	ParseDuration func(string) (time.Duration, error)
	// DefaultHint becomes Settings.EndpointsHint when the endpoints are the default: where
	// to set others.
	DefaultHint string
}

// Resolve applies D9's precedence to each setting: flags > CONCH_* environment (both in
// src.Flagged) > ETCDCTL_* environment > the config file (src.File) > the default, and reads
// the password file it resolves (ReadPassword). The config file's endpoints and dial timeout
// are checked even where a higher source overrides them (D9b). Settings.Warnings holds, in
// this order, the override of other endpoints by the winning source and a password file
// others can read. Every error is of class ErrSettings (errors.Is), and says which setting
// and which source; an unreadable password file's error is also of ReadBounded's class.
func Resolve(src Sources) (Settings, error) {
	if src.Getenv == nil {
		src.Getenv = func(string) string { return "" }
	}
	if src.ParseDuration == nil {
		src.ParseDuration = time.ParseDuration
	}
	s, err := resolve(src)
	if err != nil {
		return s, classed{ErrSettings, err}
	}
	return s, nil
}
