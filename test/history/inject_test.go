package history

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// A real history of the local engine passes the checks, and each defect injected into
// it (as an engine defect would show) is found: the checker is not blind on histories
// of real size and shape.
func TestCheckerFindsInjectedDefects(t *testing.T) {
	db, err := pipeline.Open(t.TempDir(), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := NewRecorder(nil)
	stop := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(stop) })
	Run(stop, Workload{Clients: localClients, Seed: 1, Classify: ClassifyLocal}, rec, func(int) *pipeline.DB { return db })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _, _ := rec.History().Next()
	if err := FinalRead(ctx, db, rec, rec.History().Keys(), id); err != nil {
		t.Fatal(err)
	}
	log, err := ReadAll(ctx, db, db.LastPosition())
	if err != nil {
		t.Fatal(err)
	}

	// finalOf returns the final read's longest list and its op.
	finalOf := func(h History) *Op {
		var best *Op
		for i := range h[len(h)-1].Ops {
			if o := &h[len(h)-1].Ops[i]; best == nil || len(o.Read) > len(best.Read) {
				best = o
			}
		}
		return best
	}
	// okWriter returns the first OK transaction that appended an element of l.
	okWriter := func(h History, l []int64) *Txn {
		for _, t := range h {
			for _, o := range t.Ops {
				if t.Outcome == OK && o.F == FAppend && slices.Contains(l, o.V) && !t.Final {
					return t
				}
			}
		}
		return nil
	}
	cases := []struct {
		name   string
		inject func(h History) []pipeline.LogEntry
		want   string
	}{
		{name: "as recorded", inject: func(History) []pipeline.LogEntry { return log }},
		{name: "an acknowledged append lost", want: LostAppend, inject: func(h History) []pipeline.LogEntry {
			o := finalOf(h)
			o.Read = o.Read[:len(o.Read)-1]
			return log
		}},
		{name: "an element of a failed commit read", want: G1a, inject: func(h History) []pipeline.LogEntry {
			okWriter(h, finalOf(h).Read).Outcome = Failed
			return log
		}},
		{name: "two elements swapped", want: IncompatibleOrder, inject: func(h History) []pipeline.LogEntry {
			o := finalOf(h)
			o.Read[0], o.Read[1] = o.Read[1], o.Read[0]
			return log
		}},
		{name: "a position that is another commit's", want: PositionNotCommit, inject: func(h History) []pipeline.LogEntry {
			w := okWriter(h, finalOf(h).Read)
			w.Pos++
			return log
		}},
		{name: "an entry missing from the log", want: MissingFromLog, inject: func(h History) []pipeline.LogEntry {
			w := okWriter(h, finalOf(h).Read)
			var out []pipeline.LogEntry
			for _, e := range log {
				if e.Position != w.Pos {
					out = append(out, e)
				}
			}
			return out
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := rec.History()
			l := c.inject(h)
			entry := func(pos uint64) (pipeline.LogEntry, error) {
				for _, e := range l {
					if e.Position == pos {
						return e, nil
					}
				}
				return pipeline.LogEntry{}, pipeline.ErrNotFound
			}
			res, err := Judge(h, Options{Realtime: true}, l, entry)
			if err != nil {
				t.Fatal(err)
			}
			kinds := res.Kinds()
			switch {
			case c.want == "" && !res.Valid():
				t.Errorf("the history as recorded: %s: %v", res.Summary(), res.Anomalies)
			case c.want != "" && kinds[c.want] == 0:
				t.Errorf("injected %s: not found (%s)", c.want, res.Summary())
			}
			t.Logf("%d transactions: %s", len(h), res.Summary())
		})
	}
}
