package fleet

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDeadline reads s (surrounding blanks ignored) as an absolute end to a wait, for
// RunRules.Deadline: RFC 3339 with a zone, as given; or HH:MM or HH:MM:SS, the next such
// wall-clock time in now's location after now (today if still ahead, else tomorrow; across a
// daylight-saving change the time is normalised as time.Date does). A time already passed is
// not an error (DeadlinePassed decides); one before 1970 is returned as 1970-01-01T00:00:00Z,
// so that no written time reads as RunRules' zero "none". Errors say what is accepted, with s
// quoted.
func ParseDeadline(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if epoch := time.Unix(0, 0).UTC(); t.Before(epoch) {
			return epoch, nil
		}
		return t, nil
	}
	shown := strconv.QuoteToASCII(s)
	if len(shown) > 64 { // a message, not a dump of what was given
		shown = shown[:60] + `..."`
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return time.Time{}, fmt.Errorf("invalid time %s: use RFC 3339 (2026-12-24T06:00:00Z) or HH:MM[:SS]", shown)
	}
	var hms [3]int
	limits := [3]int{23, 59, 59}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || len(p) != 2 || n < 0 || n > limits[i] {
			return time.Time{}, fmt.Errorf("invalid time %s: HH:MM[:SS] takes two digits each, 00-23:00-59:00-59", shown)
		}
		hms[i] = n
	}
	y, m, d := now.Date()
	t := time.Date(y, m, d, hms[0], hms[1], hms[2], 0, now.Location())
	if !t.After(now) {
		t = time.Date(y, m, d+1, hms[0], hms[1], hms[2], 0, now.Location())
	}
	return t, nil
}
