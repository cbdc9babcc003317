package validators

import (
	"context"
	"errors"
	"testing"
)

// TestMarksRecordedNotChecked: a commit's Marks (keys written at commit, unchecked)
// are recorded as writes, so a later commit that read one with tracking before it
// conflicts, alone or after it in one group; but two commits marking one key both
// commit, and a commit that read the key after the mark does not conflict.
func TestMarksRecordedNotChecked(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			r := newRig(t, policy)
			ctx := context.Background()
			mark := func(readPos uint64) *Commit {
				c := r.commit(t, r.data, readPos, nil, nil)
				c.Marks = []uint64{r.fp.Of(r.data.ID(), []byte("m"))}
				c.HasRecord = true // a positioned write's commit has a record to write
				return c
			}
			for i := range 2 {
				if pos, err := r.v.Commit(ctx, mark(0)); err != nil || pos != uint64(i+1) {
					t.Fatalf("marking commit %d from position 0 = %d, %v; want %d, nil (marks are not checked)", i, pos, err, i+1)
				}
			}
			if _, err := r.v.Commit(ctx, r.commit(t, r.data, 1, []string{"m"}, map[string]string{"x": "1"})); !errors.Is(err, ErrConflict) {
				t.Fatalf("a read of a key marked after the read position: %v; want ErrConflict", err)
			}
			if pos, err := r.v.Commit(ctx, r.commit(t, r.data, 2, []string{"m"}, map[string]string{"x": "2"})); err != nil || pos != 3 {
				t.Fatalf("a read of the key after its last mark = %d, %v; want 3, nil", pos, err)
			}
			reqs := []*Request{
				{Ctx: ctx, Commit: mark(3)},
				{Ctx: ctx, Commit: r.commit(t, r.data, 3, []string{"m"}, map[string]string{"y": "3"})},
			}
			r.v.CommitGroup(reqs)
			if reqs[0].Err != nil || !errors.Is(reqs[1].Err, ErrConflict) {
				t.Fatalf("a group of a mark then a read of the marked key: %v, %v; want nil, ErrConflict", reqs[0].Err, reqs[1].Err)
			}
		})
	}
}
