package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// confPath is --config (and CONCH_CONFIG): a file named empty is refused, not taken
// for "no file" (which would silently skip /etc/conch/conch.conf and talk to the default
// endpoint); --config /dev/null says "no file" explicitly.
type confPath string

// UnmarshalFlag implements flags.Unmarshaler: an empty or blank name is an error.
func (c *confPath) UnmarshalFlag(s string) error {
	if strings.TrimSpace(s) == "" {
		if v, ok := os.LookupEnv("CONCH_CONFIG"); ok && strings.TrimSpace(v) == "" {
			return errors.New("CONCH_CONFIG is set but empty: name a config file, --config /dev/null for none, or unset it for " + defaultConfigPath)
		}
		return errors.New("empty: name a config file, or --config /dev/null for none")
	}
	*c = confPath(s)
	return nil
}

// configAccessError is the line for a config file conch may not read (open's EACCES or
// EPERM): the packaged /etc/conch/conch.conf is mode 0640, root's, because it may hold
// credentials, so a user who runs conch is told the ways to a working setup rather than shown
// a usage hint (exit 64, before any etcd call). explicit: the file was named by --config or
// CONCH_CONFIG (D9a).
func configAccessError(path string, explicit bool, err error) error {
	from := "the default config file"
	if explicit {
		from = "config file"
	}
	return endf(errUsage, "", "cannot read %s %s: permission denied (it may hold etcd credentials, so it is often readable by root only): "+
		"run conch as root, have the file's owner let a group of yours read it (chgrp GROUP %s; chmod 0640 %s), "+
		"name a file you may read with --config FILE, or give the endpoints with --endpoints or CONCH_ENDPOINTS together with --config /dev/null",
		from, path, path, path)
}

// isPermission reports whether err is a refused open (EACCES, EPERM).
func isPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }

// utf8BOM is the byte order mark some editors put at the start of a UTF-8 file.
var utf8BOM = []byte("\xef\xbb\xbf")

// stripBOM returns b without a leading UTF-8 byte order mark: conch.conf saved by such an
// editor reads as the same file.
func stripBOM(b []byte) []byte { return bytes.TrimPrefix(b, utf8BOM) }

// trailingComment reports whether the value of a `key = value` line (as scanIni reads it)
// has a comment after it: a ';' or '#' after a blank. go-flags' INI parser starts a comment
// only at the start of a line, so the comment would become part of the value (endpoints
// "127.0.0.1:2379 ; old cluster"); conch refuses such a line rather than guess.
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

// defaultEndpointsHint is said after the default endpoint's source in every message that
// names the endpoints (etcdconn.Settings.Where): an operator whose conch talks to
// 127.0.0.1:2379 has most likely not set `endpoints =` in conch.conf yet.
const defaultEndpointsHint = "set `endpoints =` in " + defaultConfigPath + ", or --endpoints or CONCH_ENDPOINTS"
