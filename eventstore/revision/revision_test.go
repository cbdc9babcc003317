package revision_test

import (
	"errors"
	"math"
	"testing"

	"github.com/rockline/rockline/eventstore/revision"
)

// TestHolds: the truth table of the expectations over a missing stream and a stream
// whose last revision is 0 or 2.
func TestHolds(t *testing.T) {
	type state struct {
		last   uint64
		exists bool
	}
	states := []state{{0, false}, {0, true}, {2, true}}
	for _, tc := range []struct {
		e    revision.Expected
		want [3]bool
	}{
		{revision.Any, [3]bool{true, true, true}},
		{revision.NoStream, [3]bool{true, false, false}},
		{revision.StreamExists, [3]bool{false, true, true}},
		{revision.Exact(0), [3]bool{false, true, false}},
		{revision.Exact(2), [3]bool{false, false, true}},
		{revision.Expected{}, [3]bool{false, false, false}},
	} {
		for i, st := range states {
			if got := tc.e.Holds(st.last, st.exists); got != tc.want[i] {
				t.Errorf("%v.Holds(%d, %v) = %v, want %v", tc.e, st.last, st.exists, got, tc.want[i])
			}
			err := revision.Check("s", tc.e, st.last, st.exists)
			if tc.want[i] != (err == nil) {
				t.Errorf("Check(%v, %d, %v) = %v", tc.e, st.last, st.exists, err)
			}
			var we *revision.WrongExpectedVersionError
			if err != nil && (!errors.As(err, &we) || !errors.Is(err, revision.ErrWrongExpectedVersion) || we.Expected != tc.e || we.Actual != revision.Actual(st.last, st.exists) || we.Stream != "s") {
				t.Errorf("Check(%v, %d, %v) = %#v", tc.e, st.last, st.exists, err)
			}
		}
	}
	if revision.Actual(5, false) != revision.NoStream || revision.Actual(5, true) != revision.Exact(5) {
		t.Error("Actual")
	}
	if (revision.Expected{}).Valid() || !revision.Any.Valid() || !revision.Exact(0).Valid() {
		t.Error("Valid")
	}
	for e, want := range map[revision.Expected]string{revision.Any: "any", revision.NoStream: "no_stream", revision.StreamExists: "stream_exists", revision.Exact(7): "7", {}: "invalid"} {
		if e.String() != want {
			t.Errorf("String = %q, want %q", e.String(), want)
		}
	}
	err := revision.Check("orders-1", revision.Exact(3), 4, true)
	if want := `rockline: append to stream "orders-1": expected revision 3, actual 4`; err == nil || err.Error() != want {
		t.Errorf("Error = %v, want %s", err, want)
	}
}

func TestRetryFrom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		e      revision.Expected
		last   uint64
		exists bool
		n      uint64
		first  uint64
		ok     bool
	}{
		{"no stream", revision.NoStream, 0, false, 1, 0, false},
		{"NoStream", revision.NoStream, 2, true, 2, 0, true},
		{"NoStream past the stream", revision.NoStream, 0, true, 2, 0, false},
		{"Exact", revision.Exact(1), 3, true, 2, 2, true},
		{"Exact past the stream", revision.Exact(1), 3, true, 3, 0, false},
		{"Exact at the head", revision.Exact(3), 3, true, 1, 0, false},
		{"Exact max", revision.Exact(math.MaxUint64), math.MaxUint64, true, 1, 0, false},
		{"Any: the tail", revision.Any, 4, true, 2, 3, true},
		{"StreamExists: the tail", revision.StreamExists, 1, true, 2, 0, true},
		{"Any: longer than the stream", revision.Any, 1, true, 3, 0, false},
		{"invalid", revision.Expected{}, 4, true, 1, 0, false},
		{"no events", revision.Any, 4, true, 0, 0, false},
	} {
		first, ok := revision.RetryFrom(tc.e, tc.last, tc.exists, tc.n)
		if first != tc.first || ok != tc.ok {
			t.Errorf("%s: RetryFrom = %d, %v; want %d, %v", tc.name, first, ok, tc.first, tc.ok)
		}
	}
}

func TestRecord(t *testing.T) {
	p := revision.AppendRecordPayload(nil, 3, "id-1")
	v := revision.AppendRecord([]byte("x"), 1<<40, p)[1:]
	pos, idx, id, ok := revision.ParseRecord(v)
	if !ok || pos != 1<<40 || idx != 3 || id != "id-1" {
		t.Errorf("ParseRecord = %d %d %q %v", pos, idx, id, ok)
	}
	for _, bad := range [][]byte{nil, {0x80}, {0x01, 0x80}} {
		if _, _, _, ok := revision.ParseRecord(bad); ok {
			t.Errorf("ParseRecord(%x) ok", bad)
		}
	}
}
