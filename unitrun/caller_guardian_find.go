package unitrun

import (
	"os"
	"path/filepath"
	"sync"
)

// This file runs in the caller's process (conch): which guardian Run starts (D7, D7a).

// guardianProgramName is the file name of the small guardian program (cmd/conch-guardian, D7a):
// GuardianMain and nothing else, no etcd or gRPC code, so that it starts in about a
// millisecond where re-executing conch costs its whole initialisation.
const guardianProgramName = "conch-guardian"

// guardianDirs are where Run looks for guardianProgramName, relative to the directory of the
// running executable: beside it (bin/ of `make build`), then ../libexec/conch/ (the
// packages: /usr/bin/conch and /usr/libexec/conch/conch-guardian).
var guardianDirs = []string{".", filepath.Join("..", "libexec", "conch")}

// reexecGuardian is the guardian as this very program re-executed: the binary image that is
// running, even if a package upgrade replaced the file meanwhile, so both ends always speak
// the same protocol. It is the fallback whenever the guardian program is missing, cannot be
// started or is not from the same build (D7a).
var reexecGuardian = []string{"/proc/self/exe", GuardianArg}

// findguardianProgramName returns the path of an executable GuardianProgram in one of
// guardianDirs relative to exe's directory, or "" when there is none.
func findGuardianProgram(exe string) string {
	dir := filepath.Dir(exe)
	for _, d := range guardianDirs {
		p := filepath.Join(dir, d, guardianProgramName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// guardianProgram is the guardian program found beside this executable, looked for once per
// process; "" when there is none, or when this build has no build ID to check it against.
var guardianProgram = sync.OnceValue(func() string {
	if thisBuild() == "" {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return findGuardianProgram(exe)
})

// defaultGuardian is Spec.Guardian when the caller leaves it empty: the guardian program when
// one is found (Run then checks its build before trusting it), else reexecGuardian.
func defaultGuardian() []string {
	if p := guardianProgram(); p != "" {
		return []string{p}
	}
	return reexecGuardian
}

// needsBuildCheck reports whether a guardian started as argv is the guardian program, which
// Run trusts only once it has shown this build's build ID (prepared.trust, D7a).
func needsBuildCheck(argv []string) bool {
	p := guardianProgram()
	return p != "" && len(argv) == 1 && argv[0] == p
}
