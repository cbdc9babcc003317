package logentry

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the valid-* seed files of testdata/fuzz/FuzzDecode from sampleEntries")

// checkDecode decodes b at pos and checks Decode's contract: either a
// *CorruptEntryError at pos and no entry, or an entry that re-encodes to
// exactly b, through both Append and an Encoder, with Size(e) == len(b).
// It reports whether decoding succeeded.
func checkDecode(t *testing.T, pos uint64, b []byte) bool {
	t.Helper()
	orig := bytes.Clone(b)
	e, err := Decode(pos, b)
	if !bytes.Equal(b, orig) {
		t.Fatalf("Decode modified its input")
	}
	if err != nil {
		var ce *CorruptEntryError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode error %v (%T) is not a *CorruptEntryError matching ErrCorrupt", err, err)
		}
		if ce.Position != pos {
			t.Fatalf("error position %d, want %d", ce.Position, pos)
		}
		if e != nil {
			t.Fatalf("Decode returned both an entry and an error")
		}
		return false
	}
	if e.Position != pos {
		t.Fatalf("decoded position %d, want %d", e.Position, pos)
	}
	if e.Filler && (len(e.Events) != 0 || len(e.Writes) != 0) {
		t.Fatalf("decoded a filler with events or writes")
	}
	if n := Size(e); n != len(b) {
		t.Fatalf("Size of the decoded entry = %d, input has %d bytes", n, len(b))
	}
	if re := Append(nil, e); !bytes.Equal(re, b) {
		t.Fatalf("re-encoding differs:\ninput %x\nAppend %x", b, re)
	}
	if re := encodeWithEncoder(nil, e); !bytes.Equal(re, b) {
		t.Fatalf("Encoder re-encoding differs:\ninput %x\nEncoder %x", b, re)
	}
	return true
}

// maxFuzzInput bounds the inputs FuzzDecode examines.
const maxFuzzInput = 1 << 10

func FuzzDecode(f *testing.F) {
	for _, tc := range sampleEntries() {
		if len(tc.e.Writes) > 8 || Size(&tc.e) > 512 {
			continue // small seeds keep minimization of new inputs quick
		}
		f.Add(tc.e.Position, Append(nil, &tc.e))
	}
	pos, sample := corruptSample()
	f.Add(pos, sample)
	f.Add(pos+1, sample)
	f.Add(uint64(0), []byte{})
	f.Add(uint64(5), seal(body(byte(1), byte(0), 5, 0, uint64(math.MaxUint64), 0)))
	f.Add(uint64(5), seal(body(byte(1), byte(0), 5, 0, 0, 2, byte(0), "f", "k", "v", byte(1), "g", "k")))
	f.Add(uint64(0), seal(body(byte(1), byte(0), byte(0x80), byte(0), 0, 0, 0)))
	f.Add(uint64(3), seal(body(byte(1), byte(4), 3, 0, 1, "", "t", "", "", "", 0, 0)))  // stream flag, no stream
	f.Add(uint64(3), seal(body(byte(1), byte(4), 3, 0, 1, "", "t", "", "", "s", 9, 0))) // a stream event

	f.Fuzz(func(t *testing.T, pos uint64, b []byte) {
		if len(b) > maxFuzzInput {
			// Long inputs exercise no more of the parser, and the fuzzer's
			// quadratic minimization of them stalls fuzzing for minutes.
			return
		}
		checkDecode(t, pos, b)
		if len(b) < checksumSize {
			return
		}
		// Random mutations almost never keep the checksum valid; decode the
		// same body with a fixed checksum so the parser behind it is
		// explored too, both at pos and at the position the body records.
		sealed := seal(b[:len(b)-checksumSize])
		checkDecode(t, pos, sealed)
		if len(sealed) > 2 {
			if p, n := binary.Uvarint(sealed[2:]); n > 0 && p != pos {
				checkDecode(t, p, sealed)
			}
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), int64(0), false, "id", "type", []byte("data"), []byte("meta"), "default", []byte("key"), []byte("value"), uint16(0x0209))
	f.Add(uint64(math.MaxUint64), int64(math.MinInt64), false, "", "", []byte{}, []byte(nil), "", []byte{}, []byte{}, uint16(0xffff))
	f.Add(uint64(300), int64(1_700_000_000_000_000_000), true, "x", "y", []byte{0}, []byte{1}, "f", []byte{2}, []byte{3}, uint16(0x1f))
	f.Add(uint64(7), int64(-1), false, "événement", "注文", []byte("🚀"), []byte{}, "семья", []byte("clé"), []byte(nil), uint16(0x0700))

	f.Fuzz(func(t *testing.T, pos uint64, tm int64, filler bool, id, typ string, data, meta []byte,
		family string, key, value []byte, shape uint16) {
		if len(id)+len(typ)+len(data)+len(meta)+len(family)+len(key)+len(value) > maxFuzzInput {
			return // see FuzzDecode
		}
		e := Entry{Position: pos, Time: tm, Filler: filler}
		if family == "" {
			family = "default"
		}
		if !filler {
			// shape: bits 0-2 event count, bits 3-8 write count, bits 9-15
			// the delete pattern.
			for i := range int(shape & 7) {
				ev := Event{
					ID:       id[i%(len(id)+1):],
					Type:     typ,
					Data:     data[:len(data)*i/7],
					Metadata: meta,
				}
				if len(meta)%2 == 1 && i%2 == 0 { // about half the inputs append to streams
					ev.Stream, ev.Revision = family[:1+i%len(family)], uint64(tm)+uint64(i)
				}
				e.Events = append(e.Events, ev)
			}
			for i := range int(shape >> 3 & 63) {
				w := Write{Family: family[:1+i%len(family)], Key: key[i%(len(key)+1):], Value: value}
				w.Delete = shape>>(9+i%7)&1 == 1
				w.Range = !w.Delete && len(value)%4 == 1 && i%2 == 1 // range deletes now and then
				e.Writes = append(e.Writes, w)
			}
			if len(key)%3 == 0 { // about a third of the inputs record family operations
				for i := range 1 + len(value)%3 {
					e.Families = append(e.Families, FamilyOp{Family: family[:1+i%len(family)], Drop: i%2 == 1})
				}
			}
		}

		b := Append(nil, &e)
		if n := Size(&e); n != len(b) {
			t.Fatalf("Size = %d, Append wrote %d bytes", n, len(b))
		}
		if enc := encodeWithEncoder(nil, &e); !bytes.Equal(enc, b) {
			t.Fatalf("Encoder and Append differ:\nEncoder %x\nAppend  %x", enc, b)
		}
		got, err := Decode(pos, b)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if diff := cmp.Diff(normalize(&e), got); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
		if _, err := Decode(pos+1, b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode at the wrong position: err = %v", err)
		}
		checkDecode(t, pos, b)
	})
}

// readSeed parses a "go test fuzz v1" file holding a uint64 and a []byte.
func readSeed(path string) (uint64, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	var lines []string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 || lines[0] != "go test fuzz v1" {
		return 0, nil, fmt.Errorf("unexpected seed layout")
	}
	inner := func(l, prefix string) (string, error) {
		if !strings.HasPrefix(l, prefix+"(") || !strings.HasSuffix(l, ")") {
			return "", fmt.Errorf("line %q is not %s(...)", l, prefix)
		}
		return l[len(prefix)+1 : len(l)-1], nil
	}
	ps, err := inner(lines[1], "uint64")
	if err != nil {
		return 0, nil, err
	}
	pos, err := strconv.ParseUint(ps, 0, 64)
	if err != nil {
		return 0, nil, err
	}
	bs, err := inner(lines[2], "[]byte")
	if err != nil {
		return 0, nil, err
	}
	s, err := strconv.Unquote(bs)
	if err != nil {
		return 0, nil, err
	}
	return pos, []byte(s), nil
}

// TestSeedCorpus checks that the committed valid-* seeds are real encodings
// (go test already runs every seed file through FuzzDecode). With
// -update-corpus it regenerates them.
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if *updateCorpus {
		for _, tc := range sampleEntries() {
			if len(tc.e.Writes) > 8 || Size(&tc.e) > 512 {
				continue
			}
			b := Append(nil, &tc.e)
			content := fmt.Sprintf("go test fuzz v1\nuint64(%d)\n[]byte(%q)\n", tc.e.Position, b)
			name := "valid-" + strings.ReplaceAll(tc.name, " ", "-")
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "valid-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no valid-* seeds in %s", dir)
	}
	for _, path := range files {
		pos, b, err := readSeed(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !checkDecode(t, pos, b) {
			t.Errorf("%s: seed does not decode", path)
		}
	}
}
