// Command orders is a small event-sourced orders service: commands become events on a
// stream per order, appended with expected revisions and guarded by business rules; a
// subscription keeps a projection of order totals, exactly once; a concurrent load
// shows conflicts and stale revisions being handled; the projection is then checked
// against the streams.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

const workers, ordersPerWorker = 4, 50

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "rockline-orders-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	cf, err := db.CreateColumnFamily("projections")
	if err != nil {
		return err
	}
	es, err := eventstore.New(db)
	if err != nil {
		return err
	}
	svc, proj := &service{db: db, es: es}, &projection{db: db, cf: cf}

	// A few commands by hand: the rules at work, then an append with a stale revision.
	for _, cmd := range []string{"place", "ship", "cancel", "pay"} {
		if err := svc.execute(ctx, "demo", cmd, 4200); err == nil {
			fmt.Printf("%s order demo: ok\n", cmd)
		} else if errors.Is(err, ErrRejected) {
			fmt.Println(err)
		} else {
			return err
		}
	}
	_, err = es.Append(ctx, streamName("demo"), eventstore.Revision(0), eventstore.Event{Type: paid})
	if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		return fmt.Errorf("stale append: %v, want a wrong expected version", err)
	}
	fmt.Println("stale append:", err)

	// The projection follows the log from its stored checkpoint.
	var from uint64
	if err := db.View(func(tx *pipeline.Txn) (err error) { from, _, err = proj.read(tx); return err }); err != nil {
		return err
	}
	var live atomic.Bool
	sub, err := db.Subscribe(ctx, from, func(e pipeline.LogEntry) error { return proj.handle(ctx, e) },
		pipeline.OnLive(func(ok bool) {
			fmt.Printf("projection live=%v (subscribed after %d, log at %d)\n", ok, from, db.LastPosition())
			live.Store(ok)
		}))
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := waitFor(ctx, sub, live.Load); err != nil {
		return err
	}

	// Concurrent load: each worker takes its orders through random lifecycles.
	ids := []string{"demo"}
	for n := range workers * ordersPerWorker {
		ids = append(ids, fmt.Sprintf("%03d", n+1))
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range errs {
		wg.Go(func() {
			for _, id := range ids[1+w*ordersPerWorker : 1+(w+1)*ordersPerWorker] {
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

	// Let the projection catch up with every event, then check it against the streams.
	last := db.LastPosition()
	if err := waitFor(ctx, sub, func() bool { return sub.Position() >= last }); err != nil {
		return err
	}
	fmt.Printf("commands: %d committed, %d conflicts retried, %d wrong expected versions, %d refused by rules\n",
		svc.commits.Load(), svc.attempts.Load()-svc.updates.Load(), svc.wrongVersion.Load(), svc.refused.Load())
	var checkpoint uint64
	var got Totals
	if err := db.View(func(tx *pipeline.Txn) (err error) { checkpoint, got, err = proj.read(tx); return err }); err != nil {
		return err
	}
	fmt.Printf("last log position %d, projection checkpoint %d\n", db.LastPosition(), checkpoint)
	want, err := recount(ctx, es, ids)
	if err != nil {
		return err
	}
	match := got.Revenue == want.Revenue
	for _, s := range []string{placed, paid, shipped, cancelled} {
		fmt.Printf("  %-9s %4d orders %10s\n", s, got.Count[s], money(got.Sum[s]))
		match = match && got.Count[s] == want.Count[s] && got.Sum[s] == want.Sum[s]
	}
	fmt.Printf("  revenue %26s\n", money(got.Revenue))
	fmt.Println("projection matches the streams:", match)
	if !match {
		return fmt.Errorf("projection %v, streams %v", got, want)
	}
	if err := sub.Close(); err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	if err := db.Close(); err != nil {
		return err
	}
	fmt.Println("subscription and database closed")
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

// waitFor polls done until it holds, the subscription ends, or ctx expires.
func waitFor(ctx context.Context, sub *pipeline.Subscription, done func() bool) error {
	for !done() {
		select {
		case <-sub.Done():
			return fmt.Errorf("projection stopped: %v", sub.Wait())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func money(cents int64) string { return fmt.Sprintf("$%d.%02d", cents/100, cents%100) }
