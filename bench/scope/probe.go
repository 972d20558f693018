package scopebench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/conch-project/conch/bench/internal/benchkit"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/conch-project/conch/internal/systemd"
)

// probeResult is where a scope's milliseconds go, measured step by step on the node's manager
// with the same calls unitrun makes (Dial, FindCallerService, StartTransientUnit with the
// job's JobRemoved, the cgroup check), each step timed on its own.
type probeResult struct {
	dial, service, call, job, check, stop []float64
	moved                                 []float64 // call's reply to the PID seen in the scope's cgroup (polled)
}

// probeScopes creates Probes scopes around a sleeping process, as conch creates the child's
// (Dial, FindCallerService before the slot; StartTransientUnit, its job, the /proc check after
// it), and times each step.
func (d *driver) probeScopes() (*probeResult, error) {
	r := &probeResult{}
	for i := range d.cfg.Probes {
		if err := d.probeOnce(r, i); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (d *driver) probeOnce(r *probeResult, i int) error {
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	t0 := time.Now()
	conn, err := systemd.Dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	t1 := time.Now()
	svc, err := systemd.FindCallerService(ctx, conn)
	if err != nil {
		return err
	}
	t2 := time.Now()
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		return err
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	name := fmt.Sprintf("conch-bench-probe-%d-%d.scope", os.Getpid(), i)
	props := []sdbus.Property{
		sdbus.PropPids(uint32(sleeper.Process.Pid)),
		sdbus.PropDescription("bench probe"),
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
	if svc.Slice != "" {
		props = append(props, sdbus.PropSlice(svc.Slice))
	}
	result := make(chan string, 1)
	t3 := time.Now()
	if _, err := conn.StartTransientUnitContext(ctx, name, "fail", props, result); err != nil {
		return err
	}
	t4 := time.Now()
	moved := make(chan time.Time, 1)
	go pollMoved(ctx, sleeper.Process.Pid, name, moved)
	select {
	case res := <-result:
		if res != "done" {
			return fmt.Errorf("%s: job %s", name, res)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	t5 := time.Now()
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sleeper.Process.Pid))
	if err != nil || !strings.Contains(string(cg), name) {
		return fmt.Errorf("%s: process not in the scope: %s %v", name, cg, err)
	}
	t6 := time.Now()
	if err := systemd.StopScope(ctx, conn, name); err != nil {
		return err
	}
	t7 := time.Now()
	var tm time.Time
	select {
	case tm = <-moved:
	case <-ctx.Done():
		return ctx.Err()
	}
	add := func(xs *[]float64, a, b time.Time) { *xs = append(*xs, float64(b.Sub(a))/1e6) }
	add(&r.dial, t0, t1)
	add(&r.service, t1, t2)
	add(&r.call, t3, t4)
	add(&r.job, t4, t5)
	add(&r.check, t5, t6)
	add(&r.stop, t6, t7)
	add(&r.moved, t4, tm)
	return nil
}

// pollMoved polls /proc/PID/cgroup every 100 us until it names scope, and sends when.
func pollMoved(ctx context.Context, pid int, scope string, moved chan<- time.Time) {
	file := fmt.Sprintf("/proc/%d/cgroup", pid)
	for ctx.Err() == nil {
		if cg, err := os.ReadFile(file); err == nil && strings.Contains(string(cg), scope) {
			moved <- time.Now()
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func median(xs []float64) float64 { return benchkit.Pct(xs, 50) }

func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

func metStr(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// output builds the rows and the detail: every ratio is within this run.
func (d *driver) output(vs []*variant, pr *probeResult) Output {
	cs, cd, el, es := vs[0], vs[1], vs[2], vs[3]
	var o Output
	row := func(measure, val, ref string, ratio float64, target string, ok bool) {
		met := ""
		if target != "" {
			met = metStr(ok)
		}
		o.Rows = append(o.Rows, [6]string{measure, val, ref, f2(ratio), target, met})
	}
	h := func(v *variant) float64 { return median(v.handoffs) }
	u := func(v *variant) float64 { return median(v.wall) }
	row(fmt.Sprintf("hand-off p50 (ms), scope mode / conch --scope never, %d hand-offs", len(cs.handoffs)), f2(h(cs)), f2(h(cd)), h(cs)/h(cd), "<= 1.2", h(cs)/h(cd) <= 1.2)
	row("hand-off p50 (ms), scope mode / etcdctl lock -- systemd-run --scope", f2(h(cs)), f2(h(es)), h(cs)/h(es), "<= 0.5", h(cs)/h(es) <= 0.5)
	row("hand-off p50 (ms), scope mode / etcdctl lock", f2(h(cs)), f2(h(el)), h(cs)/h(el), "", false)
	row("hand-off p50 (ms), --scope never / etcdctl lock", f2(h(cd)), f2(h(el)), h(cd)/h(el), "<= 0.9", h(cd)/h(el) <= 0.9)
	row(fmt.Sprintf("uncontended wall p50 (ms), scope mode / etcdctl lock -- systemd-run --scope, %d runs", len(cs.wall)), f2(u(cs)), f2(u(es)), u(cs)/u(es), "<= 0.7", u(cs)/u(es) <= 0.7)
	row("uncontended wall p50 (ms), --scope never / etcdctl lock", f2(u(cd)), f2(u(el)), u(cd)/u(el), "<= 1.0", u(cd)/u(el) <= 1.0)
	var b strings.Builder
	fmt.Fprintf(&b, "Inside one systemd node (systemd 252 as PID 1; internal/systemdtest, as the integration tests boot theirs), every tool started by one transient service (`systemd-run` in the node), etcd on the host's loopback; the four variants interleaved in one run. Hand-offs: batches of %d waiters behind a gate holder, each child (bench-stamp) holding %d ms; a hand-off is the next child's first instruction minus the previous child's last. Uncontended: the child is bench-stamp holding nothing.\n\n", d.cfg.Batch, d.cfg.HoldMs)
	b.WriteString("| variant | hand-off p50 | p90 | p99 | uncontended wall p50 | p99 |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", v.label, f2(h(v)), f2(benchkit.Pct(v.handoffs, 90)), f2(benchkit.Pct(v.handoffs, 99)), f2(u(v)), f2(benchkit.Pct(v.wall, 99)))
	}
	fmt.Fprintf(&b, "\nRatios: hand-off scope mode / --scope never %s, / etcdctl lock -- systemd-run --scope %s, / etcdctl lock %s; uncontended scope mode / etcdctl lock -- systemd-run --scope %s, --scope never / etcdctl lock %s.\n",
		f2(h(cs)/h(cd)), f2(h(cs)/h(es)), f2(h(cs)/h(el)), f2(u(cs)/u(es)), f2(u(cd)/u(el)))
	b.WriteString("\nWhere an uncontended conch run goes (p50, ms; read times of conch's -v lines and the child's first stamp):\n\n")
	b.WriteString("| variant | exec to \"slot held\" | \"slot held\" to child's first instruction | \"released\" to exit |\n| --- | --- | --- | --- |\n")
	for _, v := range append([]*variant{cs, cd}, vs[4:]...) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v.label, f2(median(v.toHeld)), f2(median(v.heldToChild)), f2(median(v.relToExit)))
	}
	fmt.Fprintf(&b, "\nA scope's creation step by step (p50 / p99 of %d probes, ms; the same calls unitrun makes, timed one by one from a transient service of the node):\n\n", len(pr.call))
	b.WriteString("| step | p50 | p99 | on conch's path |\n| --- | --- | --- | --- |\n")
	for _, s := range []struct {
		what string
		xs   []float64
		when string
	}{
		{"Dial: connect, authenticate, Hello, Subscribe, SystemState", pr.dial, "beside the etcd connection, grant and enqueue (D8b)"},
		{"FindCallerService: the service's limits (GetUnit, properties)", pr.service, "beside them too"},
		{"StartTransientUnit: call to reply (unit loaded, job queued)", pr.call, "after the enqueue (the name holds the rev, D8): uncontended, between slot and child; next in line, while it waits (D8b)"},
		{"job: reply to JobRemoved \"done\" (cgroup created, PID moved)", pr.job, "the same"},
		{"(polled: reply to the PID seen in the scope's cgroup, during the job's wait)", pr.moved, ""},
		{"cgroup check (/proc/PID/cgroup)", pr.check, "the same"},
		{"StopUnit and wait until gone (not on conch's path when the child ends)", pr.stop, "no"},
	} {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", s.what, f2(median(s.xs)), f2(benchkit.Pct(s.xs, 99)), s.when)
	}
	for _, v := range []*variant{cs, cd} {
		traceTable(&b, v.label+", uncontended (p50 ms from exec", v.trace)
		traceTable(&b, v.label+", hand-off (p50 ms from the previous child's last instruction", v.htrace)
	}
	if len(vs) > 4 {
		as, ad := vs[4], vs[5]
		row("-alt: hand-off p50 (ms), scope mode / --scope never (same build)", f2(h(as)), f2(h(ad)), h(as)/h(ad), "<= 1.2", h(as)/h(ad) <= 1.2)
		row("-alt: hand-off p50 (ms), scope mode / etcdctl lock -- systemd-run --scope", f2(h(as)), f2(h(es)), h(as)/h(es), "<= 0.5", h(as)/h(es) <= 0.5)
		row("-alt: uncontended wall p50 (ms), scope mode / etcdctl lock -- systemd-run --scope", f2(u(as)), f2(u(es)), u(as)/u(es), "<= 0.7", u(as)/u(es) <= 0.7)
	}
	o.Detail = b.String()
	for _, v := range vs {
		if v.overlaps > 0 {
			o.Notes = append(o.Notes, fmt.Sprintf("%s: %d hand-off(s) where the next child started before the previous one ended: a mutual exclusion violation", v.label, v.overlaps))
		}
	}
	return o
}

// traceTable writes the trace points tr (a build with bench/trace/points.patch, Config.Trace),
// in the order of their medians, if there are any.
func traceTable(b *strings.Builder, what string, tr map[string][]float64) {
	if len(tr) == 0 {
		return
	}
	names := make([]string, 0, len(tr))
	for k := range tr {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int { return cmp.Compare(median(tr[x]), median(tr[y])) })
	fmt.Fprintf(b, "\nTrace points of %s; c- conch's unitrun, g- the guardian, m- conch's main, s- sema):\n\n| point | p50 | count |\n| --- | --- | --- |\n", what)
	for _, k := range names {
		fmt.Fprintf(b, "| %s | %s | %d |\n", k, f2(median(tr[k])), len(tr[k]))
	}
}
