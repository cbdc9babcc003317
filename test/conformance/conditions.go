package conformance

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The event store's stream conditions: a commit conditional on the revision of a
// stream it does not write.

// streamConditionTruthTable: every expectation against an absent stream and a stream
// at revision 1; a condition that holds lets the commit through and leaves its stream
// as it was, one that does not fails with ErrWrongExpectedVersion and the commit,
// discarded, writes nothing. A condition sees the transaction's own appends.
func streamConditionTruthTable(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	if _, err := e.Append(ctx, "cond-two", eventstore.NoStream, ev("two-0", "t"), ev("two-1", "t")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stream   string
		expected eventstore.ExpectedRevision
		holds    bool
	}{
		{"cond-absent", eventstore.Any, true},
		{"cond-absent", eventstore.NoStream, true},
		{"cond-absent", eventstore.StreamExists, false},
		{"cond-absent", eventstore.Revision(0), false},
		{"cond-two", eventstore.Any, true},
		{"cond-two", eventstore.NoStream, false},
		{"cond-two", eventstore.StreamExists, true},
		{"cond-two", eventstore.Revision(1), true},
		{"cond-two", eventstore.Revision(0), false},
		{"cond-two", eventstore.Revision(2), false},
	}
	for i, c := range cases {
		target := fmt.Sprintf("cond-target-%d", i)
		tx, err := e.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = tx.CheckStream(ctx, c.stream, c.expected)
		switch {
		case c.holds && err != nil:
			t.Errorf("%s at %s: %v, want the condition to hold", c.stream, c.expected, err)
		case !c.holds && !errors.Is(err, eventstore.ErrWrongExpectedVersion):
			t.Errorf("%s at %s: %v, want an error matching ErrWrongExpectedVersion", c.stream, c.expected, err)
		}
		if err != nil {
			tx.Discard()
		} else {
			if err := tx.Append(ctx, target, eventstore.NoStream, ev(target, "t")); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Errorf("%s at %s: commit: %v", c.stream, c.expected, err)
			}
		}
		got, err := e.ReadStream(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[c.holds]; len(got) != want {
			t.Errorf("%s at %s: the appended stream holds %d events, want %d", c.stream, c.expected, len(got), want)
		}
	}
	for stream, want := range map[string]int{"cond-absent": 0, "cond-two": 2} {
		got, err := e.ReadStream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Errorf("condition stream %s holds %d events after being checked, want %d", stream, len(got), want)
		}
	}
	// The transaction's own append counts.
	tx, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Discard()
	if err := tx.Append(ctx, "cond-own", eventstore.NoStream, ev("own-0", "t")); err != nil {
		t.Fatal(err)
	}
	if err := tx.CheckStream(ctx, "cond-own", eventstore.Revision(0)); err != nil {
		t.Errorf("a condition on a stream the transaction appended to: %v, want it to see the append", err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// streamConditionConflicts: a commit conditional on a stream fails with ErrConflict,
// writing nothing, when another commit appends to that stream after the transaction
// read it; appends to other streams do not disturb it.
func streamConditionConflicts(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	if _, err := e.Append(ctx, "course", eventstore.NoStream, ev("c-0", "t")); err != nil {
		t.Fatal(err)
	}
	for _, moved := range []bool{true, false} {
		enrol := fmt.Sprintf("enrol-%v", moved)
		tx, err := e.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.ReadStream(ctx, "course")
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.CheckStream(ctx, "course", eventstore.Revision(uint64(len(got)-1))); err != nil {
			t.Fatal(err)
		}
		if err := tx.Append(ctx, enrol, eventstore.NoStream, ev(enrol, "t")); err != nil {
			t.Fatal(err)
		}
		other := "other"
		if moved {
			other = "course"
		}
		if _, err := e.Append(ctx, other, eventstore.Any, ev(other+"-"+enrol, "t")); err != nil {
			t.Fatal(err)
		}
		_, err = tx.Commit(ctx)
		switch {
		case moved && !errors.Is(err, pipeline.ErrConflict):
			t.Errorf("the condition's stream appended to before the commit: %v, want ErrConflict", err)
		case !moved && err != nil:
			t.Errorf("another stream appended to before the commit: %v, want success", err)
		}
		evs, err := e.ReadStream(ctx, enrol)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[moved]; len(evs) != want {
			t.Errorf("moved %v: the conditional commit's stream holds %d events, want %d", moved, len(evs), want)
		}
	}
}

// streamConditionsRacingAppends: writers append to "course" while others commit
// appends to their own streams conditional on the course's revision they last saw.
// Every conditional commit that succeeded must sit where the course had exactly that
// revision: the course appends acknowledged before its position number the revision
// plus one. A missed conflict shows as a conditional commit after a course append it
// did not see.
func streamConditionsRacingAppends(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	var mu sync.Mutex
	var coursePos []uint64
	type won struct {
		pos uint64
		rev int // the course revision the condition required (-1: no stream)
	}
	var wins []won
	add := func(a, i int) error {
		pos, err := e.Append(ctx, "course", eventstore.Any, ev(fmt.Sprintf("course-%d-%d", a, i), "t"))
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		coursePos = append(coursePos, pos)
		return nil
	}
	try := func(c, i int) error {
		stream := fmt.Sprintf("enrol-%d", c)
		course, err := e.ReadStream(ctx, "course")
		if err != nil {
			return err
		}
		rev, expected := len(course)-1, eventstore.NoStream
		if rev >= 0 {
			expected = eventstore.Revision(uint64(rev))
		}
		tx, err := e.Begin(ctx)
		if err != nil {
			return err
		}
		if err := tx.CheckStream(ctx, "course", expected); err != nil {
			tx.Discard()
			if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
				return errRefused // the course moved between the read and Begin
			}
			return err
		}
		if err := tx.Append(ctx, stream, eventstore.Any, ev(fmt.Sprintf("%s-%d", stream, i), strconv.Itoa(rev))); err != nil {
			tx.Discard()
			return err
		}
		pos, err := tx.Commit(ctx)
		if err == nil {
			mu.Lock()
			wins = append(wins, won{pos: pos, rev: rev})
			mu.Unlock()
		}
		return err
	}
	_, refused, conflicts := conditionRace(t, ctx, add, try)
	if t.Failed() {
		return
	}
	if len(wins) == 0 {
		t.Fatal("no conditional commit succeeded")
	}
	for _, w := range wins {
		before := 0
		for _, p := range coursePos {
			if p < w.pos {
				before++
			}
		}
		if before != w.rev+1 {
			t.Errorf("the commit at %d required the course at revision %d, but %d course appends precede it (revision %d)", w.pos, w.rev, before, before-1)
		}
	}
	t.Logf("%d conditional commits (%d refused by the condition, %d as conflicts) against %d course appends", len(wins), refused, conflicts, len(coursePos))
}

// positionedWriteConflictsWithTrackedRead: a write made at commit (PutAtCommit) is
// not checked, so two transactions putting one key that way both commit; but it is
// a write to the others: a transaction that read the key with tracking before it
// committed fails with ErrConflict. Layers build conditions on this (a marker key
// written at commit by every append it concerns, read with tracking by the append it
// conditions).
func positionedWriteConflictsWithTrackedRead(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	reader, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := reader.Get(ctx, "marks", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := reader.Put("marks", []byte("other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Two transactions put the key at commit, both begun before either commits.
	var txs []Txn
	for range 2 {
		tx, err := e.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.PutAtCommit("marks", []byte("m"), []byte{0}); err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
	}
	for i, tx := range txs {
		if _, err := tx.Commit(ctx); err != nil {
			t.Errorf("positioned writer %d: %v, want both to commit (positioned writes are not checked)", i, err)
		}
	}
	if _, err := reader.Commit(ctx); !errors.Is(err, pipeline.ErrConflict) {
		t.Errorf("a tracked read of a key another commit then put at commit: %v, want ErrConflict", err)
	}
	// A reader that began after the positioned write is not disturbed.
	late, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := late.Get(ctx, "marks", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := late.Put("marks", []byte("other"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Commit(ctx); err != nil {
		t.Errorf("a reader begun after the positioned write: %v, want success", err)
	}
}
