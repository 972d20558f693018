// Command testsummary reads `go test -json` on stdin, prints the package
// result lines, the output of failed tests and the names of skipped ones,
// then one closing line "N passed, N failed, N skipped".
//
// It exits 1 if a test or package failed, or, when CI is set (internal/ci), if any test was
// skipped: in CI a skipped test is a failure (the harness must install what
// a test needs instead).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/conch-project/conch/internal/ci"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	var passed, failed, skipped int
	var skips []string
	pkgFailed := false
	outputs := map[string]*strings.Builder{} // per test, kept until it ends
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // build errors and the like
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if e.Test == "" {
				if strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
					strings.HasPrefix(e.Output, "---") || strings.HasPrefix(e.Output, "panic") ||
					strings.Contains(e.Output, "[no test files]") {
					fmt.Print(e.Output)
				}
				continue
			}
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(e.Output)
		case "build-output": // compiler and vet errors (Go 1.24+)
			fmt.Print(e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					pkgFailed = true
					// a panic or -timeout ends the package with tests that
					// never reported: they failed, and their output says why
					for k, b := range outputs {
						if strings.HasPrefix(k, e.Package+" ") {
							failed++
							fmt.Printf("--- FAIL: %s (did not finish)\n%s", k, b.String())
							delete(outputs, k)
						}
					}
				}
				continue
			}
			switch e.Action {
			case "pass":
				passed++
			case "fail":
				failed++
				if b := outputs[key]; b != nil {
					fmt.Print(b.String())
				}
			case "skip":
				skipped++
				msg := ""
				if b := outputs[key]; b != nil {
					msg = strings.TrimSpace(b.String())
				}
				skips = append(skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, msg))
			}
			delete(outputs, key)
		}
	}
	sort.Strings(skips)
	for _, s := range skips {
		fmt.Println("SKIP", s)
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	switch {
	case failed > 0 || pkgFailed:
		os.Exit(1)
	case skipped > 0 && ci.Active():
		fmt.Println("FAIL: tests were skipped in CI; install what they need")
		os.Exit(1)
	}
}
