package main

import "fmt"

// onceText is a flag's string value that may be given once: --max (the capacity is part of
// the semaphore's identity, D6), --node (the name of this node's key, D11) and --deadline
// (the end of the window: `--deadline 06:00 --deadline 07:00` has no one meaning). A second
// occurrence is refused (64) rather than the last one taken in silence, as conch.conf refuses
// a setting given twice: `--max 1 --max 3` may be a script that appends flags, and conch
// cannot know which capacity was meant (D4a).
type onceText string

// UnmarshalFlag implements flags.Unmarshaler. go-flags calls it for each occurrence on the
// command line, and for an environment default (CONCH_NODE) only when the flag is absent.
func (o *onceText) UnmarshalFlag(s string) error {
	if *o != "" {
		return givenTwice(string(*o), s)
	}
	if s == "" { // the second occurrence must still be noticed
		s = "\x00"
	}
	*o = onceText(s)
	return nil
}

// String is the value given ("" when none).
func (o onceText) String() string {
	if o == "\x00" {
		return ""
	}
	return string(o)
}

// givenTwice is the error for a flag given a second time, with both values.
func givenTwice(first, second string) error {
	if first == "\x00" {
		first = ""
	}
	return fmt.Errorf("given more than once (%s, then %s): give it once", quoteShort(first), quoteShort(second))
}
