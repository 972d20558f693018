package main

import (
	"fmt"
	"strconv"
	"strings"
)

// decimal is a flag's plain decimal integer, as flock(1) reads -E: digits only, leading zeros
// allowed and meaning nothing ("070" is 70). Go's base prefixes (0x10, 0o17, 0b11, 1_0), which
// go-flags' int would accept and read in another base, are refused: -E 070 beside
// SuccessExitStatus=70 must mean 70.
type decimal int

// UnmarshalFlag parses s (go-flags' flags.Unmarshaler).
func (d *decimal) UnmarshalFlag(s string) error {
	if s == "" || strings.Trim(s, "0123456789") != "" || len(s) > 9 {
		return fmt.Errorf("%q is not a decimal number (digits only)", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not a decimal number (digits only)", s)
	}
	*d = decimal(n)
	return nil
}
