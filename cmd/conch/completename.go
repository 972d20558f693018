package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/etcdconn"
	"github.com/conch-project/conch/internal/who"
	"github.com/jessevdk/go-flags"
)

// completionTimeout bounds the completion of a semaphore name: connect and list, as the shell
// waits for it. An etcd that does not answer within it completes nothing.
const completionTimeout = time.Second

// namePosition reports whether the last of words (the arguments before "--", as the shell
// passes them to complete the last) is the <name> of `conch sema`: after the sema command,
// not an option, not an option's value, and no name given before it. Options of p before it
// are set as they were typed (Option.Set), so that the connection options they name are
// known; go-flags does not parse while it completes.
func namePosition(p *flags.Parser, words []string) bool {
	if len(words) == 0 {
		return false
	}
	last := words[len(words)-1]
	if strings.HasPrefix(last, "-") {
		return false
	}
	sema := p.Find("sema")
	inSema, named := false, false
	for i := 0; i < len(words)-1; i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			switch {
			case !inSema && w == "sema":
				inSema = true
			case !inSema: // another command (fleetlock) or a word go-flags refuses
				return false
			default:
				named = true
			}
			continue
		}
		cmd := p.Command
		if inSema {
			cmd = sema
		}
		took, ok := setTyped(cmd, p, w, words[i+1:len(words)-1])
		if !ok { // the option's value is the word being completed
			return false
		}
		i += took
	}
	return inSema && !named
}

// setTyped sets the option(s) of the word w as typed (--long, --long=value, -s, -svalue, -abc),
// taking its value from rest when it has none in w. It returns how many words of rest it
// took, and false when it needs a value and rest has none (the value is being completed).
// Unknown options and values that do not parse are left alone.
func setTyped(cmd *flags.Command, p *flags.Parser, w string, rest []string) (int, bool) {
	find := func(long string, short rune) *flags.Option {
		if long != "" {
			return cmp.Or(cmd.FindOptionByLongName(long), p.FindOptionByLongName(long))
		}
		return cmp.Or(cmd.FindOptionByShortName(short), p.FindOptionByShortName(short))
	}
	takes := func(o *flags.Option) bool { return o != nil && o.Field().Type.Kind() != reflect.Bool }
	if long, ok := strings.CutPrefix(w, "--"); ok {
		name, value, hasValue := strings.Cut(long, "=")
		o := find(name, 0)
		switch {
		case !takes(o):
			return 0, true
		case hasValue:
			_ = o.Set(&value)
			return 0, true
		case len(rest) == 0:
			return 0, false
		}
		_ = o.Set(&rest[0])
		return 1, true
	}
	shorts := w[1:]
	for i, r := range shorts {
		o := find("", r)
		if !takes(o) {
			continue
		}
		if value := shorts[i+1:]; value != "" {
			_ = o.Set(&value)
			return 0, true
		}
		if len(rest) == 0 {
			return 0, false
		}
		_ = o.Set(&rest[0])
		return 1, true
	}
	return 0, true
}

// completeNames writes the live semaphore names (who.LiveNames) that start with prefix, one
// a line, to w: the connection as the options set on s, the environment (CONCH_*, ETCDCTL_*)
// and the config file say (resolveConn), bounded by completionTimeout. Nothing is written
// when etcd cannot be reached in time or the settings are wrong: never files, never an error.
func (s *semaCmd) completeNames(w io.Writer, prefix string) {
	conn := s.Conn
	for _, f := range []struct {
		v   *string
		env string
	}{{&conn.CACert, "CONCH_CACERT"}, {&conn.Cert, "CONCH_CERT"}, {&conn.Key, "CONCH_KEY"},
		{&conn.User, "CONCH_USER"}, {&conn.PasswordFile, "CONCH_PASSWORD_FILE"}} {
		*f.v = cmp.Or(*f.v, s.getenv(f.env))
	}
	conn.Endpoints = cmp.Or(conn.Endpoints, endpointsValue(s.getenv("CONCH_ENDPOINTS")))
	conn.DialTimeout = cmp.Or(conn.DialTimeout, dialTimeout(s.getenv("CONCH_DIAL_TIMEOUT")))
	config := cmp.Or(string(s.Config), s.getenv("CONCH_CONFIG"))
	settings, err := resolveConn(conn, s.getenv, cmp.Or(config, defaultConfigPath), config != "")
	if err != nil {
		return
	}
	settings.DialTimeout = min(settings.DialTimeout, completionTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	cl, err := etcdconn.New(ctx, settings)
	if err != nil {
		return
	}
	defer cl.Close()
	names, err := who.LiveNames(ctx, cl)
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			fmt.Fprintln(w, n)
		}
	}
}
