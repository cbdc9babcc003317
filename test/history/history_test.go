package history

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// What a Recorder's sink wrote replays into the same history, a transaction killed in
// flight stays unknown, and a line cut short by a kill is ignored.
func TestRecorderReplay(t *testing.T) {
	var sink bytes.Buffer
	rec := NewRecorder(&sink)
	t1 := &Txn{ID: 1, Ops: []Op{ap(1, 1)}}
	rec.Invoke(t1)
	t2 := &Txn{ID: 2, Ops: []Op{r(1)}}
	rec.Invoke(t2)
	t1.Outcome, t1.Pos = OK, 7
	rec.Complete(t1)
	rec.Seen(Seen{Pos: 7, Digest: "d"})
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	sink.WriteString(`{"ev":"complete","txn":{"id":2,`) // killed mid-line
	replayed := NewRecorder(nil)
	seen, err := replayed.Replay(&sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec.History(), replayed.History(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("replayed history (-want +got):\n%s", diff)
	}
	if got := replayed.History()[1].Outcome; got != Unknown {
		t.Errorf("the transaction in flight replays as %q, want %q", got, Unknown)
	}
	if diff := cmp.Diff([]Seen{{Pos: 7, Digest: "d"}}, seen); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	// A bad line that is not the last is an error.
	if _, err := NewRecorder(nil).Replay(bytes.NewBufferString("{bad\n{\"ev\":\"sub\",\"sub\":{}}\n"), nil); err == nil {
		t.Error("Replay accepted a bad line followed by another")
	}
}

// JSON lines round-trip a history.
func TestJSONLRoundTrip(t *testing.T) {
	h := History{
		{ID: 1, Client: 2, Invoke: 10, Complete: 20, Outcome: OK, Pos: 4, Ops: []Op{ap(1, 5), r(2, 1, 2)}},
		{ID: 2, Client: 1, Invoke: 11, Outcome: Unknown, Err: "boom", ErrClass: UntypedError, Ops: []Op{ap(3, 6)}},
	}
	var b bytes.Buffer
	if err := h.WriteJSONL(&b); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSONL(&b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// Lists survive their encoding; a bad element is an error naming it.
func TestListCodec(t *testing.T) {
	for _, l := range [][]int64{nil, {1}, {3, 1, 2}} {
		got, err := DecodeList(EncodeList(l))
		if err != nil || !cmp.Equal(l, got) {
			t.Errorf("DecodeList(EncodeList(%v)) = %v, %v", l, got, err)
		}
	}
	if _, err := DecodeList([]byte("1 x")); err == nil {
		t.Error("DecodeList accepted a bad element")
	}
	if k, ok := ParseKey(KeyName(12)); !ok || k != 12 {
		t.Errorf("ParseKey(KeyName(12)) = %d, %v", k, ok)
	}
	if _, ok := ParseKey([]byte("other")); ok {
		t.Error("ParseKey accepted a foreign key")
	}
}
