// Command rpmfix makes the cpio member names of .rpm files relative, in place, after nfpm
// (scripts/package.sh runs it): see package rpmpayload.
//
//	go run ./packaging/rpmfix FILE.rpm...
package main

import (
	"fmt"
	"os"

	"github.com/conch-project/conch/internal/rpmpayload"
)

func main() {
	status := 0
	for _, path := range os.Args[1:] {
		if err := fix(path); err != nil {
			fmt.Fprintf(os.Stderr, "rpmfix: %s: %v\n", path, err)
			status = 1
		}
	}
	os.Exit(status)
}

// fix rewrites the .rpm at path, through a temporary file renamed over it.
func fix(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := rpmpayload.Relative(b)
	if err != nil || !changed {
		return err
	}
	tmp := path + ".rpmfix"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
