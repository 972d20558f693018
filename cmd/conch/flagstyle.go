package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jessevdk/go-flags"
)

// valueFlags are conch's flags that take a number or a duration as their value: the ones a
// negative value may follow.
var valueFlags = map[string]string{
	"--max": "--max", "--ttl": "--ttl", "--wait": "--wait", "--kill-after": "--kill-after",
	"--runtime-max": "--runtime-max", "--dial-timeout": "--dial-timeout",
	"-E": "--conflict-exit-code", "--conflict-exit-code": "--conflict-exit-code",
}

// negativeNumber is an argument that reads as a negative number or duration ("-1", "-1.5",
// "-5s"), not as an option.
var negativeNumber = regexp.MustCompile(`^-[0-9.]`)

// joinNegativeValues rewrites `--wait -1` as `--wait=-1` (before "--" only): go-flags takes
// "-1" for an option and says "expected argument for flag `--wait', but got option `-1'",
// where `--wait=-1` gets conch's own "must not be negative". So a negative value gets one
// message however it is written.
func joinNegativeValues(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if long, ok := valueFlags[args[i]]; ok && i+1 < len(args) && negativeNumber.MatchString(args[i+1]) {
			out = append(out, long+"="+args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// choiceError rewrites go-flags' "Invalid value `maybe' for option `--scope'. Allowed values
// are: auto, always or never" in conch's words: "invalid value for `--scope': "maybe": use
// auto, always or never". ok is false for any other error.
func choiceError(err error) (error, bool) {
	var ferr *flags.Error
	if !errors.As(err, &ferr) || ferr.Type != flags.ErrInvalidChoice {
		return err, false
	}
	m := choiceMessage.FindStringSubmatch(ferr.Message)
	if m == nil {
		return errors.New(strings.ToLower(ferr.Message[:1]) + ferr.Message[1:]), true
	}
	return fmt.Errorf("invalid value for `%s': %s: use %s", m[2], quoteShort(m[1]), m[3]), true
}

var choiceMessage = regexp.MustCompile("(?s)^Invalid value `(.*)' for option `([^']*)'. Allowed values are: (.*)$")
