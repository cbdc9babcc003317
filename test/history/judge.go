package history

import (
	"context"
	"fmt"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// ReadAll reads db's log from its first entry until it holds an entry at upto or
// beyond, asking again (every 50 ms, until ctx ends) when an answer is short, as a
// JetStream replica's may be.
func ReadAll(ctx context.Context, db *pipeline.DB, upto uint64) ([]pipeline.LogEntry, error) {
	var out []pipeline.LogEntry
	from := uint64(1)
	for {
		if n := len(out); n > 0 && out[n-1].Position >= upto || upto == 0 {
			return out, nil
		}
		es, err := db.ReadLog(from, 1000)
		out = append(out, es...)
		if n := len(es); n > 0 {
			from = es[n-1].Position + 1
			continue
		}
		if ctx.Err() != nil {
			return out, fmt.Errorf("history: reading the log: %d entries up to %d of %d by the deadline: %w (last error: %v)", len(out), from-1, upto, ctx.Err(), err)
		}
		retry := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			retry.Stop()
		case <-retry.C:
		}
	}
}

// Delivered is one subscriber's deliveries; Complete says it ran to the end of the
// log (a subscriber of a killed process did not).
type Delivered struct {
	Name     string
	Seen     []Seen
	Complete bool
}

// Judge runs every check on a history that ended with a final read: Check, CheckLog
// on the log read back, CheckPositions through entry, and CheckSubscription on each
// subscriber's deliveries.
func Judge(h History, o Options, log []pipeline.LogEntry, entry func(uint64) (pipeline.LogEntry, error), subs ...Delivered) (Result, error) {
	res := Check(h, o)
	res.Add(CheckLog(h, log)...)
	ps, err := CheckPositions(h, entry)
	res.Add(ps...)
	for _, s := range subs {
		res.Add(CheckSubscription(s.Name, log, s.Seen, s.Complete)...)
	}
	return res, err
}
