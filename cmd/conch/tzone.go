package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// deadlineZone is the location in which --deadline HH:MM[:SS] is read: what TZ (tz, as the
// environment gives it) names. Go reads TZ only as a zone name (Europe/Berlin, :Europe/Berlin)
// and silently uses UTC for anything else, so a POSIX TZ string such as "UTC-3" or
// "<+0530>-5:30" would end a window hours off. deadlineZone returns time.Local when tz is
// empty or a zone Go loads; a fixed zone for a POSIX string without daylight-saving rules
// (its offset read POSIX's way: "UTC-3" is 3 hours east of UTC); else an error saying what
// to do instead (a zone name, or RFC 3339 with its offset).
func deadlineZone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.Local, nil
	}
	if _, err := time.LoadLocation(strings.TrimPrefix(tz, ":")); err == nil {
		return time.Local, nil // Go's own reading of TZ, as time.Local
	}
	name, rest, ok := posixZoneName(tz)
	if !ok {
		return nil, fmt.Errorf("TZ=%q is neither a time zone this system knows nor a POSIX TZ string: HH:MM cannot be read in it; set TZ to a zone name (Europe/Berlin), or give --deadline in RFC 3339 with its offset (2026-12-24T06:00:00+03:00)", tz)
	}
	off, rest, ok := posixOffset(rest)
	switch {
	case !ok:
		return nil, fmt.Errorf("TZ=%q: no valid UTC offset after %q; set TZ to a zone name, or give --deadline in RFC 3339 with its offset", tz, name)
	case rest != "":
		return nil, fmt.Errorf("TZ=%q has daylight-saving rules, which conch does not read: set TZ to a zone name (Europe/Berlin), or give --deadline in RFC 3339 with its offset", tz)
	}
	return time.FixedZone(name, -off), nil
}

// posixZoneName splits the zone name off a POSIX TZ string: "<...>" or three or more
// letters. ok is false when there is none.
func posixZoneName(s string) (name, rest string, ok bool) {
	if strings.HasPrefix(s, "<") {
		i := strings.IndexByte(s, '>')
		if i < 2 {
			return "", s, false
		}
		return s[1:i], s[i+1:], true
	}
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	return s[:i], s[i:], i >= 3
}

// posixOffset reads a POSIX TZ offset, [+-]hh[:mm[:ss]] with hh 0..24, in seconds as POSIX
// counts it (west of UTC positive), and what follows it.
func posixOffset(s string) (secs int, rest string, ok bool) {
	sign := 1
	if s != "" && (s[0] == '+' || s[0] == '-') {
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
	}
	limits := []int{24, 59, 59}
	for i := range limits {
		j := 0
		for j < len(s) && j < 2 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 {
			return 0, s, false
		}
		n, _ := strconv.Atoi(s[:j])
		if n > limits[i] {
			return 0, s, false
		}
		secs = secs*60 + n
		s = s[j:]
		if i == len(limits)-1 || !strings.HasPrefix(s, ":") {
			for range len(limits) - 1 - i {
				secs *= 60
			}
			break
		}
		s = s[1:]
	}
	return sign * secs, s, true
}
