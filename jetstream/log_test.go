package jetstream_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
)

// evValue makes the event store's positioned value: uvarint(pos) then the payload.
func evValue(dst []byte, pos uint64, payload []byte) []byte {
	return append(binary.AppendUvarint(dst, pos), payload...)
}

// evCodec is evValue as the codec named "ev".
var evCodec = pipeline.NewPositionedValue("ev", evValue)

func openPositioned(t *testing.T) (*jetstream.Partition, jetstream.Config) {
	t.Helper()
	n := streamSeq.Add(1)
	cfg := jetstream.Config{Stream: fmt.Sprintf("RL_test_%d", n), Subject: fmt.Sprintf("rl.test.%d", n),
		PositionedValues: []jetstream.PositionedValue{evCodec}}
	return openOn(t, connect(t, 0), cfg), cfg
}

// A positioned write reads back, everywhere, as its encoding applied to the commit's
// position, which the engine derives from the message's distance to its marker.
func TestPositionedValues(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := openPositioned(t)
	commit := &jetstream.Commit{
		Events: []jetstream.Event{ev("s", "e1", "E", "x"), ev("s", "e2", "E", "y")},
		Writes: []jetstream.Write{
			{Family: "es", Key: []byte("head"), Value: []byte("2")},
			{Family: "es", Key: []byte("r0"), Value: []byte("p0"), Blind: true, AtCommit: "ev"},
			{Family: "es", Key: []byte("r1"), Value: []byte("p1"), Blind: true, AtCommit: "ev"},
		},
		Reads: []jetstream.Read{{Family: "other", Key: []byte("k")}},
	}
	pos, err := p.Commit(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	want := func(payload string) string { return string(evValue(nil, pos, []byte(payload))) }
	for _, k := range []string{"r0", "r1"} {
		it, ok, err := p.Get(ctx, "es", []byte(k), pos)
		if err != nil || !ok || string(it.Value) != want("p"+k[1:]) || it.AtCommit != pos {
			t.Errorf("Get %s = %q at %d, %v %v; want %q at %d", k, it.Value, it.AtCommit, ok, err, want("p"+k[1:]), pos)
		}
	}
	items, err := p.Scan(ctx, "es", []byte("r"), pos)
	if err != nil || len(items) != 2 || string(items[1].Value) != want("p1") {
		t.Errorf("Scan: %v %v", items, err)
	}
	if h, _, _ := p.Get(ctx, "es", []byte("head"), pos); h.AtCommit != 0 || string(h.Value) != "2" {
		t.Errorf("an ordinary write reads %q, AtCommit %d", h.Value, h.AtCommit)
	}
	es := collect(t, p, 0, 1)
	e, err := p.Entry(ctx, pos)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []jetstream.Entry{es[0], e} {
		if len(got.Writes) != 3 || string(got.Writes[1].Value) != want("p0") || got.Writes[2].AtCommit != pos {
			t.Errorf("entry writes: %+v", got.Writes)
		}
	}
	// Txn.PutAtCommit: not seen by the transaction's own reads, positioned once committed.
	tx, _ := p.Begin(ctx)
	if err := tx.PutAtCommit("es", []byte("r2"), []byte("p2"), "nope"); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("unknown encoding: %v", err)
	}
	if err := tx.PutAtCommit("es", []byte("r2"), []byte("p2"), "ev"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tx.Get(ctx, "es", []byte("r2")); ok {
		t.Error("a transaction sees its own PutAtCommit")
	}
	pos2, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if it, _, _ := p.Get(ctx, "es", []byte("r2"), pos2); string(it.Value) != string(evValue(nil, pos2, []byte("p2"))) {
		t.Errorf("Txn.PutAtCommit reads %q", it.Value)
	}
	// Refused input, and a reader that lacks the encoding.
	for _, w := range []jetstream.Write{{Family: "es", Key: []byte("x"), Delete: true, AtCommit: "ev"}, {Family: "es", Key: []byte("x"), AtCommit: "nope"}} {
		if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{w}}); !errors.Is(err, jetstream.ErrInvalidArgument) {
			t.Errorf("Commit %+v: %v", w, err)
		}
	}
	plain := openOn(t, connect(t, 1), jetstream.Config{Stream: cfg.Stream, Subject: cfg.Subject})
	var pe *jetstream.PositionedValueError
	if _, _, err := plain.Get(ctx, "es", []byte("r0"), pos); !errors.As(err, &pe) || pe.Encoding != "ev" || !errors.Is(err, pipeline.ErrCorrupt) {
		t.Errorf("a reader without the encoding: %v", err)
	}
	for _, tc := range []struct {
		name  string
		list  []jetstream.PositionedValue
		field string
	}{
		{"bad name", []jetstream.PositionedValue{evCodec, pipeline.NewPositionedValue("a b", evValue)}, "PositionedValues[1]"},
		{"empty name", []jetstream.PositionedValue{pipeline.NewPositionedValue("", evValue)}, "PositionedValues[0]"},
		{"name taken twice", []jetstream.PositionedValue{evCodec, pipeline.NewPositionedValue("ev", evValue)}, "PositionedValues[1]"},
		{"nil codec", []jetstream.PositionedValue{nil}, "PositionedValues[0]"},
	} {
		bad := cfg
		bad.PositionedValues = tc.list
		var ce *jetstream.ConfigError
		if _, err := jetstream.Open(ctx, connect(t, 0), bad); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v; want a *ConfigError for %s", tc.name, err, tc.field)
		}
	}
}

// Entry and ReadLog return what a subscription delivers, by position.
func TestEntryAndReadLog(t *testing.T) {
	ctx := ctxT(t)
	p, _ := openPositioned(t)
	var pos []uint64
	for i := range 12 {
		c := &jetstream.Commit{}
		for j := range i%4 + 1 {
			c.Writes = append(c.Writes, jetstream.Write{Family: "f", Key: fmt.Appendf(nil, "k%d-%d", i, j), Value: []byte("v"), Blind: true})
		}
		if i%3 == 0 {
			c.Events = append(c.Events, ev(fmt.Sprintf("s%d", i%2), fmt.Sprintf("id%d", i), "T", "d"))
		}
		if i%5 == 0 {
			c.Writes = append(c.Writes, jetstream.Write{Family: "f", Key: []byte("pos"), Value: []byte("x"), Blind: true, AtCommit: "ev"})
		}
		if i == 7 {
			c.Writes = append(c.Writes, jetstream.Write{Family: "f", Key: []byte("k0-0"), Delete: true, Blind: true})
		}
		at, err := p.Commit(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, at)
	}
	subbed := collect(t, p, 0, len(pos))
	same := func(what string, got, want jetstream.Entry) {
		t.Helper()
		if !got.Time.Equal(want.Time) {
			t.Errorf("%s: time %v, want %v", what, got.Time, want.Time)
		}
		got.Time, want.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	start := time.Now()
	for i, at := range pos {
		e, err := p.Entry(ctx, at)
		if err != nil {
			t.Fatalf("Entry %d: %v", at, err)
		}
		same(fmt.Sprint("Entry ", at), e, subbed[i])
	}
	t.Logf("Entry: %v each (mean of %d)", time.Since(start)/time.Duration(len(pos)), len(pos))
	all, err := p.ReadLog(ctx, 0, 100)
	if err != nil || len(all) != len(pos) {
		t.Fatalf("ReadLog(0, 100): %d entries, %v", len(all), err)
	}
	for i := range all {
		same(fmt.Sprint("ReadLog entry ", i), all[i], subbed[i])
	}
	// Paging by position, one entry at a time, as pipeline's ReadLog loop does.
	var paged []jetstream.Entry
	for from := uint64(1); ; {
		es, err := p.ReadLog(ctx, from, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		paged = append(paged, es...)
		from = es[len(es)-1].Position + 1
	}
	if len(paged) != len(pos) {
		t.Errorf("paged ReadLog: %d entries, want %d", len(paged), len(pos))
	}
	// From inside a commit: that commit comes first.
	if es, err := p.ReadLog(ctx, pos[4]-1, 2); err != nil || len(es) != 2 || es[0].Position != pos[4] || es[1].Position != pos[5] {
		t.Errorf("ReadLog from inside commit %d: %v %v", pos[4], es, err)
	}
	// Typed errors.
	if _, err := p.Entry(ctx, 0); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("Entry(0): %v", err)
	}
	if _, err := p.Entry(ctx, pos[3]-1); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("Entry inside a commit: %v", err)
	}
	if _, err := p.Entry(ctx, pos[len(pos)-1]+5); !errors.Is(err, jetstream.ErrPositionUnavailable) || !errors.Is(err, pipeline.ErrNotFound) {
		t.Errorf("Entry past the latest: %v", err)
	}
	if _, err := p.ReadLog(ctx, 1, 0); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("ReadLog limit 0: %v", err)
	}
	if es, err := p.ReadLog(ctx, pos[len(pos)-1]+1, 10); err != nil || len(es) != 0 {
		t.Errorf("ReadLog past the latest: %v %v", es, err)
	}
	if err := p.Truncate(ctx, pos[5]); err != nil {
		t.Fatal(err)
	}
	for _, at := range []uint64{pos[2], pos[5]} {
		if _, err := p.Entry(ctx, at); !errors.Is(err, jetstream.ErrTruncated) {
			t.Errorf("Entry %d after Truncate(%d): %v", at, pos[5], err)
		}
	}
	if _, err := p.ReadLog(ctx, pos[5], 10); !errors.Is(err, jetstream.ErrTruncated) {
		t.Errorf("ReadLog from the truncation point: %v", err)
	}
	if es, err := p.ReadLog(ctx, pos[5]+1, 100); err != nil || len(es) != len(pos)-6 || es[0].Position != pos[6] {
		t.Errorf("ReadLog after the truncation point: %d %v", len(es), err)
	}
	if e, err := p.Entry(ctx, pos[6]); err != nil {
		t.Errorf("Entry after the truncation point: %v", err)
	} else {
		same("Entry after Truncate", e, subbed[6])
	}
}

// An abort marker (a timed-out commit fenced out) reads back as an Aborted entry.
func TestEntryOfAbortMarker(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 1)
	at, err := p.ResolveForTest(ctx, "never-sent")
	if !errors.Is(err, jetstream.ErrTimeout) {
		t.Fatalf("resolve: %d %v", at, err)
	}
	cur, _ := p.Position(ctx)
	e, err := p.Entry(ctx, cur)
	if err != nil || !e.Aborted || e.Position != cur {
		t.Errorf("Entry of the abort marker: %+v %v", e, err)
	}
	if es, err := p.ReadLog(ctx, 0, 10); err != nil || len(es) != 1 || !es[0].Aborted {
		t.Errorf("ReadLog over the abort marker: %+v %v", es, err)
	}
}

// ReadLog's throughput over a longer log, for the report.
func TestReadLogCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	ctx := ctxT(t)
	p, _ := open(t, 3)
	const n = 2000
	var last uint64
	for i := range n {
		var err error
		last, err = p.Commit(ctx, &jetstream.Commit{
			Writes: []jetstream.Write{{Family: "f", Key: fmt.Appendf(nil, "k%d", i%50), Value: []byte("0123456789"), Blind: true}},
			Events: []jetstream.Event{ev("s", "", "T", "payload")},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	got := 0
	for from := uint64(1); ; {
		es, err := p.ReadLog(ctx, from, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		got += len(es)
		from = es[len(es)-1].Position + 1
	}
	if got != n {
		t.Fatalf("read %d of %d (last %d)", got, n, last)
	}
	el := time.Since(start)
	start = time.Now()
	for i := range 200 {
		if _, err := p.Entry(ctx, uint64(3*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("ReadLog of %d commits (3 messages each) in pages of 500: %v (%.0f commits/s); Entry: %v each", n, el, float64(n)/el.Seconds(), time.Since(start)/200)
	_ = context.Background
}

// TestWaitForPosition: waiting for a position not yet committed returns once a commit
// reaches it, and ends with the context's error when none does.
func TestWaitForPosition(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	cur, err := p.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForPosition(ctx, cur); err != nil {
		t.Fatalf("WaitForPosition(current) = %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := p.WaitForPosition(short, cur+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForPosition past the end with nothing committed = %v, want the deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.WaitForPosition(ctx, cur+1) }()
	pos, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v"), Blind: true}}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitForPosition(%d) after a commit at %d = %v", cur+1, pos, err)
		}
	case <-ctx.Done():
		t.Fatal("WaitForPosition did not return after the commit")
	}
}

// evCodecType is evValue as a codec type of its own, under evCodec's name.
type evCodecType struct{}

func (evCodecType) Name() string { return "ev" }

func (evCodecType) Append(dst []byte, pos uint64, payload []byte) []byte {
	return evValue(dst, pos, payload)
}

// TestPositionedCodecByName: through a *pipeline.DB, the engine finds a PutAtCommit's
// codec by its name, whatever value carries it, and refuses a name the partition does
// not configure; the event store's codec is there without configuring it.
func TestPositionedCodecByName(t *testing.T) {
	ctx := ctxT(t)
	n := streamSeq.Add(1)
	pc := jetstream.Config{Stream: fmt.Sprintf("RL_codec_%d", n), Subject: fmt.Sprintf("rl.codec.%d", n),
		PositionedValues: []jetstream.PositionedValue{evCodec}}
	db, err := jetstream.OpenDB(ctx, connect(t, 0), pc, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cf, err := db.LayerFamily("codec")
	if err != nil {
		t.Fatal(err)
	}
	pos, err := db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
		if err := tx.PutAtCommit(cf, []byte("a"), []byte("pa"), evCodecType{}); err != nil {
			return err
		}
		return tx.PutAtCommit(cf, []byte("b"), []byte("pb"), pipeline.NewPositionedValue("rockline.event", evValue))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *pipeline.Txn) error {
		for k, payload := range map[string]string{"a": "pa", "b": "pb"} {
			v, err := tx.Get(cf, []byte(k))
			if err != nil {
				return err
			}
			if want := evValue(nil, pos, []byte(payload)); string(v) != string(want) {
				t.Errorf("%s = %x, want %x", k, v, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tx := db.Begin()
	defer tx.Discard()
	if err := tx.PutAtCommit(cf, []byte("c"), nil, pipeline.NewPositionedValue("nope", evValue)); !errors.Is(err, pipeline.ErrInvalidArgument) {
		t.Errorf("PutAtCommit with an unconfigured codec = %v, want an argument error", err)
	}
}
