package sema_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/conch-project/conch/sema"
)

// At most two processes cluster-wide render the nightly report at once: acquire one of the
// two slots of "nightly-report", run the command while the slot is held, stopping it if the
// slot is lost, and release the slot. The etcd is the one in ETCDCTL_ENDPOINTS (the test
// binary starts one there).
func Example() {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(os.Getenv("ETCDCTL_ENDPOINTS"), ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	s, err := sema.New(client, "nightly-report", 2, sema.Options{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	wait, cancel := context.WithTimeout(context.Background(), time.Minute) // give up after a minute
	defer cancel()
	h, err := s.Acquire(wait)
	if err != nil { // a *sema.WaitError: no slot within the minute (Unreachable: etcd did not answer)
		fmt.Println(err)
		return
	}
	fmt.Println("holding a slot of nightly-report[2]") // h.Rev() is the fencing token

	// Bind: the command's context ends if the slot is lost (context.Cause says why:
	// sema.ErrLeaseLost, ErrFenced, ErrKeyDeleted) or when wait's parent ends.
	work, unbind := h.Bind(context.Background())
	out, err := exec.CommandContext(work, "echo", "report written").Output()
	if cause := context.Cause(work); cause != nil {
		fmt.Println("slot lost, command stopped:", cause)
	}
	unbind()
	fmt.Print(string(out))
	if err != nil {
		fmt.Println(err)
	}

	if err := h.Release(context.Background()); err != nil { // revokes the lease: the key goes
		fmt.Println("release:", err)
		return
	}
	fmt.Println("released")
	// Output:
	// holding a slot of nightly-report[2]
	// report written
	// released
}
