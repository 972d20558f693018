package unitrun

// This file runs in the guardian process (D7): its main, from its start to the command's.

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// GuardianArg is the hidden argv[1] with which Run re-executes the program as the guardian
// (D7). cmd/conch must check for it before parsing flags and then call GuardianMain.
const GuardianArg = "__conch-guardian"

// GuardianMain is the entry point of the guardian process (D7); cmd/conch calls it when
// os.Args[1] == GuardianArg, cmd/conch-guardian (D7a) always, and both exit with the value it
// returns. It is a process's main, not a library function: it owns the process's signals and
// file descriptors 3 and 4, and must not be called in any other situation.
//
// It first says hello with its build ID on the status pipe (conch trusts a guardian program
// only when that is its own, D7a), makes itself a child subreaper and waits for the spec on the control pipe (prepare may
// start the guardian long before Run sends it; EOF or SIGTERM meanwhile make it exit at
// once), then reports ready and waits for "go" (so that scope mode can move it into its scope
// and Spec.BeforeStart can run first). It then starts the command in a
// process group of its own, in the terminal's foreground if asked (D5), and supervises it:
// on SIGTERM (also its parent-death signal), "stop" or EOF of the control pipe (conch died) it
// sends the stop signal, then SIGCONT, to the command's process group and to every descendant
// (reparented ones included), waits up to the kill-after grace, then SIGKILLs every descendant
// left, walking /proc again until none is.
// When the command exits on its own, whatever it left running is stopped the same way (D7:
// nothing runs on without a slot). In scope mode it reports the command's status as soon as
// it is reaped; in both modes it reports it once every descendant is gone and reaped, then
// returns 0. SIGINT and SIGHUP are
// caught and dropped: the terminal's Ctrl-C is for the command's group, and conch decides about
// the rest (D3, D7).
//
// In scope mode (D8) it also catches the scope's stop signal: systemd stopping the scope
// signals every process in it, the guardian included, which then reports the stop, stops the
// tree as above and outlives the command to report its status (unless systemd's SIGKILL at the
// end of TimeoutStopSec ends it too). When conch dies it asks systemd to stop its own scope
// over D-Bus (D7), besides stopping the tree itself.
//
// It returns 0 after a normal run, an abort or an exec failure (all reported on the status
// pipe), 1 when it cannot work or the spec comes from another build (reported as an error
// event: Run returns ErrGuardian) and 2
// when it was not started by Run (no control pipe).
func GuardianMain() int {
	sigs := make(chan os.Signal, 8)
	// Caught, not ignored: an ignored disposition would be inherited by the command.
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	parent := os.Getppid()
	ctl, status, ok := guardianPipes()
	if !ok {
		return 2
	}
	out := eventWriter{enc: json.NewEncoder(status)}
	out.send(guardianEvent{Event: evHello, Build: thisBuild()}) // first: conch checks it (D7a)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		out.send(guardianEvent{Event: evError, Msg: "cannot become a child subreaper: " + err.Error()})
		return 1
	}
	return guard(sigs, readControl(bufio.NewReader(ctl), ctlFD), out, parent)
}

// guard is GuardianMain once the pipes are open and the guardian is a subreaper: it waits for
// the spec and for ctlGo, starts the command and keeps its tree until it is gone, reporting on
// out. parent is conch's PID. It returns GuardianMain's exit status.
func guard(sigs chan os.Signal, control <-chan string, out eventWriter, parent int) int {
	spec, ok, err := awaitSpec(sigs, control)
	if err != nil {
		out.send(guardianEvent{Event: evError, Msg: err.Error()})
		return 1
	}
	if !ok {
		return 0 // closed before Run, or conch died: nothing was started
	}
	if spec.Build != thisBuild() { // D7a: a caller of another build may speak another protocol
		out.send(guardianEvent{Event: evError, Msg: "guardian of build " + strconv.Quote(thisBuild()) + " refuses a caller of build " + strconv.Quote(spec.Build)})
		return 1
	}
	if spec.Scope != nil {
		// systemd stops the scope with its KillSignal, which reaches the guardian too: catch
		// it, so that the guardian outlives the command and reports its status (D8).
		if sig := syscall.Signal(spec.StopSignal); catchable(sig) {
			signal.Notify(sigs, sig)
		}
	}
	out.send(guardianEvent{Event: evReady})

	var clock leaseClock
	if !awaitGo(sigs, control, &clock) || os.Getppid() != parent { // conch died since: start nothing (D7)
		return 0
	}
	if clock.set() && !time.Now().Before(clock.stopAt) { // D7b: the slot may be gone already
		out.send(guardianEvent{Event: evError, Msg: "the lease's deadline had passed when the go came: not started"})
		return 1
	}
	pid, err := startCommand(spec)
	if err != nil {
		out.send(guardianEvent{
			Event: evExecError,
			Kind:  startFailureKind(spec.Path, spec.Dir, err),
			Msg:   err.Error(),
		})
		return 0
	}
	out.send(guardianEvent{Event: evStarted, PID: pid})

	sup := &treeKeeper{
		cmdPID:    pid,
		stopSig:   syscall.Signal(spec.StopSignal),
		killAfter: spec.KillAfter,
		out:       out,
		mode:      newGuardianMode(spec.Scope, parent),
		clock:     clock,
	}
	ws, stopped := sup.run(sigs, control)
	code, sig := shellStatus(ws)
	out.send(guardianEvent{Event: evExited, Status: code, Signal: int(sig), Stopped: stopped, Fenced: sup.fenced})
	return 0
}

// catchable reports whether the guardian may install a handler for sig.
func catchable(sig syscall.Signal) bool {
	return sig > 0 && sig != syscall.SIGKILL && sig != syscall.SIGSTOP
}

// guardianPipes opens the control and status pipes inherited from Run. It marks every
// descriptor above stderr close-on-exec, the pipes included: the command gets stdin, stdout and
// stderr only (D5), the status pipe's EOF must mean "the guardian exited", and the command must
// not be able to talk to conch.
func guardianPipes() (ctl, status *os.File, ok bool) {
	for _, fd := range []int{ctlFD, statusFD} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, nil, false
		}
	}
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		cloexecFromProc() // Linux < 5.11
	}
	return os.NewFile(ctlFD, "conch-control"), os.NewFile(statusFD, "conch-status"), true
}

// cloexecFromProc marks every open descriptor above stderr close-on-exec, one by one.
func cloexecFromProc() {
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		syscall.CloseOnExec(ctlFD)
		syscall.CloseOnExec(statusFD)
		return
	}
	for _, e := range names {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// awaitSpec waits for the spec, the first line of the control pipe, which Run sends when it
// is called, possibly long after prepare started the guardian. ok is false, meaning exit
// without starting anything, on EOF of the control pipe (prepared.close, or conch died) or
// SIGTERM (the parent-death signal); err is set for a line that is no valid spec.
func awaitSpec(sigs <-chan os.Signal, control <-chan string) (spec wireSpec, ok bool, err error) {
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGTERM {
				return spec, false, nil
			}
		case line, open := <-control:
			if !open {
				return spec, false, nil
			}
			spec, err = parseSpec([]byte(line))
			return spec, err == nil, err
		}
	}
}

// awaitGo waits for ctlGo, keeping the last ctlDeadline in clock. It returns false, meaning
// exit without starting anything, on ctlAbort, ctlStop, ctlKill, EOF of the control pipe or
// SIGTERM.
func awaitGo(sigs <-chan os.Signal, control <-chan string, clock *leaseClock) bool {
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGTERM {
				return false
			}
		case word, ok := <-control:
			switch {
			case !ok:
				return false
			case word == ctlGo:
				return true
			case word == ctlAbort || word == ctlStop || word == ctlKill:
				return false
			default:
				clock.parse(word)
			}
		}
	}
}

// startCommand starts the command in a new process group with the guardian's stdin, stdout
// and stderr, in the terminal's foreground when spec.Foreground is set (D5). The kernel sets
// the foreground group in the child before exec, with signals still blocked, so the command
// can read the terminal from its first instruction. It returns the PID, which is also the
// process group ID. The process is reaped by the treeKeeper's wait4(-1). It calls
// syscall.ForkExec, not os.StartProcess, whose first call in a process probes pidfd support
// with a throw-away child: one fork and wait more before each command (~0.2 ms).
func startCommand(spec wireSpec) (int, error) {
	env := spec.Env
	if env == nil {
		env = []string{} // never the guardian's own environment
	}
	if spec.Dir != "" { // ForkExec reports a failed chdir as the exec's error; os.StartProcess does this check too
		var st syscall.Stat_t
		err := syscall.Stat(spec.Dir, &st)
		if err == nil && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			err = syscall.ENOTDIR
		}
		if err != nil {
			return 0, &os.PathError{Op: "chdir", Path: spec.Dir, Err: err}
		}
	}
	pid, err := syscall.ForkExec(spec.Path, spec.Args, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Foreground: spec.Foreground,
			Ctty:       0, // the guardian's stdin, the terminal checked by Run
		},
	})
	if err != nil {
		return 0, &os.PathError{Op: "fork/exec", Path: spec.Path, Err: err}
	}
	return pid, nil
}
