// Command scopehelper drives unitrun's scope primitives inside a test node
// (unitrun/scope_integration_test.go), where systemd is PID 1 and the PIDs are the node's own.
// It prints one JSON object per event on stdout and exits 0 unless something went wrong.
//
//	scopehelper hold                      ignore SIGTERM and SIGINT, sleep until killed
//	scopehelper available                 print Available()'s answer
//	scopehelper prime                     call systemd.PrimeMove and print its answer and
//	                                      this helper's cgroup before and after it
//	scopehelper scope -name N [-kill-after D] [-bind] [-twice] [-p NAME=VALUE]...
//	    start "scopehelper hold" as a child, put it into scope N (bound to this helper's
//	    service with -bind, D8), report {"scope","child"}, then wait for the child to end and
//	    report {"child_exit"}. With -twice, also try a second scope of the same name.
//	scopehelper run -name N [-kill-after D] [-runtime-max D] [-p NAME=VALUE]... -- ARGV...
//	    run ARGV with a unitrun.Plan of ScopeAlways (SIGTERM to the helper cancels its context)
//	    and report {"result", "run_error", "scope_failed"}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/conch-project/conch/internal/systemd"
	"github.com/conch-project/conch/unitrun"
)

type event struct {
	Scope       string `json:"scope,omitempty"`
	Child       int    `json:"child,omitempty"`
	Service     string `json:"service,omitempty"`
	Slice       string `json:"slice,omitempty"`
	StartMillis int64  `json:"start_ms,omitempty"`
	ChildExit   string `json:"child_exit,omitempty"`
	Available   string `json:"available,omitempty"`
	Twice       string `json:"twice,omitempty"`
	TwiceExists bool   `json:"twice_exists,omitempty"`
	Error       string `json:"error,omitempty"`
	Prime       string `json:"prime,omitempty"`
	CgroupFrom  string `json:"cgroup_from,omitempty"`
	CgroupTo    string `json:"cgroup_to,omitempty"`

	Result      *unitrun.Result `json:"result,omitempty"`
	RunError    string          `json:"run_error,omitempty"`
	ScopeFailed bool            `json:"scope_failed,omitempty"`
}

func emit(ev event) { _ = json.NewEncoder(os.Stdout).Encode(ev) }

type props []string

func (p *props) String() string     { return fmt.Sprint(*p) }
func (p *props) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	if len(os.Args) > 1 && os.Args[1] == unitrun.GuardianArg {
		os.Exit(unitrun.GuardianMain()) // Run re-executes this program as its guardian (D7)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scopehelper hold|available|scope ...")
		os.Exit(64)
	}
	switch os.Args[1] {
	case "hold":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		for {
			time.Sleep(time.Hour)
		}
	case "available":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev := event{Available: "yes"}
		if err := systemd.Available(ctx); err != nil {
			ev.Available = err.Error()
		}
		emit(ev)
	case "prime":
		emit(prime())
	case "run":
		if err := run(os.Args[2:]); err != nil {
			emit(event{Error: err.Error()})
			os.Exit(1)
		}
	case "scope":
		if err := scope(os.Args[2:]); err != nil {
			emit(event{Error: err.Error()})
			os.Exit(1)
		}
	default:
		os.Exit(64)
	}
}

func scope(args []string) error {
	fs := flag.NewFlagSet("scope", flag.ContinueOnError)
	name := fs.String("name", "", "scope unit name")
	killAfter := fs.Duration("kill-after", time.Second, "TimeoutStopSec")
	bind := fs.Bool("bind", false, "bind the scope to this helper's service and inherit its limits")
	twice := fs.Bool("twice", false, "try a second scope of the same name")
	var ps props
	fs.Var(&ps, "p", "NAME=VALUE scope property (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	userProps, err := systemd.ParseProperties(ps)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := systemd.Connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

	child, err := startHold()
	if err != nil {
		return err
	}
	req := systemd.ScopeRequest{
		Name:        *name,
		Description: "conch scope test " + *name,
		PIDs:        []int{child.Process.Pid},
		KillAfter:   *killAfter,
		Properties:  userProps,
	}
	if *bind {
		svc, err := systemd.FindCallerService(ctx, conn)
		if err != nil {
			return err
		}
		if svc.Unit == "" {
			return errors.New("-bind: not running in a service")
		}
		req.Slice, req.BindTo = svc.Slice, svc.Unit
		req.Properties = append(svc.Inherited, userProps...)
	}
	began := time.Now()
	if err := systemd.StartScope(ctx, conn, req); err != nil {
		_ = child.Process.Kill()
		return err
	}
	emit(event{Scope: req.Name, Child: child.Process.Pid, Service: req.BindTo, Slice: req.Slice,
		StartMillis: time.Since(began).Milliseconds()})

	if *twice {
		other, err := startHold()
		if err != nil {
			return err
		}
		req.PIDs = []int{other.Process.Pid}
		err = systemd.StartScope(ctx, conn, req)
		_ = other.Process.Kill()
		_ = other.Wait()
		ev := event{Twice: fmt.Sprint(err), TwiceExists: errors.Is(err, systemd.ErrUnitExists)}
		emit(ev)
	}

	werr := child.Wait()
	emit(event{ChildExit: fmt.Sprint(werr)})
	return nil
}

// startHold starts this program as a child that ignores SIGTERM and SIGINT.
func startHold() (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "hold")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// run is Plan.Run in scope mode: the command after "--" in scope -name.
func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	name := fs.String("name", "", "scope unit name")
	killAfter := fs.Duration("kill-after", time.Second, "grace period")
	runtimeMax := fs.Duration("runtime-max", 0, "runtime limit")
	var ps props
	fs.Var(&ps, "p", "NAME=VALUE scope property (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return errors.New("no command")
	}
	userProps, err := systemd.ParseProperties(ps)
	if err != nil {
		return err
	}
	path, err := unitrun.Resolve(argv[0])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	plan := unitrun.StartPlan(ctx, unitrun.Options{Mode: unitrun.ScopeAlways, Properties: userProps,
		KillAfter: *killAfter, RuntimeMax: *runtimeMax})
	defer plan.Close()
	if _, err := plan.Wait(); err != nil {
		return err
	}
	res, err := plan.Run(ctx, unitrun.Spec{Path: path, Args: argv, Stdout: os.Stdout, Stderr: os.Stderr},
		unitrun.ScopeUnit{Name: *name, Description: "scopehelper run"}, nil)
	ev := event{Result: &res, ScopeFailed: errors.Is(err, unitrun.ErrScopeFailed)}
	if err != nil {
		ev.RunError = err.Error()
	}
	emit(ev)
	return nil
}

// prime is PrimeMove with the helper's cgroup read before and after it.
func prime() event {
	before, _ := os.ReadFile("/proc/self/cgroup")
	ev := event{Prime: "ok", CgroupFrom: string(before)}
	if err := systemd.PrimeMove(); err != nil {
		ev.Prime = err.Error()
	}
	after, _ := os.ReadFile("/proc/self/cgroup")
	ev.CgroupTo = string(after)
	return ev
}
