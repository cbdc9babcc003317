package validators

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// These tests drive both policies through a fake Env (fakeenv_test.go): no RocksDB,
// and every call the validator makes is in the trace they compare. The tests in
// validator_test.go run the same validators over real storage.

// outcome is what a request came back with.
type outcome struct {
	Pos uint64
	Err error
}

func outcomes(reqs []*Request) []outcome {
	out := make([]outcome, len(reqs))
	for i, r := range reqs {
		out[i] = outcome{r.Pos, r.Err}
	}
	return out
}

// errorsMatch compares errors with errors.Is, so a wrapped error matches its sentinel.
var errorsMatch = cmp.Comparer(func(a, b error) bool {
	return errors.Is(a, b) || errors.Is(b, a)
})

func commitOne(t *testing.T, v Validator, e *fakeEnv, s spec) outcome {
	t.Helper()
	pos, err := v.Commit(context.Background(), e.commit(s))
	return outcome{pos, err}
}

// TestEnvConflicts: after a commit wrote x at position 1, a commit that read at 0 and
// then wrote or read x conflicts, and one that read at 1, or touched other keys, does
// not. A losing commit is assigned nothing and writes nothing.
func TestEnvConflicts(t *testing.T) {
	committed := func(c string) []string {
		return []string{"validated " + c, "assign 2+1", "entry " + c + " @2", "write 2", "written " + c, "publish 2..2"}
	}
	tests := []struct {
		name      string
		s         spec
		cancelled bool
		want      outcome
		wantTrace []string
	}{
		{"write-write", spec{tag: "c", writes: []string{"x"}}, false, outcome{0, ErrConflict}, nil},
		{"read-write", spec{tag: "c", reads: []string{"x"}, writes: []string{"y"}}, false, outcome{0, ErrConflict}, nil},
		{"read at the write", spec{tag: "c", readPos: 1, reads: []string{"x"}, writes: []string{"x"}}, false, outcome{2, nil}, committed("c")},
		{"other keys", spec{tag: "c", reads: []string{"z"}, writes: []string{"y"}}, false, outcome{2, nil}, committed("c")},
		{"context ended", spec{tag: "c", writes: []string{"y"}}, true, outcome{0, context.Canceled}, nil},
		{"tracked reads only: empty, not validated", spec{tag: "c", reads: []string{"x"}}, false, outcome{0, nil}, nil},
	}
	for _, policy := range policies {
		for _, tc := range tests {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				e := newFakeEnv(t)
				v := e.validator(policy)
				if got := commitOne(t, v, e, spec{tag: "w", writes: []string{"x"}}); got != (outcome{1, nil}) {
					t.Fatalf("first commit = %+v", got)
				}
				e.trace.take()
				ctx := context.Background()
				if tc.cancelled {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					cancel()
				}
				pos, err := v.Commit(ctx, e.commit(tc.s))
				if diff := cmp.Diff(tc.want, outcome{pos, err}, errorsMatch); diff != "" {
					t.Errorf("outcome (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantTrace, e.trace.take()); diff != "" {
					t.Errorf("trace (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestEnvTxnTooOld: once the table is pruned past a transaction's read position it
// cannot be validated and gets ErrTxnTooOld, never a missed conflict; pruning stops
// at the oldest open reader, so an open transaction keeps what it needs.
func TestEnvTxnTooOld(t *testing.T) {
	tests := []struct {
		name       string
		openReader bool // a transaction at read position 0 stays open
		want       error
	}{
		{"nothing open below the prune", false, ErrTxnTooOld},
		{"an open reader holds the table", true, nil},
	}
	for _, policy := range policies {
		for _, tc := range tests {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				e := newFakeEnv(t)
				v := e.validator(policy)
				if tc.openReader {
					defer e.pos.release(e.pos.acquire())
				}
				// Enough writes to pay for a prune sweep, which runs as the commit returns.
				big := spec{tag: "big"}
				for i := range 4096 {
					big.writes = append(big.writes, fmt.Sprintf("k%d", i))
				}
				if got := commitOne(t, v, e, big); got != (outcome{1, nil}) {
					t.Fatalf("big commit = %+v", got)
				}
				got := commitOne(t, v, e, spec{tag: "old", writes: []string{"other"}})
				if !errors.Is(got.Err, tc.want) || (tc.want == nil && got.Err != nil) {
					t.Fatalf("commit at read position 0 = %+v; want error %v", got, tc.want)
				}
			})
		}
	}
}

// TestEnvGroup: a group is validated in slice order and its survivors written as one
// batch at consecutive positions in that order; Observe sees every survivor Validated
// before the write and Written after it; a failed write leaves fillers at exactly the
// positions assigned and publishes them; a lost filler stops the positions.
func TestEnvGroup(t *testing.T) {
	a := spec{tag: "a", writes: []string{"k1"}}
	b := spec{tag: "b", writes: []string{"k2"}}
	c := spec{tag: "c", writes: []string{"k3"}}
	loser := spec{tag: "loser", reads: []string{"k1"}, writes: []string{"k4"}} // reads what a writes
	empty := spec{tag: "empty"}
	tests := []struct {
		name       string
		failWrites int
		failEntry  string
		group      []spec
		want       []outcome
		wantTrace  []string
		next       outcome // a commit after the group
	}{{
		name:  "positions follow slice order",
		group: []spec{a, b, empty, c},
		want:  []outcome{{1, nil}, {2, nil}, {0, nil}, {3, nil}},
		wantTrace: []string{
			"validated a", "validated b", "validated c", "assign 1+3",
			"entry a @1", "entry b @2", "entry c @3", "write 6",
			"written a", "written b", "written c", "publish 1..3",
		},
		next: outcome{4, nil},
	}, {
		name:  "a loser takes no position",
		group: []spec{a, loser, c},
		want:  []outcome{{1, nil}, {0, ErrConflict}, {2, nil}},
		wantTrace: []string{
			"validated a", "validated c", "assign 1+2", "entry a @1", "entry c @2", "write 4",
			"written a", "written c", "publish 1..2",
		},
		next: outcome{3, nil},
	}, {
		name:       "a failed write is filled",
		failWrites: 1,
		group:      []spec{a, b, c},
		want:       []outcome{{0, errWrite}, {0, errWrite}, {0, errWrite}},
		wantTrace: []string{
			"validated a", "validated b", "validated c", "assign 1+3",
			"entry a @1", "entry b @2", "entry c @3", "write 6 failed",
			"written a", "written b", "written c",
			"filler @1", "filler @2", "filler @3", "write 3", "publish 1..3",
		},
		next: outcome{4, nil},
	}, {
		name:      "a failed entry fails the group, filled",
		failEntry: "b",
		group:     []spec{a, b, c},
		want:      []outcome{{0, errEntry}, {0, errEntry}, {0, errEntry}},
		wantTrace: []string{
			"validated a", "validated b", "validated c", "assign 1+3",
			"entry a @1", "entry b @2", "written a", "written b", "written c",
			"filler @1", "filler @2", "filler @3", "write 3", "publish 1..3",
		},
		next: outcome{4, nil},
	}, {
		name:       "a lost filler stops",
		failWrites: 2,
		group:      []spec{a, b},
		want:       []outcome{{0, errWrite}, {0, errWrite}},
		wantTrace: []string{
			"validated a", "validated b", "assign 1+2", "entry a @1", "entry b @2", "write 4 failed",
			"written a", "written b", "filler @1", "filler @2", "write 2 failed", "stop 1",
		},
		next: outcome{0, ErrStopped},
	}}
	for _, policy := range policies {
		for _, tc := range tests {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				e := newFakeEnv(t)
				e.failWrites, e.failEntry = tc.failWrites, tc.failEntry
				v := e.validator(policy)
				reqs := make([]*Request, len(tc.group))
				for i, s := range tc.group {
					reqs[i] = &Request{Ctx: context.Background(), Commit: e.commit(s)}
				}
				v.CommitGroup(reqs)
				if diff := cmp.Diff(tc.want, outcomes(reqs), errorsMatch); diff != "" {
					t.Errorf("outcomes (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantTrace, e.trace.take()); diff != "" {
					t.Errorf("trace (-want +got):\n%s", diff)
				}
				got := commitOne(t, v, e, spec{tag: "next", readPos: e.pos.Published(), writes: []string{"k9"}})
				if diff := cmp.Diff(tc.next, got, errorsMatch); diff != "" {
					t.Errorf("next commit (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestEnvChecksSeeTheGroup: a Check reads the committed state through Env.Read plus
// the writes of the members validated before its commit in the same group.
func TestEnvChecksSeeTheGroup(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			e := newFakeEnv(t)
			e.committed["balance"] = "0"
			var mu sync.Mutex
			seen := map[string]string{}
			check := func(_ context.Context, c *Commit, v View) error {
				val, err := v.Get(e.data, []byte("balance"))
				if err != nil {
					return err
				}
				mu.Lock()
				seen[tag(c)] = string(val)
				mu.Unlock()
				return nil
			}
			v := e.validator(policy, check)
			reqs := []*Request{
				{Ctx: context.Background(), Commit: e.commit(spec{tag: "first", writes: []string{"balance"}})},
				{Ctx: context.Background(), Commit: e.commit(spec{tag: "second", writes: []string{"other"}})},
			}
			v.CommitGroup(reqs)
			if diff := cmp.Diff([]outcome{{1, nil}, {2, nil}}, outcomes(reqs), errorsMatch); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"first": "0", "second": "v"}, seen); diff != "" {
				t.Errorf("what the checks read (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnvConcurrentGroupsCompleteInOrder: groups from several goroutines (lanes) go
// through one writer queue: the fake positions see one assignment open at a time,
// every position is handed out once, and each group's commits get consecutive
// positions in slice order.
func TestEnvConcurrentGroupsCompleteInOrder(t *testing.T) {
	const callers, groups, perGroup = 4, 50, 3
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			e := newFakeEnv(t)
			v := e.validator(policy)
			results := make([][]uint64, callers*groups)
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					for g := range groups {
						reqs := make([]*Request, perGroup)
						for i := range reqs {
							s := spec{tag: fmt.Sprintf("%d/%d/%d", c, g, i), writes: []string{fmt.Sprintf("k%d/%d/%d", c, g, i)}}
							reqs[i] = &Request{Ctx: context.Background(), Commit: e.commit(s)}
						}
						v.CommitGroup(reqs)
						for i, r := range reqs {
							if r.Err != nil {
								t.Errorf("request %d/%d/%d: %v", c, g, i, r.Err)
							}
							results[c*groups+g] = append(results[c*groups+g], r.Pos)
						}
					}
				})
			}
			wg.Wait()
			var all []uint64
			for _, ps := range results {
				for i := 1; i < len(ps); i++ {
					if ps[i] != ps[0]+uint64(i) {
						t.Fatalf("a group's positions %v are not consecutive in slice order", ps)
					}
				}
				all = append(all, ps...)
			}
			want := make([]uint64, callers*groups*perGroup)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			if diff := cmp.Diff(want, all, cmpopts.SortSlices(func(a, b uint64) bool { return a < b })); diff != "" {
				t.Errorf("positions handed out (-want +got):\n%s", diff)
			}
			if got := e.pos.Published(); got != uint64(len(want)) {
				t.Errorf("published %d; want %d", got, len(want))
			}
		})
	}
}

// TestNewChecksEnv: New refuses an Env without a required field, naming it, and an
// unknown policy.
func TestNewChecksEnv(t *testing.T) {
	noCheck := func(context.Context, *Commit, View) error { return nil }
	tests := []struct {
		name   string
		mutate func(*Env)
		checks []Check
	}{
		{"Positions", func(e *Env) { e.Positions = nil }, nil},
		{"Write", func(e *Env) { e.Write = nil }, nil},
		{"Log", func(e *Env) { e.Log = nil }, nil},
		{"LogKey", func(e *Env) { e.LogKey = nil }, nil},
		{"Filler", func(e *Env) { e.Filler = nil }, nil},
		{"Read", func(e *Env) { e.Read = nil }, []Check{noCheck}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newFakeEnv(t).env()
			tc.mutate(&env)
			for _, policy := range policies {
				if _, err := New(policy, env, Options{Checks: tc.checks}); !errors.Is(err, ErrInvalidEnv) {
					t.Errorf("%s: New without Env.%s = %v; want ErrInvalidEnv", policy, tc.name, err)
				}
			}
		})
	}
	env := newFakeEnv(t).env()
	env.Read = nil // optional without checks
	if _, err := New(Parallel, env, Options{}); err != nil {
		t.Errorf("New without the optional fields = %v", err)
	}
	if _, err := New("fastest", env, Options{}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("New with an unknown policy = %v; want ErrInvalidPolicy", err)
	}
}

// TestEnvDenseWatermarkEvery: a group carries the dense watermark (a third write
// beside a 1-key commit's data and entry) only once the published position moved
// denseEvery past the last one written, and then with the published position.
func TestEnvDenseWatermarkEvery(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			e := newFakeEnv(t)
			v := e.validator(policy)
			var withDense []uint64 // positions of the commits whose write carried it
			for i := range 2*denseEvery + 10 {
				pos := commitOne(t, v, e, spec{tag: "c", writes: []string{fmt.Sprint("k", i)}}).Pos
				for _, ev := range e.trace.take() {
					if ev == "write 3" {
						withDense = append(withDense, pos)
					}
				}
			}
			// Position p is assigned with p-1 published: the first is due at 1,025.
			want := []uint64{denseEvery + 1, 2*denseEvery + 1}
			if diff := cmp.Diff(want, withDense); diff != "" {
				t.Errorf("commits that wrote the dense watermark (-want +got):\n%s", diff)
			}
		})
	}
}
