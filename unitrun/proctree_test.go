package unitrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 987654 0 0\n"
	tests := []struct {
		name, line string
		want       procEntry
		wantErr    bool
	}{
		{"plain", "42 (sleep) S 7 42 42" + tail, procEntry{pid: 42, ppid: 7, state: 'S', start: 987654}, false},
		{"spaces and parens in comm", "43 (a) b (c) Z 1 43 43" + tail, procEntry{pid: 43, ppid: 1, state: 'Z', start: 987654}, false},
		{"short", "44 (x) S 1 2 3\n", procEntry{}, true},
		{"no parens", "45 x S 1" + tail, procEntry{}, true},
		{"bad ppid", "46 (x) S y 2 3" + tail, procEntry{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tt.line))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseProcStat = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDescendantsOf(t *testing.T) {
	procs := []procEntry{{pid: 1}, {pid: 10, ppid: 1}, {pid: 11, ppid: 10}, {pid: 12, ppid: 11},
		{pid: 13, ppid: 10}, {pid: 20, ppid: 1}, {pid: 21, ppid: 20}}
	got := descendantsOf(10, procs)
	want := map[int]bool{11: true, 12: true, 13: true}
	if len(got) != len(want) {
		t.Fatalf("descendantsOf(10) = %v, want pids %v", got, want)
	}
	for _, p := range got {
		if !want[p.pid] {
			t.Fatalf("descendantsOf(10) = %v, want pids %v", got, want)
		}
	}
}

func TestReadProcStatSelf(t *testing.T) {
	p, err := readProcStat(os.Getpid())
	if err != nil || p.pid != os.Getpid() || p.ppid != os.Getppid() || p.start == 0 {
		t.Fatalf("readProcStat(self) = %+v, %v", p, err)
	}
}

// descendants follows the kernel's children lists: it finds a child, a background grandchild
// and a setsid great-grandchild, parents first, and agrees with the full /proc walk.
func TestDescendants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `sleep 1000 & echo $! > "$1/bg"
sh -c 'setsid sleep 1000 & echo $! > "$1/ss.tmp"; mv "$1/ss.tmp" "$1/ss"; wait' sh "$1" &
wait`, "sh", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = signalDescendantsOf(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	bg, ss := waitPIDFile(t, filepath.Join(dir, "bg")), waitPIDFile(t, filepath.Join(dir, "ss"))
	got, err := descendants()
	if err != nil {
		t.Fatal(err)
	}
	pos := map[int]int{}
	for i, p := range got {
		pos[p.pid] = i
	}
	for _, pid := range []int{cmd.Process.Pid, bg, ss} {
		if _, ok := pos[pid]; !ok {
			t.Fatalf("descendants() = %+v: pid %d missing", got, pid)
		}
	}
	if pos[cmd.Process.Pid] > pos[bg] || pos[cmd.Process.Pid] > pos[ss] {
		t.Fatalf("descendants() = %+v: a parent after its descendant", got)
	}
	procs, err := listProcs()
	if err != nil {
		t.Fatal(err)
	}
	full := map[int]bool{}
	for _, p := range descendantsOf(os.Getpid(), procs) {
		full[p.pid] = true
	}
	for _, pid := range []int{cmd.Process.Pid, bg, ss} {
		if !full[pid] {
			t.Fatalf("the /proc walk misses pid %d", pid)
		}
	}
}

// signalDescendantsOf SIGKILLs every descendant of root (test clean-up).
func signalDescendantsOf(root int) error {
	procs, err := listProcs()
	if err != nil {
		return err
	}
	for _, p := range descendantsOf(root, procs) {
		_ = signalProc(p, syscall.SIGKILL)
	}
	return nil
}
