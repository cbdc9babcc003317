package ordersapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Workers and OrdersPerWorker size Run's concurrent load.
const Workers, OrdersPerWorker = 4, 50

// Run runs the orders service's demonstration on db, on whichever engine it is: a few
// commands by hand (the rules at work, a stale append refused), a concurrent load of
// Workers x OrdersPerWorker orders through random lifecycles, and an exactly-once
// projection whose read model is then checked against the streams. It writes what it
// does to out and returns an error if anything does not hold. db stays open.
func Run(ctx context.Context, db *pipeline.DB, out io.Writer) error {
	if _, err := db.EnsureColumnFamily(readModelFamily); err != nil {
		return err
	}
	es, err := eventstore.New(db)
	if err != nil {
		return err
	}
	svc, model := &service{db: db, es: es}, &readModel{db: db}

	// A few commands by hand: the rules at work, then an append with a stale revision.
	for _, cmd := range []string{"place", "ship", "cancel", "pay"} {
		if err := svc.execute(ctx, "demo", cmd, 4200); err == nil {
			fmt.Fprintf(out, "%s order demo: ok\n", cmd)
		} else if errors.Is(err, ErrRejected) {
			fmt.Fprintln(out, err)
		} else {
			return err
		}
	}
	_, err = es.Append(ctx, streamName("demo"), eventstore.Revision(0), eventstore.Event{Type: paid})
	if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		return fmt.Errorf("stale append: %v, want a wrong expected version", err)
	}
	fmt.Fprintln(out, "stale append:", err)

	// The projection follows the log from its stored position, in its own goroutine.
	proj, err := es.StartProjection(ctx, model.config())
	if err != nil {
		return err
	}
	defer proj.Close()

	// Concurrent load: each worker takes its orders through random lifecycles.
	ids := []string{"demo"}
	for n := range Workers * OrdersPerWorker {
		ids = append(ids, fmt.Sprintf("%03d", n+1))
	}
	var wg sync.WaitGroup
	errs := make([]error, Workers)
	for w := range errs {
		wg.Go(func() {
			for _, id := range ids[1+w*OrdersPerWorker : 1+(w+1)*OrdersPerWorker] {
				if errs[w] = lifecycle(ctx, svc, id); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// Wait until the read model reflects every event, then check it against the streams.
	last := db.LastPosition()
	if err := proj.CaughtUp(ctx, last); err != nil {
		return err
	}
	fmt.Fprintf(out, "commands: %d committed, %d conflicts retried, %d wrong expected versions, %d refused by rules\n",
		svc.commits.Load(), svc.attempts.Load()-svc.updates.Load(), svc.wrongVersion.Load(), svc.refused.Load())
	got, err := model.totals()
	if err != nil {
		return err
	}
	st := proj.Status()
	fmt.Fprintf(out, "last log position %d, projection %q at %d (%s, lag %d)\n", db.LastPosition(), st.Name, st.Position, st.State, st.Lag)
	want, err := recount(ctx, es, ids)
	if err != nil {
		return err
	}
	match := got.Revenue == want.Revenue
	for _, s := range []string{placed, paid, shipped, cancelled} {
		fmt.Fprintf(out, "  %-9s %4d orders %10s\n", s, got.Count[s], money(got.Sum[s]))
		match = match && got.Count[s] == want.Count[s] && got.Sum[s] == want.Sum[s]
	}
	fmt.Fprintf(out, "  revenue %26s\n", money(got.Revenue))
	fmt.Fprintln(out, "projection matches the streams:", match)
	if !match {
		return fmt.Errorf("projection %v, streams %v", got, want)
	}
	if err := proj.Close(); err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	fmt.Fprintln(out, "projection closed")
	return nil
}

// lifecycle places an order and takes it down a random valid path. One order in five
// is paid, then shipped and cancelled at the same time: one of the two must win, and
// a rule must refuse the other once it sees the winner's event.
func lifecycle(ctx context.Context, svc *service, id string) error {
	if err := svc.execute(ctx, id, "place", 500+rand.Int64N(50000)); err != nil {
		return err
	}
	if rand.IntN(5) > 0 {
		paths := [][]string{{"pay", "ship"}, {"pay", "ship"}, {"pay", "cancel"}, {"cancel"}, {"pay"}, {}}
		for _, cmd := range paths[rand.IntN(len(paths))] {
			if err := svc.execute(ctx, id, cmd, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if err := svc.execute(ctx, id, "pay", 0); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, cmd := range []string{"ship", "cancel"} {
		wg.Go(func() { errs[i] = svc.execute(ctx, id, cmd, 0) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), ErrRejected) {
		return fmt.Errorf("order %s shipped and cancelled at once: got %v and %v, want one rejected", id, errs[0], errs[1])
	}
	return nil
}

func money(cents int64) string { return fmt.Sprintf("$%d.%02d", cents/100, cents%100) }
