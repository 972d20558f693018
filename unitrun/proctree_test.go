package unitrun

import (
	"os"
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
