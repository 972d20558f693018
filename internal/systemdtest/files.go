package systemdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
)

// WriteFile writes data to path inside the node (creating missing parent directories) with
// permissions perm, through the node's own mount namespace: it works under /run, /var/tmp or
// /etc/systemd/system alike and follows the node's symlinks, not the host's. (The node mounts a
// tmpfs over /tmp that tests do not see from outside: prefer /var/tmp.) Run `systemctl
// daemon-reload` after writing unit files.
func (n *Node) WriteFile(ctx context.Context, path string, data []byte, perm os.FileMode) error {
	cmd := n.NsenterCmd(ctx, "/bin/sh", "-c", `mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" "$1"`,
		"sh", path, fmt.Sprintf("%o", perm.Perm()))
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_, err := n.result([]string{"write", path}, &stdout, &stderr, cmd.Run())
	return err
}

// ReadFile returns the contents of path inside the node, read in the node's mount namespace.
func (n *Node) ReadFile(ctx context.Context, path string) ([]byte, error) {
	res, err := n.Nsenter(ctx, "cat", "--", path)
	if err != nil {
		return nil, err
	}
	return res.Stdout, nil
}
