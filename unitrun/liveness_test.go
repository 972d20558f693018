package unitrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// deafGuardianArg makes the test binary play, the first time for a given marker file, a
// guardian that says ready and then never acts on go (hung), or with the argument "mute" never
// even says ready, until conch closes its pipe; once the marker exists it is the real guardian.
const deafGuardianArg = "__conch-deaf-guardian"

func deafGuardianMain(marker string, mute bool) int {
	if _, err := os.Stat(marker); err == nil {
		return GuardianMain()
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return 1
	}
	ctl := os.NewFile(ctlFD, "conch-control")
	out := eventWriter{enc: json.NewEncoder(os.NewFile(statusFD, "conch-status"))}
	out.send(guardianEvent{Event: evHello, Build: thisBuild()})
	if !mute {
		out.send(guardianEvent{Event: evReady})
	}
	buf := make([]byte, 512)
	for { // deaf to every word, go included, until EOF
		if _, err := ctl.Read(buf); err != nil {
			return 0
		}
	}
}

// D7b (4): a guardian that does not answer go within goTimeout, or is not ready within
// readyTimeout (hung), is killed and the command is started by a fresh guardian, so the
// caller's slot is not held with nothing running.
func TestGuardianDeafToGoIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (chaos or long timers): not in the -short tier")
	}
	for _, mode := range []string{"deaf", "mute"} {
		t.Run(mode, func(t *testing.T) { guardianReplaced(t, mode) })
	}
}

func guardianReplaced(t *testing.T, mode string) {
	dir := t.TempDir()
	var warned []string
	began := time.Now()
	ch := startRunSh(t.Context(), t, `echo ran > "$DIR/ran"`, func(s *Spec) {
		s.Env = append(s.Env, "DIR="+dir)
		s.Guardian = []string{"/proc/self/exe", deafGuardianArg, filepath.Join(dir, "marker"), mode}
		s.Warn = func(msg string) { warned = append(warned, msg) }
	})
	o := awaitRun(t, ch, readyTimeout+generousTimeout)
	t.Logf("%s guardian: Run returned %v after its start; warnings %q", mode, o.at.Sub(began).Round(time.Millisecond), warned)
	if o.err != nil || !o.res.Started || o.res.ExitStatus != 0 {
		t.Fatalf("Run = %+v, %v; want the command run by a fresh guardian", o.res, o.err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil || len(warned) != 1 {
		t.Fatalf("the command did not run (%v), or warnings %q", err, warned)
	}
}
