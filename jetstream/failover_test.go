package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
)

// Writers on all three servers commit while the stream leader steps down twice: every
// commit returns a position or a typed error, and the log holds exactly the
// acknowledged commits, each once, in order.
func TestLeaderStepDownUnderLoad(t *testing.T) {
	ctx := ctxT(t)
	p0, cfg := open(t, 3)
	const writers, perWriter = 3, 150
	var mu sync.Mutex
	acked := map[uint64]string{}
	var failed []error
	var longest time.Duration
	parts := make([]*jetstream.Partition, writers)
	var wg sync.WaitGroup
	progress := make(chan struct{}, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			wcfg := cfg
			wcfg.PublishTimeout = time.Second
			p := openOn(t, connect(t, w), wcfg)
			parts[w] = p
			var version uint64
			key := fmt.Appendf(nil, "w%d", w)
			for i := range perWriter {
				start := time.Now()
				pos, err := p.Commit(ctx, &jetstream.Commit{
					Writes: []jetstream.Write{{Family: "f", Key: key, Value: fmt.Appendf(nil, "%d", i), Version: version}},
					Events: []jetstream.Event{ev(string(key), fmt.Sprintf("w%d-%d", w, i), "E", "")},
				})
				mu.Lock()
				longest = max(longest, time.Since(start))
				if err != nil {
					failed = append(failed, err)
				} else {
					acked[pos] = fmt.Sprintf("w%d-%d", w, i)
				}
				mu.Unlock()
				if err == nil {
					version = pos - 1
				} else {
					it, _, gerr := p.Get(ctx, "f", key, mustPosition(t, p))
					if gerr != nil {
						t.Error(gerr)
						return
					}
					version = it.Version
				}
				progress <- struct{}{}
			}
		})
	}
	nc := connect(t, 0)
	for _, after := range []int{100, 250} {
		for range after - (len(progress) - 0) {
			select {
			case <-progress:
			case <-ctx.Done():
				t.Fatal("no progress")
			}
		}
		start := time.Now()
		resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+cfg.Stream, nil)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Success bool `json:"success"`
		}
		_ = json.Unmarshal(resp.Data, &r)
		t.Logf("step down after ~%d commits: success=%v in %v", after, r.Success, time.Since(start).Round(time.Millisecond))
	}
	wg.Wait()
	var st jetstream.Stats
	for _, p := range parts {
		s := p.Stats()
		st.Commits += s.Commits
		st.Retried += s.Retried
		st.Timeouts += s.Timeouts
		st.InFlight += s.InFlight
	}
	t.Logf("%d acknowledged, %d failed (%v), longest commit %v; writers' stats %+v", len(acked), len(failed), failed, longest.Round(time.Millisecond), st)
	if len(failed) > 0 {
		t.Errorf("%d commits failed", len(failed))
	}
	got := collect(t, p0, 0, len(acked))
	seen := map[uint64]bool{}
	for _, e := range got {
		if _, ok := acked[e.Position]; !ok && !e.Aborted {
			t.Errorf("log entry at %d was not acknowledged", e.Position)
		}
		if seen[e.Position] {
			t.Errorf("log entry at %d twice", e.Position)
		}
		seen[e.Position] = true
	}
	for pos, what := range acked {
		if !seen[pos] {
			t.Errorf("acknowledged commit %s at %d is not in the log", what, pos)
		}
	}
}

func mustPosition(t *testing.T, p *jetstream.Partition) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pos, err := p.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}
