package main

import "runtime/debug"

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = ""

// versionString is version, or the VCS revision the binary was built from.
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "0.0.0-dev+" + s.Value[:12]
			}
		}
	}
	return "0.0.0-dev"
}
