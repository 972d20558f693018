package unitrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// floorGuardian is the least a Go guardian can be: the Go runtime, one hello on the status
// pipe, then a wait for the control pipe's EOF. BenchmarkGuardianStart builds it as the floor.
const floorGuardian = `package main

import "os"

func main() {
	os.NewFile(4, "status").Write([]byte("{\"event\":\"hello\"}\n"))
	_, _ = os.NewFile(3, "control").Read(make([]byte, 1))
}
`

// BenchmarkGuardianStart measures a guardian's start (D7a): from Run's fork to the guardian's
// first word on the status pipe (evHello, sent at the top of GuardianMain), for conch
// re-executed as its own guardian (the Go runtime and every package init of conch, etcd and
// gRPC included), for the small guardian program, and for the floor (floorGuardian). Each op also kills and reaps the unused
// guardian, the same for both. Run with -benchtime=200x and compare the two ns/op.
func BenchmarkGuardianStart(b *testing.B) {
	dir := b.TempDir()
	conch := filepath.Join(dir, "conch")
	build := exec.Command("go", "build", "-o", conch, "./cmd/conch")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/conch: %v\n%s", err, out)
	}
	program := buildGuardianProgram(b, testProgramID)
	floor := filepath.Join(dir, "floor")
	if err := os.WriteFile(floor+".go", []byte(floorGuardian), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", floor, floor+".go").CombinedOutput(); err != nil {
		b.Fatalf("go build floor.go: %v\n%s", err, out)
	}
	for _, bc := range []struct {
		name     string
		guardian []string
	}{
		{"conch-reexec", []string{conch, GuardianArg}},
		{"guardian-program", []string{program}},
		{"go-floor", []string{floor}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			spec := Spec{Guardian: bc.guardian}
			for b.Loop() {
				g, err := startGuardian(spec)
				if err != nil {
					b.Fatal(err)
				}
				if ev, ok := <-g.events; !ok || ev.Event != evHello {
					b.Fatalf("first event %+v (open %v), want %s", ev, ok, evHello)
				}
				b.StopTimer()
				_ = g.close()
				b.StartTimer()
			}
		})
	}
}
