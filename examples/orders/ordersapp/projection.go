package ordersapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Totals is the read model's summary: orders and their amounts per status, and the
// revenue of paid orders (paid or shipped; cancelling a paid order refunds it).
type Totals struct {
	Count, Sum map[string]int64
	Revenue    int64
}

// view is what the read model keeps of one order.
type view struct {
	Status string `json:"status"`
	Amount int64  `json:"amount"`
}

// readModel is an exactly-once projection (eventstore.Store.StartProjection) of the
// order streams into the family "projections": one view per order, learned from the
// recorded events' stream names, and the Totals. The events carry only what happened
// (the amount is in "placed" alone); the projection's state, kept in the same
// transaction as its position, supplies the rest.
type readModel struct{ db *pipeline.DB }

const readModelFamily = "projections"

func (m *readModel) config() eventstore.ProjectionConfig {
	return eventstore.ProjectionConfig{
		Name:           "order-totals",
		Filter:         eventstore.Filter{StreamPrefix: "order-"},
		Handle:         m.handle,
		MaxBatchEvents: 64,
		Owns:           []string{readModelFamily},
	}
}

// handle applies a batch of order events.
func (m *readModel) handle(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
	cf, err := m.db.ColumnFamily(readModelFamily) // looked up each batch: Reset re-creates it
	if err != nil {
		return err
	}
	var t Totals
	if err := get(tx, cf, "totals", &t); err != nil {
		return err
	}
	if t.Count == nil {
		t.Count, t.Sum = map[string]int64{}, map[string]int64{}
	}
	for _, e := range events {
		key := "order/" + strings.TrimPrefix(e.Stream, "order-")
		var o view
		if err := get(tx, cf, key, &o); err != nil {
			return err
		}
		if e.Type == placed {
			var d orderEvent
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return fmt.Errorf("%s revision %d: %w", e.Stream, e.Revision, err)
			}
			o.Amount = d.Amount
		}
		if o.Status != "" {
			t.Count[o.Status]--
			t.Sum[o.Status] -= o.Amount
		}
		o.Status = e.Type
		t.Count[o.Status]++
		t.Sum[o.Status] += o.Amount
		if err := put(tx, cf, key, o); err != nil {
			return err
		}
	}
	t.Revenue = t.Sum[paid] + t.Sum[shipped]
	return put(tx, cf, "totals", t)
}

// totals reads the read model's Totals.
func (m *readModel) totals() (Totals, error) {
	cf, err := m.db.ColumnFamily(readModelFamily)
	if err != nil {
		return Totals{}, err
	}
	var t Totals
	err = m.db.View(func(tx *pipeline.Txn) error { return get(tx, cf, "totals", &t) })
	return t, err
}

func get(tx *pipeline.Txn, cf *pipeline.ColumnFamily, key string, v any) error {
	data, err := tx.Get(cf, []byte(key))
	if errors.Is(err, pipeline.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func put(tx *pipeline.Txn, cf *pipeline.ColumnFamily, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Put(cf, []byte(key), data)
}

// recount computes Totals again from each order's final state, as its stream has it.
func recount(ctx context.Context, es *eventstore.Store, ids []string) (Totals, error) {
	t := Totals{Count: map[string]int64{}, Sum: map[string]int64{}}
	for _, id := range ids {
		o, err := loadOrder(ctx, es, id)
		if err != nil {
			return t, err
		}
		t.Count[o.status]++
		t.Sum[o.status] += o.amount
	}
	t.Revenue = t.Sum[paid] + t.Sum[shipped]
	return t, nil
}
