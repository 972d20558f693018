package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"
)

// proc is one process the harness started. start is taken just before
// fork/exec, end just after wait4 returned; rusage is wait4's (ru_maxrss of
// the process tree's largest member, since wait4 reports RUSAGE_BOTH).
type proc struct {
	name   string
	cmd    *exec.Cmd
	start  int64
	end    int64
	status int // exit status, 128+n for signal n, -1 unknown
	rusage syscall.Rusage
	done   chan struct{}

	lines benchkit.Lines // kept only with spawnOpts.capture
	onLn  func(*proc, string)
}

// spawnOpts tune one process.
type spawnOpts struct {
	env     []string
	onLine  func(*proc, string) // called from the stderr reader for each line
	capture bool                // keep stderr lines with their read times
}

// procs is the registry of live processes, killed by PID on abort.
type procs struct {
	mu   sync.Mutex
	live map[int]*proc
}

func newProcs() *procs { return &procs{live: map[int]*proc{}} }

// spawn starts argv with stdin and stdout on /dev/null and stderr on a pipe
// the harness reads (lines kept only if capture). It returns at once; done
// closes after wait4.
func (ps *procs) spawn(argv []string, o spawnOpts) (*proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = o.env
	cmd.Stderr = w
	p := &proc{name: strings.Join(argv, " "), cmd: cmd, done: make(chan struct{}), status: -1, onLn: o.onLine}
	p.start = benchkit.Mono()
	if err := cmd.Start(); err != nil {
		_, _ = r.Close(), w.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	_ = w.Close()
	ps.mu.Lock()
	ps.live[cmd.Process.Pid] = p
	ps.mu.Unlock()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			t := benchkit.Mono()
			txt := sc.Text()
			if o.capture {
				p.lines.Add(t, txt)
			}
			if p.onLn != nil {
				p.onLn(p, txt)
			}
		}
	}()
	go func() {
		_ = cmd.Wait() // the status comes from ProcessState below
		p.end = benchkit.Mono()
		if st := cmd.ProcessState; st != nil {
			if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
				p.rusage = *ru
			}
			if ws, ok := st.Sys().(syscall.WaitStatus); ok {
				switch {
				case ws.Exited():
					p.status = ws.ExitStatus()
				case ws.Signaled():
					p.status = 128 + int(ws.Signal())
				}
			}
		}
		ps.mu.Lock()
		delete(ps.live, cmd.Process.Pid)
		ps.mu.Unlock()
		<-readerDone // the child and guardian may hold stderr a moment longer
		close(p.done)
	}()
	return p, nil
}

// pid of the process.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// wall is the process's wall time.
func (p *proc) wall() time.Duration { return time.Duration(p.end - p.start) }

// maxRSS is wait4's ru_maxrss in bytes.
func (p *proc) maxRSS() int64 { return p.rusage.Maxrss * 1024 }

// cpu is user + system time of the process and its waited-for children.
func (p *proc) cpu() time.Duration {
	return time.Duration(p.rusage.Utime.Nano() + p.rusage.Stime.Nano())
}

// lineTime returns the read time of the first stderr line containing s.
func (p *proc) lineTime(s string) (int64, bool) { return p.lines.First(s) }

// stderrText returns the captured stderr.
func (p *proc) stderrText() string { return p.lines.Text() }

// waitAll waits for every process, up to timeout. It returns an error naming
// the processes still running or that exited with a status other than want
// (want < 0: any status).
func waitAll(list []*proc, timeout time.Duration, want int) error {
	deadline := time.After(timeout)
	for _, p := range list {
		select {
		case <-p.done:
		case <-deadline:
			return fmt.Errorf("timed out after %v waiting for %s (pid %d)", timeout, p.name, p.pid())
		}
	}
	if want < 0 {
		return nil
	}
	bad := 0
	var first *proc
	for _, p := range list {
		if p.status != want {
			if first == nil {
				first = p
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d process(es) exited with a status other than %d, e.g. %s: %d: %s", bad, want, first.name, first.status, strings.TrimSpace(first.stderrText()))
	}
	return nil
}

// killAll SIGKILLs every live process the harness started, by PID.
func (ps *procs) killAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for pid := range ps.live {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procStatusKB reads a "VmHWM:"-style field of /proc/PID/status in KiB.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// procUssKB is the unique set size of pid (smaps_rollup Private_Clean +
// Private_Dirty): the memory only this process holds, i.e. what one more
// waiter costs. Pages of the conch binary, which conch and its guardian (and
// every other conch) map, are shared and not counted.
func procUssKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	var total int64
	found := 0
	for _, l := range strings.Split(string(b), "\n") {
		for _, f := range []string{"Private_Clean:", "Private_Dirty:"} {
			if rest, ok := strings.CutPrefix(l, f); ok {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
					return 0, err
				}
				total += kb
				found++
			}
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("/proc/%d/smaps_rollup: no Private_Clean/Private_Dirty", pid)
	}
	return total, nil
}

// childrenOf lists the PIDs of pid's children (all threads).
func childrenOf(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var c int
			if _, err := fmt.Sscan(f, &c); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// clkTck is USER_HZ, the unit of the times in /proc/PID/stat and /proc/stat.
const clkTck = 100

// procCPU is utime+stime of pid (its own, not its children's) from
// /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut) // field 14
	fmt.Sscan(f[12], &st) // field 15
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// cpuTimes is the machine's busy and total CPU time from /proc/stat.
func cpuTimes() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	l, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(l)
	var sum, idle int64
	for i, x := range f[1:] {
		var v int64
		fmt.Sscan(x, &v)
		sum += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return time.Duration(sum-idle) * time.Second / clkTck, time.Duration(sum) * time.Second / clkTck
}

// badExits counts the processes of list whose status is not want and
// describes the first (its last stderr line).
func badExits(list []*proc, want int) (int, string) {
	n, first := 0, ""
	for _, p := range list {
		if p.status == want {
			continue
		}
		n++
		if first == "" {
			txt := strings.TrimSpace(p.stderrText())
			if i := strings.LastIndexByte(txt, '\n'); i >= 0 {
				txt = txt[i+1:]
			}
			first = fmt.Sprintf("exit %d: %s", p.status, txt)
		}
	}
	return n, first
}
