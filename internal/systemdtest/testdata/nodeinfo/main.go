// Command nodeinfo is the smoke test's stand-in for conch inside a node: it prints the name of
// PID 1 and its own cgroup, one "key=value" per line, and exits with the status given as its
// first argument (0 if none).
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	comm, _ := os.ReadFile("/proc/1/comm")
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	fmt.Printf("pid1=%s\n", strings.TrimSpace(string(comm)))
	for _, line := range strings.Split(strings.TrimSpace(string(cgroup)), "\n") {
		if strings.HasPrefix(line, "0::") {
			fmt.Printf("cgroup=%s\n", strings.TrimPrefix(line, "0::"))
		}
	}
	status := 0
	if len(os.Args) > 1 {
		status, _ = strconv.Atoi(os.Args[1])
	}
	os.Exit(status)
}
