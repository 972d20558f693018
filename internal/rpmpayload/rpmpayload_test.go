package rpmpayload

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// newc builds a "newc" cpio archive of members (name, data), with its trailer.
func newc(members ...[2]string) []byte {
	var b bytes.Buffer
	add := func(name, data string) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", 0, 0o100644, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		b.WriteString(name + "\x00")
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
		b.WriteString(data)
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	for _, m := range members {
		add(m[0], m[1])
	}
	add("TRAILER!!!", "")
	return b.Bytes()
}

// names lists the member names of a newc archive.
func names(t *testing.T, a []byte) []string {
	t.Helper()
	var out []string
	for off := 0; off < len(a); {
		var size, nsize int
		fmt.Sscanf(string(a[off+54:off+62]), "%08X", &size)
		fmt.Sscanf(string(a[off+94:off+102]), "%08X", &nsize)
		name := string(a[off+110 : off+110+nsize-1])
		out = append(out, name)
		if name == "TRAILER!!!" {
			break
		}
		off = align4(align4(off+110+nsize) + size)
	}
	return out
}

// Absolute member names become relative, whatever their length's padding; data and the
// trailer are kept; an archive of relative names is unchanged.
func TestRelativeCpio(t *testing.T) {
	in := newc([2]string{"/etc/conch", ""}, [2]string{"/usr/bin/conch", "binary!"}, [2]string{"/a", "xy"}, [2]string{"./already", "z"})
	out, changed, err := relativeCpio(in)
	if err != nil || !changed {
		t.Fatalf("relativeCpio: %v %v", changed, err)
	}
	if got := strings.Join(names(t, out), " "); got != "./etc/conch ./usr/bin/conch ./a ./already TRAILER!!!" {
		t.Fatalf("names = %s", got)
	}
	if !bytes.Contains(out, []byte("binary!")) {
		t.Fatal("a member's data was lost")
	}
	if _, changed, err := relativeCpio(out); err != nil || changed {
		t.Fatalf("a relative archive: changed %v, %v", changed, err)
	}
	if _, _, err := relativeCpio([]byte("garbage")); !errors.Is(err, ErrFormat) {
		t.Fatalf("garbage: %v, want ErrFormat", err)
	}
	if _, _, err := Relative([]byte("not an rpm at all, but long enough to have a lead of ninety-six bytes...................")); !errors.Is(err, ErrFormat) {
		t.Fatalf("not an rpm: %v", err)
	}
}
