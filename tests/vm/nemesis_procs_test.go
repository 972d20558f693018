package vm

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/conch-project/conch/internal/systemdtest"
	"github.com/conch-project/conch/unitrun"
)

// The nemesis's process faults aim at conch's own processes in a node, found from the host's
// /proc: a conch (its main process, the service's) and its guardian (conch re-executed with
// unitrun.GuardianArg, the child's parent).

// conchProc is one conch of a node as the host sees it.
type conchProc struct {
	pid      int    // host PID of conch
	guardian int    // host PID of its guardian, 0 if none
	holding  bool   // its guardian has a child: the command runs
	unit     string // the transient service conch runs in (the job's unit)
}

var serviceUnit = regexp.MustCompile(`conch-run-[0-9]+-[0-9a-f]+\.service`)

// conchProcs lists the conchs running in node n, by host PID; none when it is powered off.
func conchProcs(n *systemdtest.Node) []conchProc {
	ns, err := n.PIDNamespace()
	if err != nil {
		return nil
	}
	type proc struct {
		ppid int
		argv []string
	}
	procs := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || l != ns {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := strings.LastIndexByte(string(stat), ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:])) // f[0] state, f[1] ppid
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		procs[pid] = proc{ppid: ppid, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")}
	}
	isGuardian := func(p proc) bool { return len(p.argv) > 1 && p.argv[1] == unitrun.GuardianArg }
	var out []conchProc
	for pid, p := range procs {
		if len(p.argv) < 2 || p.argv[0] != conch || p.argv[1] != "sema" {
			continue
		}
		c := conchProc{pid: pid}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		c.unit = serviceUnit.FindString(string(cg))
		for gpid, g := range procs {
			if g.ppid == pid && isGuardian(g) {
				c.guardian = gpid
				for _, q := range procs {
					if q.ppid == gpid {
						c.holding = true
					}
				}
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b conchProc) int { return a.pid - b.pid })
	return out
}
