package eventstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// TestIdempotentRetryWaitsForPublication: appends racing with the same event IDs, all
// expecting NoStream, succeed with the one commit's position, and every one of them,
// the retries found already appended included, returns only once that position is
// published: LastPosition has reached it and its entry reads at once.
func TestIdempotentRetryWaitsForPublication(t *testing.T) {
	const appenders = 4
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, es, _ := openStore(t, pipeline.Config{Validation: pol})
			for round := range rounds {
				if ctx.Err() != nil {
					t.Fatalf("round %d: deadline of %v passed", round, deadline)
				}
				stream := fmt.Sprintf("s-%d", round)
				ev := eventstore.Event{ID: "id-" + stream, Type: "t"}
				var wg sync.WaitGroup
				errs := make([]error, appenders)
				pos := make([]uint64, appenders)
				for i := range appenders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := es.Append(ctx, stream, eventstore.NoStream, ev)
						if err != nil {
							errs[i] = err
							return
						}
						pos[i] = res.Position
						// Checked at once, before any other appender can publish it.
						if last := db.LastPosition(); last < res.Position {
							errs[i] = fmt.Errorf("returned position %d, LastPosition is %d", res.Position, last)
							return
						}
						if _, err := db.Entry(res.Position); err != nil {
							errs[i] = fmt.Errorf("Entry(%d) right after Append returned it: %w", res.Position, err)
						}
					}()
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d, appender %d: %v", round, i, err)
					}
					if pos[i] != pos[0] {
						t.Fatalf("round %d: positions %v, want one commit's", round, pos)
					}
				}
			}
		})
	}
}
