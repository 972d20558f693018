package main

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/conch-project/conch/internal/etcdconn"
)

// defaultConfigPath is the config file read when --config and CONCH_CONFIG are unset.
const defaultConfigPath = "/etc/conch/conch.conf"

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

// defaultEndpointsHint is said after the default endpoint's source in every message that
// names the endpoints (etcdconn.Settings.Where): an operator whose conch talks to
// 127.0.0.1:2379 has most likely not set `endpoints =` in conch.conf yet.
const defaultEndpointsHint = "set `endpoints =` in " + defaultConfigPath + ", or --endpoints or CONCH_ENDPOINTS"

// resolveConn reads the config file at configPath (etcdconn.ReadConfig: explicit means the
// operator named it, so a missing file is an error) and hands its values, the flags (with
// CONCH_*, merged by go-flags' env tags) and getenv to etcdconn.Resolve, which applies D9's
// precedence (D9b). The config file's warnings come first. Errors name the setting's source;
// all are usage errors (64), configAccessError's line (an *exitError) among them.
func resolveConn(flagged connOptions, getenv func(string) string, configPath string, explicit bool) (etcdconn.Settings, error) {
	file, warnings, err := etcdconn.ReadConfig(configPath, explicit)
	if errors.Is(err, fs.ErrPermission) {
		return etcdconn.Settings{}, configAccessError(configPath, explicit, err)
	}
	if err != nil {
		return etcdconn.Settings{}, err
	}
	s, err := etcdconn.Resolve(etcdconn.Sources{
		Flagged: etcdconn.Flagged{Endpoints: string(flagged.Endpoints), CACert: flagged.CACert, Cert: flagged.Cert,
			Key: flagged.Key, User: flagged.User, PasswordFile: flagged.PasswordFile, DialTimeout: string(flagged.DialTimeout)},
		Getenv:        getenv,
		File:          file,
		ParseDuration: parseDuration,
		DefaultHint:   defaultEndpointsHint,
	})
	s.Warnings = slices.Concat(warnings, s.Warnings)
	return s, err
}
