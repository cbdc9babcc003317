package eventstore_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// TestAppendIfConditions: AppendIf commits only when every condition holds, reports
// the first that does not as a *ConditionFailedError naming it (its index, the
// condition, the stream's actual state), writes nothing then, and never writes to a
// condition's stream. Soft-deleted streams read as no stream; a tombstoned one meets
// only Any.
func TestAppendIfConditions(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "course-1", 2) // at revision 1
	seedStream(t, es, "gone", 1)
	if _, err := es.DeleteStream(ctx, "gone", eventstore.Any); err != nil {
		t.Fatal(err)
	}
	seedStream(t, es, "tomb", 1)
	if _, err := es.TombstoneStream(ctx, "tomb", eventstore.Any); err != nil {
		t.Fatal(err)
	}
	at := eventstore.StreamAt
	cases := []struct {
		name   string
		conds  []eventstore.Condition
		failAt int // -1: the append commits
		actual eventstore.ExpectedRevision
		reason error
	}{
		{"none", nil, -1, eventstore.Any, nil},
		{"exact", []eventstore.Condition{at("course-1", eventstore.Revision(1))}, -1, eventstore.Any, nil},
		{"exists and absent", []eventstore.Condition{at("course-1", eventstore.StreamExists), at("user-ada", eventstore.NoStream)}, -1, eventstore.Any, nil},
		{"stale revision", []eventstore.Condition{at("user-ada", eventstore.NoStream), at("course-1", eventstore.Revision(0))}, 1, eventstore.Revision(1), eventstore.ErrWrongExpectedVersion},
		{"absent expected to exist", []eventstore.Condition{at("user-ada", eventstore.StreamExists)}, 0, eventstore.NoStream, eventstore.ErrWrongExpectedVersion},
		{"soft-deleted reads as no stream", []eventstore.Condition{at("gone", eventstore.NoStream)}, -1, eventstore.Any, nil},
		{"soft-deleted does not exist", []eventstore.Condition{at("gone", eventstore.StreamExists)}, 0, eventstore.NoStream, eventstore.ErrWrongExpectedVersion},
		{"tombstoned meets Any", []eventstore.Condition{at("tomb", eventstore.Any)}, -1, eventstore.Any, nil},
		{"tombstoned meets nothing else", []eventstore.Condition{at("tomb", eventstore.NoStream)}, 0, eventstore.Any, eventstore.ErrStreamDeleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := "enrol-" + c.name
			res, err := es.AppendIf(ctx, target, eventstore.NoStream, c.conds, pipeline.Event{Type: "Enrolled"})
			if c.failAt < 0 {
				if err != nil {
					t.Fatalf("AppendIf: %v", err)
				}
				if got := len(streamEvents(t, es, target)); got != 1 || res.Position == 0 {
					t.Errorf("appended stream holds %d events (position %d), want 1", got, res.Position)
				}
				return
			}
			var cf *eventstore.ConditionFailedError
			if !errors.As(err, &cf) {
				t.Fatalf("AppendIf: %v, want a *ConditionFailedError", err)
			}
			if !errors.Is(err, eventstore.ErrConditionFailed) || !errors.Is(err, c.reason) {
				t.Errorf("%v does not match ErrConditionFailed and %v", err, c.reason)
			}
			if cf.Index != c.failAt || cf.Condition != c.conds[c.failAt] {
				t.Errorf("failed condition %d (%v), want %d (%v)", cf.Index, cf.Condition, c.failAt, c.conds[c.failAt])
			}
			var wrong *eventstore.WrongExpectedVersionError
			if errors.As(err, &wrong) && wrong.Actual != c.actual {
				t.Errorf("actual %v, want %v", wrong.Actual, c.actual)
			}
			if got := len(streamEvents(t, es, target)); got != 0 {
				t.Errorf("a failed condition left %d events", got)
			}
		})
	}
	if got := len(streamEvents(t, es, "course-1")); got != 2 {
		t.Errorf("condition stream holds %d events, want the 2 seeded", got)
	}
	if got := len(streamEvents(t, es, "user-ada")); got != 0 {
		t.Errorf("an absent condition stream reads %d events", got)
	}
}

// TestAppendIfBadInput: a malformed condition is an *ArgumentError naming it, and
// nothing is written.
func TestAppendIfBadInput(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	cases := []struct {
		name  string
		conds []eventstore.Condition
		arg   string
	}{
		{"zero condition", []eventstore.Condition{{}}, "conditions[0]"},
		{"empty stream", []eventstore.Condition{eventstore.StreamAt("ok", eventstore.Any), eventstore.StreamAt("", eventstore.NoStream)}, "conditions[1].stream"},
		{"zero expectation", []eventstore.Condition{eventstore.StreamAt("s", eventstore.ExpectedRevision{})}, "conditions[0]"},
	}
	for _, c := range cases {
		_, err := es.AppendIf(ctx, "target", eventstore.Any, c.conds, pipeline.Event{Type: "E"})
		wantArgumentError(t, c.name, err, c.arg)
		tx := es.DB().Begin()
		wantArgumentError(t, c.name+" (Require)", es.Require(tx, c.conds...), c.arg)
		tx.Discard()
	}
	if got := len(streamEvents(t, es, "target")); got != 0 {
		t.Errorf("bad conditions left %d events", got)
	}
}

// TestAppendIfRetryIgnoresConditions: an idempotent retry (same event IDs, same
// expectation) of an append that committed returns the original result even though
// its condition no longer holds: it held when the append committed.
func TestAppendIfRetryIgnoresConditions(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	conds := []eventstore.Condition{eventstore.StreamAt("username-ada", eventstore.NoStream)}
	ev := pipeline.Event{ID: "register-ada", Type: "Registered"}
	first, err := es.AppendIf(ctx, "user-1", eventstore.NoStream, conds, ev)
	if err != nil {
		t.Fatal(err)
	}
	seedStream(t, es, "username-ada", 1)
	again, err := es.AppendIf(ctx, "user-1", eventstore.NoStream, conds, ev)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("retry result differs (-first +retry):\n%s", diff)
	}
	// A new append under the same condition fails now.
	_, err = es.AppendIf(ctx, "user-2", eventstore.NoStream, conds, pipeline.Event{ID: "register-ada-2", Type: "Registered"})
	if !errors.Is(err, eventstore.ErrConditionFailed) {
		t.Errorf("a new append under a condition that no longer holds: %v, want ErrConditionFailed", err)
	}
}

// TestAppendIfUniqueUsername: the unique-username case. Concurrent registrations of
// one name, each appending to its own user stream and claiming the name's stream in
// the same commit, on the condition that the name is unclaimed: exactly one wins; the
// others fail with a *ConditionFailedError (after AppendIf's retry) or the claim's
// own WrongExpectedVersion, and leave nothing behind.
func TestAppendIfUniqueUsername(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			user := "user-" + string(rune('a'+i))
			_, errs[i] = db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
				if err := es.Require(tx, eventstore.StreamAt("username-ada", eventstore.NoStream)); err != nil {
					return err
				}
				if err := es.AppendTxn(tx, user, eventstore.NoStream, pipeline.Event{Type: "Registered", Data: []byte("ada")}); err != nil {
					return err
				}
				return es.AppendTxn(tx, "username-ada", eventstore.NoStream, pipeline.Event{Type: "Claimed", Data: []byte(user)})
			})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, eventstore.ErrConditionFailed):
			if got := len(streamEvents(t, es, "user-"+string(rune('a'+i)))); got != 0 {
				t.Errorf("loser %d left %d events", i, got)
			}
		default:
			t.Errorf("registration %d: %v, want success or ErrConditionFailed", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d registrations won, want exactly 1 (%v)", won, errs)
	}
	if got := len(streamEvents(t, es, "username-ada")); got != 1 {
		t.Errorf("the name's stream holds %d claims, want 1", got)
	}
}
