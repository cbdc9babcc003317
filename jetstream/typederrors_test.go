package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
)

// commitOutcome sorts a Commit error by what it says of the commit: written, not
// written, or unknown. An error that says none of these is "untyped".
func commitOutcome(err error) string {
	switch {
	case err == nil:
		return "written"
	case errors.Is(err, jetstream.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(err, jetstream.ErrConflict), errors.Is(err, jetstream.ErrTimeout),
		errors.Is(err, jetstream.ErrNotSent), errors.Is(err, jetstream.ErrRefused),
		errors.Is(err, jetstream.ErrDuplicateEvent), errors.Is(err, jetstream.ErrInvalidArgument),
		errors.Is(err, jetstream.ErrClosed):
		return "not written"
	}
	return "untyped"
}

// Commits racing on one key through all three nodes, with deadlines that end at any
// point of the commit (while publishing, settling a refusal, re-reading to name a
// conflict, backing off after "subject in flight"): every error must say through a
// documented sentinel whether the commit was written, and what it says must be true
// of the log: a commit reported written is there at its position, one reported not
// written is nowhere.
func TestCommitErrorsSayWhetherWritten(t *testing.T) {
	ctx := ctxT(t)
	p0, cfg := open(t, 3)
	parts := []*jetstream.Partition{p0, openOn(t, connect(t, 1), cfg), openOn(t, connect(t, 2), cfg)}
	workers, perWorker := 6, 60
	if testing.Short() {
		perWorker = 20
	}
	type result struct {
		value   string
		pos     uint64
		outcome string
		err     error
	}
	results := make(chan result, workers*perWorker)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			p := parts[w%len(parts)]
			for i := range perWorker {
				value := fmt.Sprintf("w%d-%d", w, i)
				at, err := p.Position(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				it, _, err := p.Get(ctx, "f", []byte("hot"), at)
				if err != nil {
					t.Error(err)
					return
				}
				// Deadlines from none at all to a few milliseconds: some end before
				// the publish, most somewhere inside the commit, some never.
				cctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(4000))*time.Microsecond)
				pos, err := p.Commit(cctx, &jetstream.Commit{
					After:  at,
					Writes: []jetstream.Write{{Family: "f", Key: []byte("hot"), Value: []byte(value), Version: it.Version}},
				})
				cancel()
				results <- result{value, pos, commitOutcome(err), err}
			}
		})
	}
	wg.Wait()
	close(results)

	counts := map[string]int{}
	written := map[string]uint64{}
	var notWritten []string
	for r := range results {
		counts[r.outcome]++
		switch r.outcome {
		case "untyped":
			t.Errorf("commit of %s: untyped error %v", r.value, r.err)
		case "written":
			written[r.value] = r.pos
		case "not written":
			notWritten = append(notWritten, r.value)
		}
	}
	t.Logf("outcomes: %v", counts)
	if counts["written"] == 0 {
		t.Fatal("no commit was written: the deadlines leave no room to test the outcomes")
	}
	head, err := p0.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inLog := map[string]uint64{}
	for from := uint64(1); from <= head; {
		es, err := p0.ReadLog(ctx, from, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			t.Fatalf("the log ends at %d, below its head %d", from, head)
		}
		for _, e := range es {
			for _, w := range e.Writes {
				inLog[string(w.Value)] = e.Position
			}
			from = e.Position + 1
		}
	}
	for v, pos := range written {
		if inLog[v] != pos {
			t.Errorf("commit of %s reported written at %d; the log has it at %d (0: nowhere)", v, pos, inLog[v])
		}
	}
	for _, v := range notWritten {
		if pos, ok := inLog[v]; ok {
			t.Errorf("commit of %s reported not written; the log has it at %d", v, pos)
		}
	}
}
