package validators

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriter: a Writer writes what it is handed, as a built-in policy writes its
// survivors (positions in order, one batch, entries, stages, fillers on a failed
// write), records nothing for later decisions, and refuses an empty commit by name.
func TestWriter(t *testing.T) {
	a := spec{tag: "a", writes: []string{"k1"}}
	b := spec{tag: "b", reads: []string{"k1"}, writes: []string{"k2"}} // a Writer does not decide
	tests := []struct {
		name       string
		failWrites int
		group      []spec
		want       []outcome
		wantTrace  []string
	}{{
		name:  "positions follow slice order",
		group: []spec{a, b},
		want:  []outcome{{1, nil}, {2, nil}},
		wantTrace: []string{
			"validated a", "validated b", "assign 1+2", "entry a @1", "entry b @2", "write 4",
			"written a", "written b", "publish 1..2",
		},
	}, {
		name:       "a failed write is filled",
		failWrites: 1,
		group:      []spec{a, b},
		want:       []outcome{{0, errWrite}, {0, errWrite}},
		wantTrace: []string{
			"validated a", "validated b", "assign 1+2", "entry a @1", "entry b @2", "write 4 failed",
			"written a", "written b", "filler @1", "filler @2", "write 2", "publish 1..2",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEnv(t)
			e.failWrites = tc.failWrites
			w, err := NewWriter(e.env())
			if err != nil {
				t.Fatal(err)
			}
			reqs := make([]*Request, len(tc.group))
			for i, s := range tc.group {
				reqs[i] = &Request{Ctx: context.Background(), Commit: e.commit(s)}
			}
			w.Write(reqs)
			if diff := cmp.Diff(tc.want, outcomes(reqs), errorsMatch); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTrace, e.trace.take()); diff != "" {
				t.Errorf("trace (-want +got):\n%s", diff)
			}
			// Nothing was recorded: a commit reading k1 below its write is the
			// caller's to refuse, and the Writer writes it.
			late := &Request{Ctx: context.Background(), Commit: e.commit(spec{tag: "late", reads: []string{"k1"}, writes: []string{"k3"}})}
			w.Write([]*Request{late})
			if late.Err != nil || late.Pos != 3 {
				t.Errorf("a later write = %d, %v; want 3, nil", late.Pos, late.Err)
			}
		})
	}

	t.Run("an empty commit is refused, the rest written", func(t *testing.T) {
		e := newFakeEnv(t)
		w, err := NewWriter(e.env())
		if err != nil {
			t.Fatal(err)
		}
		empty := &Request{Ctx: context.Background(), Commit: e.commit(spec{tag: "empty"})}
		full := &Request{Ctx: context.Background(), Commit: e.commit(a)}
		w.Write([]*Request{empty, full})
		if empty.Err == nil || empty.Pos != 0 {
			t.Errorf("empty commit = %d, %v; want an error and no position", empty.Pos, empty.Err)
		}
		if full.Err != nil || full.Pos != 1 {
			t.Errorf("the other commit = %d, %v; want 1, nil", full.Pos, full.Err)
		}
	})

	t.Run("an Env without a write field is refused", func(t *testing.T) {
		env := newFakeEnv(t).env()
		env.Filler = nil
		if _, err := NewWriter(env); !errors.Is(err, ErrInvalidEnv) {
			t.Errorf("NewWriter without Filler: %v, want ErrInvalidEnv", err)
		}
	})

	t.Run("a commit without its Record is refused", func(t *testing.T) {
		e := newFakeEnv(t)
		w, err := NewWriter(e.env())
		if err != nil {
			t.Fatal(err)
		}
		bare := &Request{Ctx: context.Background(), Commit: e.commit(a)}
		bare.Commit.Record = nil
		w.Write([]*Request{bare})
		if !errors.Is(bare.Err, ErrInvalidEnv) || bare.Pos != 0 {
			t.Errorf("a commit without a Record = %d, %v; want ErrInvalidEnv", bare.Pos, bare.Err)
		}
	})
}
