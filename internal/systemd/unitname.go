package systemd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// unitNameMax is systemd's limit on the length of a unit name (UNIT_NAME_MAX - 1).
const unitNameMax = 255

// scopeNameHashLen is how many hexadecimal digits of SHA-256 a truncated scope name carries.
const scopeNameHashLen = 12

// ScopeName returns the name of the transient scope for holder rev of semaphore sema (D8):
// "conch-sema-<sema>-<rev>.scope", with sema escaped as systemd-escape does (go-systemd's
// unit.UnitNameEscape: "video-encode" becomes `video\x2dencode`, so the name splits back
// unambiguously at its dashes). When the result would pass systemd's 255-character limit, the
// escaped name is cut (never inside an \xNN escape) and "-<12 hex digits of SHA-256 of
// sema>" is added, so distinct semaphores keep distinct names. The result is always a valid
// unit name, for any sema (D4 names need at most 512 escaped characters).
func ScopeName(sema string, rev int64) string {
	esc := unit.UnitNameEscape(sema)
	tail := "-" + strconv.FormatInt(rev, 10) + ".scope"
	const head = "conch-sema-"
	if len(head)+len(esc)+len(tail) <= unitNameMax {
		return head + esc + tail
	}
	sum := sha256.Sum256([]byte(sema))
	tail = "-" + hex.EncodeToString(sum[:])[:scopeNameHashLen] + tail
	return head + cutEscaped(esc, unitNameMax-len(head)-len(tail)) + tail
}

// cutEscaped returns at most max bytes of the escaped string esc without splitting an \xNN
// escape sequence.
func cutEscaped(esc string, max int) string {
	if len(esc) <= max {
		return esc
	}
	cut := max
	// An escape is 4 bytes starting with a backslash; a backslash never appears otherwise.
	if i := strings.LastIndexByte(esc[:cut], '\\'); i >= 0 && i+4 > cut {
		cut = i
	}
	return esc[:cut]
}

// validUnitName reports whether name is a valid systemd unit name: at most 255 characters
// from [A-Za-z0-9:_.\-], a non-empty prefix, a known suffix, and at most one "@" (an
// instance, as in getty@tty1.service) that does not start the name.
func validUnitName(name string) bool {
	if len(name) == 0 || len(name) > unitNameMax || strings.Count(name, "@") > 1 || name[0] == '@' {
		return false
	}
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || !knownUnitSuffix(name[dot:]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == ':' || c == '_' || c == '.' || c == '\\' || c == '-' || c == '@':
		default:
			return false
		}
	}
	return true
}

// knownUnitSuffix reports whether suffix (with its dot) is a systemd unit type.
func knownUnitSuffix(suffix string) bool {
	switch suffix {
	case ".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target",
		".path", ".timer", ".slice", ".scope":
		return true
	}
	return false
}

// SliceName returns the slice unit s names (D8), completed as systemd-run --slice does:
// "batch" becomes "batch.slice", "batch.slice" stays. It returns an error wrapping
// ErrBadProperty when the result is not a valid slice name (characters outside
// [A-Za-z0-9:_.\-], too long, or an "@" template).
func SliceName(s string) (string, error) {
	name := s
	if !strings.HasSuffix(name, ".slice") {
		name += ".slice"
	}
	if name == ".slice" || strings.Contains(name, "@") || !validUnitName(name) {
		return "", fmt.Errorf("%w: %q is not a valid slice name", ErrBadProperty, s)
	}
	return name, nil
}
