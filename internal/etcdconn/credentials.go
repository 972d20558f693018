package etcdconn

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
)

// credentials resolves the user and the password (D9). etcdctl's
// NAME:PASSWORD is accepted wherever a user is given. The password ranks like
// the user: at each level (flags and CONCH_*, then ETCDCTL_*, then the config
// file) a password file or ETCDCTL_PASSWORD first, then that level's
// NAME:PASSWORD. A user without a password is refused: etcd would answer
// "user name is empty", and authentication would silently be off.
func (r resolver) credentials(s *Settings) error {
	user, userFrom := r.pick(r.flagged.User, "user")
	s.User, _, _ = strings.Cut(user, ":")
	if strings.ContainsFunc(s.User, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("user from %s has a control character in it", userFrom)
	}
	for _, lv := range []struct{ passwordFile, password, user string }{
		{r.flagged.PasswordFile, "", r.flagged.User},
		{"", r.getenv("ETCDCTL_PASSWORD"), r.getenv("ETCDCTL_USER")},
		{r.file["password-file"].Value, "", r.file["user"].Value},
	} {
		_, userPass, _ := strings.Cut(lv.user, ":")
		if path := strings.TrimSpace(lv.passwordFile); path != "" {
			p, warn, err := ReadPassword(path)
			if err != nil {
				return err
			}
			if warn != "" {
				s.Warnings = append(s.Warnings, warn)
			}
			s.Password, s.PasswordFile = p, path
		} else if s.Password = cmp.Or(lv.password, userPass); s.Password == "" {
			continue
		}
		break
	}
	switch {
	case s.Password != "" && s.User == "":
		return errors.New("a password was given without a user: set --user, CONCH_USER, ETCDCTL_USER or user in conch.conf")
	case s.User != "" && s.Password == "":
		return fmt.Errorf("user %q (from %s) has no password: give --password-file FILE (or CONCH_PASSWORD_FILE, ETCDCTL_PASSWORD, password-file in conch.conf); for certificate-based login (the client certificate's CN), leave the user unset", s.User, userFrom)
	}
	return nil
}
