package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// progress tracks which packages run, so that a long `make test` says how far it is each
// time a package ends: a package's own "ok"/"FAIL" line can be minutes apart from the next
// (the systemd node tests), and a newcomer must see it has not hung.
type progress struct {
	began   time.Time
	running map[string]bool
	done    int
}

// started records a package's "start" event (go test -json, Go 1.20+).
func (p *progress) started(pkg string) {
	if p.running == nil {
		p.running = map[string]bool{}
	}
	p.running[pkg] = true
}

// ended records that pkg ended and returns the progress line: packages done, the counts so
// far, the time since the first event, and the packages still running.
func (p *progress) ended(pkg string, passed, failed, skipped int, now time.Time) string {
	delete(p.running, pkg)
	p.done++
	var still []string
	for k := range p.running {
		still = append(still, k)
	}
	sort.Strings(still)
	line := fmt.Sprintf("== %d package(s) done after %v: %d passed, %d failed, %d skipped so far",
		p.done, now.Sub(p.began).Round(time.Second), passed, failed, skipped)
	if len(still) > 0 {
		line += "; running: " + strings.Join(still, " ")
	}
	return line + "\n"
}
