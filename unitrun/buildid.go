package unitrun

import "runtime/debug"

// This file is used by both processes: the build identity that the caller and a guardian
// program compare before the guardian is trusted (D7a).

// buildID identifies the source a binary was built from. `make build` and
// scripts/package.sh set it for conch and conch-guardian alike, with
// -ldflags "-X github.com/conch-project/conch/unitrun.buildID=...", from a hash of the
// source tree. Empty: see thisBuild.
var buildID string

// thisBuild returns the identity of the source this binary was built from: buildID when the
// build set it, else the VCS revision Go stamped into the binary when the tree was clean
// (with the Go version: two compilers are two builds), else "" (unknown: a plain `go build`
// of a modified tree, or a test binary). Two binaries with the same non-empty build ID speak
// the same guardian protocol; Run trusts a separate guardian program only then (D7a).
func thisBuild() string {
	if buildID != "" {
		return buildID
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" || modified != "false" {
		return ""
	}
	return "vcs:" + rev + "+" + info.GoVersion
}
