// fleetclient is the FleetLock client of the multi-node tests (scenario 15): it does at each
// start what zincati does at each boot, only faster, and records what it did in a history
// folder bound into every node.
//
//	fleetclient -base URL -id ID -group G -dir /hist -staged FILE [-style zincati|flatcar] [-every 250ms]
//
// At start it POSTs v1/steady-state until an answer is a 2xx (zincati: at every start, again
// every 300 s until it gets one). Then, if the file -staged exists (an update is staged), it
// POSTs v1/pre-reboot until an answer is a 2xx (zincati: every 300 s while an update waits;
// every 2xx is a grant), removes -staged (the update is applied by the reboot) and runs
// `systemctl reboot`. Requests carry "fleet-lock-protocol: true" and no Content-Type;
// -style zincati joins "v1/..." onto a base ending in "/", -style flatcar appends "/v1/..."
// to the base as Flatcar's client does (so a base ending in "/" asks for "//v1/...").
//
// Each event is one JSON line appended to DIR/fleet-<group>-<host>.log: its CLOCK_MONOTONIC
// time in nanoseconds (all nodes share the host's kernel) and, for a request, when it was
// sent, the status, and a refusal's kind and value:
//
//	{"ev":"boot"}                    the client started (the node is up)
//	{"ev":"steady","status":200}     a steady-state answer (also a refusal or a failure, status 0)
//	{"ev":"pre-reboot","status":423} a pre-reboot answer
//	{"ev":"reboot"}                  granted; systemctl reboot comes next
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Event is one line of the log.
type Event struct {
	Ev     string `json:"ev"`
	Node   string `json:"node"`
	ID     string `json:"id"`
	Mono   int64  `json:"mono_ns"`
	Sent   int64  `json:"sent_ns,omitempty"` // a request: when it was sent
	Status int    `json:"status,omitempty"`  // a request: the HTTP status, 0 when none came
	Kind   string `json:"kind,omitempty"`    // a refusal's kind
	Value  string `json:"value,omitempty"`   // a refusal's value, or the transport's error
}

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

type client struct {
	base, style, id, group string
	host, log              string
	http                   *http.Client
}

func main() {
	c := client{http: &http.Client{Timeout: 10 * time.Second}}
	flag.StringVar(&c.base, "base", "", "the lock server's base URL")
	flag.StringVar(&c.style, "style", "zincati", "how paths are joined onto the base: zincati or flatcar")
	flag.StringVar(&c.id, "id", "", "this node's id")
	flag.StringVar(&c.group, "group", "default", "the FleetLock group")
	dir := flag.String("dir", "/hist", "history folder")
	staged := flag.String("staged", "", "an update is staged while this file exists")
	every := flag.Duration("every", 250*time.Millisecond, "retry interval")
	flag.Parse()
	c.host, _ = os.Hostname()
	c.log = filepath.Join(*dir, fmt.Sprintf("fleet-%s-%s.log", c.group, c.host))
	c.record(Event{Ev: "boot"})
	for !c.post("steady-state", "steady") {
		time.Sleep(*every)
	}
	if _, err := os.Stat(*staged); err != nil {
		return // nothing to install: zincati idles until the next update
	}
	for !c.post("pre-reboot", "pre-reboot") {
		time.Sleep(*every)
	}
	if err := os.Remove(*staged); err != nil {
		fail(err)
	}
	unix.Sync()
	c.record(Event{Ev: "reboot"})
	if out, err := exec.Command("systemctl", "reboot").CombinedOutput(); err != nil {
		fail(fmt.Errorf("systemctl reboot: %v %s", err, out))
	}
}

// post sends one request of api and records its answer as event ev; it reports a 2xx.
func (c client) post(api, ev string) bool {
	url := strings.TrimSuffix(c.base, "/") + "/v1/" + api // zincati: a base ending in "/"
	if c.style == "flatcar" {
		url = c.base + "/v1/" + api
	}
	body, _ := json.Marshal(map[string]any{"client_params": map[string]string{"id": c.id, "group": c.group}})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		fail(err)
	}
	req.Header.Set("fleet-lock-protocol", "true")
	e := Event{Ev: ev, Sent: mono()}
	resp, err := c.http.Do(req)
	if err != nil {
		e.Value = err.Error()
		c.record(e)
		return false
	}
	defer resp.Body.Close()
	e.Status = resp.StatusCode
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	ok := resp.StatusCode/100 == 2
	if !ok {
		var r struct{ Kind, Value string }
		if json.Unmarshal(data, &r) != nil {
			r.Value = "not a FleetLock error body: " + string(data)
		}
		e.Kind, e.Value = r.Kind, r.Value
	}
	c.record(e)
	return ok
}

// record appends e to the log, stamped now.
func (c client) record(e Event) {
	e.Node, e.ID, e.Mono = c.host, c.id, mono()
	line, _ := json.Marshal(e)
	f, err := os.OpenFile(c.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleetclient:", err)
	os.Exit(1)
}
