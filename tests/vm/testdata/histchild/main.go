// histchild is the child conch runs in the multi-node tests: it records its start and its end
// in a history folder bound into every node, for the checker in tests/vm (history_test.go).
//
//	histchild -dir /hist [-gate FILE] [-hold 300ms] [-ignore-term] [-until FILE]
//
// It writes DIR/<node>-<pid>-<rev>.start at its first instruction and DIR/<id>.end when it
// ends by itself (-hold after the -gate file exists, or once the -until file exists) or on SIGTERM (exit 143), unless
// -ignore-term: then only SIGKILL ends it and no end record is written (the test sees its end
// from outside, through a pidfd). Times are CLOCK_MONOTONIC in nanoseconds: all nodes share the
// host's kernel, so they compare exactly across nodes and with the test binary.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start is the start record (one JSON object).
type Start struct {
	Node  string `json:"node"`
	PID   int    `json:"pid"`
	Sema  string `json:"sema"`
	Max   string `json:"max"`
	Rev   string `json:"rev"`
	Lease string `json:"lease"`
	Mono  int64  `json:"mono_ns"`
}

// End is the end record.
type End struct {
	Mono int64  `json:"mono_ns"`
	How  string `json:"how"` // "done" or "term"
}

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func main() {
	started := mono()
	dir := flag.String("dir", "/hist", "history folder")
	hold := flag.Duration("hold", 0, "run this long, then exit 0 (0: until -until or a signal)")
	ignore := flag.Bool("ignore-term", false, "ignore SIGTERM")
	until := flag.String("until", "", "exit 0 once this file exists")
	gate := flag.String("gate", "", "start the -hold time only once this file exists")
	flag.Parse()
	if *ignore {
		signal.Ignore(syscall.SIGTERM)
	}
	term := make(chan os.Signal, 1)
	if !*ignore {
		signal.Notify(term, syscall.SIGTERM)
	}
	host, _ := os.Hostname()
	s := Start{Node: host, PID: os.Getpid(), Sema: os.Getenv("CONCH_SEMA"), Max: os.Getenv("CONCH_MAX"),
		Rev: os.Getenv("CONCH_REV"), Lease: os.Getenv("CONCH_LEASE"), Mono: started}
	id := fmt.Sprintf("%s-%d-%s", host, s.PID, s.Rev)
	if err := write(filepath.Join(*dir, id+".start"), s); err != nil {
		fmt.Fprintln(os.Stderr, "histchild:", err)
		os.Exit(1)
	}
	how, code := "", 0
	if *gate != "" {
		how, code = wait(0, *gate, term)
	}
	if how != "term" {
		how, code = wait(*hold, *until, term)
	}
	if err := write(filepath.Join(*dir, id+".end"), End{Mono: mono(), How: how}); err != nil {
		fmt.Fprintln(os.Stderr, "histchild:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// wait blocks until hold passed, until exists or a signal came.
func wait(hold time.Duration, until string, term chan os.Signal) (string, int) {
	var timer <-chan time.Time
	if hold > 0 {
		timer = time.After(hold)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-timer:
			return "done", 0
		case <-term:
			return "term", 143
		case <-tick.C:
			if until != "" {
				if _, err := os.Stat(until); err == nil {
					return "done", 0
				}
			}
		}
	}
}

// write writes v as JSON to path atomically (temporary file, rename).
func write(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
