// Command conch-guardian is the guardian of `conch sema` (D7, D7a): the parent and child
// subreaper of conch's command, which stops the command's whole tree when conch says so or
// dies. conch starts it with two pipes (unitrun's protocol) and trusts it only when it reports
// conch's own build; it is not meant to be run by hand (without the pipes it exits 2).
//
// It is unitrun.GuardianMain and nothing else: no etcd or gRPC code is linked in, so it starts
// in about a millisecond, where re-executing conch as its own guardian pays for conch's whole
// initialisation. The packages install it as /usr/libexec/conch/conch-guardian; `make build`
// puts it beside bin/conch. Without it conch re-executes itself as the guardian.
package main

import (
	"os"

	"github.com/conch-project/conch/unitrun"
)

func main() {
	os.Exit(unitrun.GuardianMain())
}
