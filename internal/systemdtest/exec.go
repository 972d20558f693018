package systemdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/conch-project/conch/internal/syncbuf"
)

// waitDelay bounds how long a finished nsenter may keep its output pipes open through a
// grandchild (nsenter forks to enter the PID namespace) before Wait gives up on them.
const waitDelay = 2 * time.Second

// Result is what a command run in a node left behind.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int // exit status; through systemd-run, a death by signal reads as systemd-run reports it
}

// ExitError is returned, together with the Result, when a command ran but exited non-zero.
type ExitError struct {
	Node   string
	Argv   []string
	Result *Result
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%q in node %s: exit status %d: %s", e.Argv, e.Node, e.Result.ExitCode,
		strings.TrimSpace(string(tail(e.Result.Stderr, 1024))))
}

// RunOptions tune the transient service Node.RunWith and Node.StartWith create.
type RunOptions struct {
	// Unit names the service (e.g. "helper.service"); "" generates conch-run-N-<random>.service.
	Unit string
	// Properties are passed as systemd-run -p NAME=VALUE (e.g. "MemoryHigh=200M").
	Properties []string
	// Env are KEY=VALUE pairs for the service's environment (systemd-run -E).
	Env []string
	// Stdin is piped to the command; nil gives it an empty input.
	Stdin io.Reader
}

// Run runs argv inside the node as a transient service (systemd-run --wait --pipe --collect,
// entered with nsenter), so the command gets a cgroup of its own in the node's tree, as a
// service under test would. Its working directory is / and HOME is unset. It blocks until the
// command ends; cancelling ctx SIGKILLs the unit. The Result is always returned; err is an
// *ExitError when the command exited non-zero, another error when it could not be run.
func (n *Node) Run(ctx context.Context, argv ...string) (*Result, error) {
	return n.RunWith(ctx, RunOptions{}, argv...)
}

// RunWith is Run with a unit name, properties, environment or stdin.
func (n *Node) RunWith(ctx context.Context, opts RunOptions, argv ...string) (*Result, error) {
	p, err := n.StartWith(ctx, opts, argv...)
	if err != nil {
		return &Result{ExitCode: -1}, err
	}
	return p.Wait(ctx)
}

// Show runs `systemctl show unit -p PROP...` inside the node (as Systemctl) and returns the
// properties it printed, by name (all of them when props is empty).
func (n *Node) Show(ctx context.Context, unit string, props ...string) (map[string]string, error) {
	args := []string{"show", unit}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	res, err := n.Systemctl(ctx, args...)
	if err != nil {
		return nil, err
	}
	return KeyValues(string(res.Stdout)), nil
}

// KeyValues parses KEY=VALUE lines (systemctl show, env(1), environment files); lines without
// "=" are skipped, and a repeated key keeps its last value.
func KeyValues(data string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(data, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Systemctl runs systemctl with args inside the node (outside any unit, through Nsenter). Note
// that some verbs answer with a non-zero status (is-active: 3), returned as *ExitError.
func (n *Node) Systemctl(ctx context.Context, args ...string) (*Result, error) {
	return n.Nsenter(ctx, append([]string{"systemctl"}, args...)...)
}

// Nsenter runs argv in all of the node's namespaces with nsenter -t INIT -a, as from a login
// shell: the process is not in any unit and stays in the host's cgroup. It blocks until the
// command ends or ctx is cancelled; Result and errors are as for Run.
func (n *Node) Nsenter(ctx context.Context, argv ...string) (*Result, error) {
	cmd := n.NsenterCmd(ctx, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return n.result(argv, &stdout, &stderr, err)
}

// NsenterCmd returns an unstarted *exec.Cmd that runs argv in all of the node's namespaces,
// for callers that want their own stdio or to run it in the background. ctx kills nsenter.
func (n *Node) NsenterCmd(ctx context.Context, argv ...string) *exec.Cmd {
	args := append([]string{"-t", strconv.Itoa(n.Init()), "-a", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.WaitDelay = waitDelay
	return cmd
}

// result turns the outcome of a command into a Result and an error (see Run).
func (n *Node) result(argv []string, stdout, stderr *bytes.Buffer, err error) (*Result, error) {
	res := &Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exit) && exit.Exited():
		res.ExitCode = exit.ExitCode()
		return res, &ExitError{Node: n.name, Argv: argv, Result: res}
	default:
		res.ExitCode = -1
		return res, fmt.Errorf("%q in node %s: %w: %s", argv, n.name, err, strings.TrimSpace(string(tail(res.Stderr, 1024))))
	}
}

// Proc is a command started in the background in a node (Start, StartWith).
type Proc struct {
	node   *Node
	argv   []string
	unit   string
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
	done   chan struct{} // closed when the command ended
	res    *Result
	err    error
}

// Start starts argv inside the node as a transient service, like Run, but does not wait for it.
// Cancelling ctx SIGKILLs the unit. Test cleanup kills what is still running; the returned Proc
// says when the command ends. Only the goroutine that Start starts reads the command's end; it
// stops when the command ends.
func (n *Node) Start(ctx context.Context, argv ...string) (*Proc, error) {
	return n.StartWith(ctx, RunOptions{}, argv...)
}

// StartWith is Start with a unit name, properties, environment or stdin.
func (n *Node) StartWith(ctx context.Context, opts RunOptions, argv ...string) (*Proc, error) {
	if len(argv) == 0 {
		return nil, errors.New("systemdtest: no command")
	}
	p := &Proc{node: n, argv: argv, unit: opts.Unit, done: make(chan struct{})}
	if p.unit == "" {
		n.mu.Lock()
		n.runCount++
		p.unit = fmt.Sprintf("conch-run-%d-%s.service", n.runCount, randomHex())
		n.mu.Unlock()
	}
	run := []string{"systemd-run", "--wait", "--pipe", "--collect", "--quiet", "--unit=" + p.unit}
	for _, prop := range opts.Properties {
		run = append(run, "--property="+prop)
	}
	for _, env := range opts.Env {
		run = append(run, "--setenv="+env)
	}
	run = append(run, "--")
	// systemd expands $VAR in a service's command line: double every $ to keep argv literal.
	for _, a := range argv {
		run = append(run, strings.ReplaceAll(a, "$", "$$"))
	}
	cmd := n.NsenterCmd(context.WithoutCancel(ctx), run...)
	cmd.Stdin = opts.Stdin
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%q in node %s: %w", argv, n.name, err)
	}
	stopWatch := context.AfterFunc(ctx, func() { p.kill() })
	go func() {
		err := cmd.Wait()
		stopWatch()
		var stdout, stderr bytes.Buffer
		stdout.Write(p.stdout.Bytes())
		stderr.Write(p.stderr.Bytes())
		p.res, p.err = n.result(argv, &stdout, &stderr, err)
		close(p.done)
	}()
	n.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.kill()
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
			<-p.done
		}
	})
	return p, nil
}

// Unit returns the name of the transient service the command runs in.
func (p *Proc) Unit() string { return p.unit }

// Stdout returns a copy of what the command wrote to stdout so far.
func (p *Proc) Stdout() []byte { return p.stdout.Bytes() }

// Stderr returns a copy of what the command wrote to stderr so far.
func (p *Proc) Stderr() []byte { return p.stderr.Bytes() }

// Done is closed when the command has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait blocks until the command ends or ctx is cancelled (the command keeps running then) and
// returns its Result and error as Run does.
func (p *Proc) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return &Result{Stdout: p.Stdout(), Stderr: p.Stderr(), ExitCode: -1},
			fmt.Errorf("%q in node %s: %w", p.argv, p.node.name, ctx.Err())
	}
}

// Stop stops the command's unit (systemctl stop: its stop signal, SIGKILL after its
// TimeoutStopSec) and waits for the command to end or ctx to be cancelled.
func (p *Proc) Stop(ctx context.Context) (*Result, error) {
	if _, err := p.node.Systemctl(ctx, "stop", p.unit); err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// kill SIGKILLs every process of the command's unit; errors are ignored (the unit may be gone).
func (p *Proc) kill() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = p.node.Systemctl(ctx, "kill", "--signal=SIGKILL", p.unit)
}
