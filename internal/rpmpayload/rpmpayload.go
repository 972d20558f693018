// Package rpmpayload rewrites the payload of an .rpm that nfpm wrote so that its cpio member
// names are relative ("./usr/bin/conch"), as rpmbuild writes them. nfpm (through
// google/rpmpack) writes absolute names ("/usr/bin/conch"), and `rpm2cpio x.rpm | cpio -id`,
// the usual way to look inside a package, then writes into / itself when run as root.
//
// Only the payload's names change: the header's file list (rpm -qlp) is left as it is. The
// payload's digests follow it: the header's payload SHA-256 (a hex string of fixed length:
// the header keeps its size), and the signature's header SHA-256, sizes and uncompressed
// payload size, each rewritten in place. A package signed with a PGP key cannot be rewritten
// (its signature covers the payload): Relative refuses it.
package rpmpayload

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Errors of Relative.
var (
	// ErrFormat: the input is not an .rpm of the kind nfpm writes (a bad lead, header or
	// cpio archive, or a compressor other than gzip)
	ErrFormat = errors.New("not an rpm this rewriter reads")
	// ErrSigned: the package carries a PGP or RSA signature, which a rewrite would break
	ErrSigned = errors.New("signed package")
)

// Tags read or rewritten (rpm's lib/rpmtag.h).
const (
	sigSize        = 1000 // header + payload size, int32
	sigPayloadSize = 1007 // uncompressed payload size, int32
	sigSHA256      = 273  // header SHA-256, hex string
	sigPGP         = 1002
	sigRSA         = 268
	sigGPG         = 1005
	sigDSA         = 267
	tagCompressor  = 1125 // string
	tagPayloadSHA  = 5092 // payload digest, string array (SHA-256 of the compressed payload)
	leadSize       = 96
	entrySize      = 16
)

// header is one header structure of the file: where it starts, its entries and its store.
type header struct {
	start, end int // the header's bytes in the file: [start, end)
	entries    []entry
	store      int // where the store starts in the file
}

type entry struct{ tag, typ, off, count uint32 }

// parseHeader reads the header structure at off (magic 8e ad e8 01).
func parseHeader(b []byte, off int) (header, error) {
	if off+16 > len(b) || !bytes.Equal(b[off:off+4], []byte{0x8e, 0xad, 0xe8, 0x01}) {
		return header{}, fmt.Errorf("%w: no header at byte %d", ErrFormat, off)
	}
	n := int(binary.BigEndian.Uint32(b[off+8:]))
	size := int(binary.BigEndian.Uint32(b[off+12:]))
	h := header{start: off, store: off + 16 + n*entrySize}
	h.end = h.store + size
	if n > 1<<16 || h.end > len(b) {
		return header{}, fmt.Errorf("%w: header at byte %d overruns the file", ErrFormat, off)
	}
	for i := range n {
		e := b[off+16+i*entrySize:]
		h.entries = append(h.entries, entry{binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:]), binary.BigEndian.Uint32(e[8:]), binary.BigEndian.Uint32(e[12:])})
	}
	return h, nil
}

// find returns tag's entry, and whether it is there.
func (h header) find(tag uint32) (entry, bool) {
	for _, e := range h.entries {
		if e.tag == tag {
			return e, true
		}
	}
	return entry{}, false
}

// str returns the NUL-terminated string at entry e (types 6, 8 and 9: its first string).
func (h header) str(b []byte, e entry) (at int, s string, err error) {
	at = h.store + int(e.off)
	i := bytes.IndexByte(b[at:h.end], 0)
	if i < 0 {
		return 0, "", fmt.Errorf("%w: unterminated string of tag %d", ErrFormat, e.tag)
	}
	return at, string(b[at : at+i]), nil
}

// setStr overwrites the string of tag with s, which must be as long as the one there.
func (h header) setStr(b []byte, tag uint32, s string) error {
	e, ok := h.find(tag)
	if !ok {
		return nil // not written by this packager: nothing to keep true
	}
	at, old, err := h.str(b, e)
	if err != nil {
		return err
	}
	if len(old) != len(s) {
		return fmt.Errorf("%w: tag %d holds %d bytes, not %d", ErrFormat, tag, len(old), len(s))
	}
	copy(b[at:], s)
	return nil
}

// setInt32 overwrites the first int32 of tag with v.
func (h header) setInt32(b []byte, tag uint32, v int) error {
	e, ok := h.find(tag)
	if !ok {
		return nil
	}
	if e.typ != 4 || v < 0 || v > 1<<31-1 {
		return fmt.Errorf("%w: tag %d is not an int32 that holds %d", ErrFormat, tag, v)
	}
	binary.BigEndian.PutUint32(b[h.store+int(e.off):], uint32(v))
	return nil
}

// Relative returns the .rpm rpm with every absolute cpio member name of its payload made
// relative ("/usr/bin/conch" becomes "./usr/bin/conch"), the digests and sizes that cover
// the payload updated, and whether anything changed (false: rpm is returned as it was). It
// does no I/O. Errors: ErrFormat, ErrSigned.
func Relative(rpm []byte) ([]byte, bool, error) {
	b := bytes.Clone(rpm)
	if len(b) < leadSize || !bytes.Equal(b[:4], []byte{0xed, 0xab, 0xee, 0xdb}) {
		return nil, false, fmt.Errorf("%w: no rpm lead", ErrFormat)
	}
	sig, err := parseHeader(b, leadSize)
	if err != nil {
		return nil, false, err
	}
	for _, t := range []uint32{sigPGP, sigRSA, sigGPG, sigDSA} {
		if _, ok := sig.find(t); ok {
			return nil, false, ErrSigned
		}
	}
	main, err := parseHeader(b, sig.end+(8-sig.end%8)%8)
	if err != nil {
		return nil, false, err
	}
	if e, ok := main.find(tagCompressor); ok {
		if _, c, err := main.str(b, e); err != nil || c != "gzip" {
			return nil, false, fmt.Errorf("%w: payload compressor %q, only gzip is read", ErrFormat, c)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(b[main.end:]))
	if err != nil {
		return nil, false, fmt.Errorf("%w: payload: %w", ErrFormat, err)
	}
	archive, err := io.ReadAll(zr)
	if err != nil {
		return nil, false, fmt.Errorf("%w: payload: %w", ErrFormat, err)
	}
	fixed, changed, err := relativeCpio(archive)
	if err != nil || !changed {
		return rpm, false, err
	}
	var payload bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&payload, gzip.BestCompression)
	zw.Write(fixed)
	zw.Close()
	sum := sha256.Sum256(payload.Bytes())
	if err := main.setStr(b, tagPayloadSHA, hex.EncodeToString(sum[:])); err != nil {
		return nil, false, err
	}
	hsum := sha256.Sum256(b[main.start:main.end])
	for _, err := range []error{
		sig.setStr(b, sigSHA256, hex.EncodeToString(hsum[:])),
		sig.setInt32(b, sigSize, main.end-main.start+payload.Len()),
		sig.setInt32(b, sigPayloadSize, len(fixed)),
	} {
		if err != nil {
			return nil, false, err
		}
	}
	return append(b[:main.end], payload.Bytes()...), true, nil
}

// relativeCpio rewrites the member names of a "newc" cpio archive (070701): "/x" becomes
// "./x"; the trailer and names already relative are kept. It returns the archive and
// whether a name changed.
func relativeCpio(a []byte) ([]byte, bool, error) {
	const hdr = 110
	var out bytes.Buffer
	changed := false
	for off := 0; ; {
		if off+hdr > len(a) || (string(a[off:off+6]) != "070701" && string(a[off:off+6]) != "070702") {
			return nil, false, fmt.Errorf("%w: no cpio header at byte %d", ErrFormat, off)
		}
		field := func(i int) (int, error) {
			v, err := strconv.ParseUint(string(a[off+6+8*i:off+14+8*i]), 16, 32)
			return int(v), err
		}
		fileSize, err1 := field(6)
		nameSize, err2 := field(11)
		if err1 != nil || err2 != nil || nameSize < 1 || off+hdr+nameSize > len(a) {
			return nil, false, fmt.Errorf("%w: bad cpio header at byte %d", ErrFormat, off)
		}
		name := string(a[off+hdr : off+hdr+nameSize-1])
		dataAt := align4(off + hdr + nameSize)
		next := align4(dataAt + fileSize)
		if next > len(a) {
			return nil, false, fmt.Errorf("%w: cpio member %q overruns the archive", ErrFormat, name)
		}
		newName := name
		if len(name) > 0 && name[0] == '/' {
			newName, changed = "."+name, true
		}
		h := bytes.Clone(a[off : off+hdr])
		copy(h[6+8*11:], fmt.Sprintf("%08X", len(newName)+1))
		out.Write(h)
		out.WriteString(newName)
		out.WriteByte(0)
		out.Write(make([]byte, align4(out.Len())-out.Len()))
		out.Write(a[dataAt : dataAt+fileSize])
		out.Write(make([]byte, align4(out.Len())-out.Len()))
		off = next
		if name == "TRAILER!!!" {
			out.Write(a[off:]) // the padding after the trailer, as written
			return out.Bytes(), changed, nil
		}
	}
}

func align4(n int) int { return (n + 3) &^ 3 }
