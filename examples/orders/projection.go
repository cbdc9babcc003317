package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Totals is the projection: orders and their amounts per status, and the revenue of
// paid orders (paid or shipped; cancelling a paid order refunds it).
type Totals struct {
	Count, Sum map[string]int64
	Revenue    int64
}

// previous is the status an event moves an order from (a refund: from paid).
var previous = map[string]string{paid: placed, shipped: paid, cancelled: placed}

func (t *Totals) apply(e pipeline.Event) error {
	var d orderEvent
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return err
	}
	if t.Count == nil {
		t.Count, t.Sum = map[string]int64{}, map[string]int64{}
	}
	from := previous[e.Type]
	if d.Refund {
		from = paid
	}
	if from != "" {
		t.Count[from]--
		t.Sum[from] -= d.Amount
	}
	t.Count[e.Type]++
	t.Sum[e.Type] += d.Amount
	t.Revenue = t.Sum[paid] + t.Sum[shipped]
	return nil
}

// projection keeps Totals, and the log position they include, in a column family.
type projection struct {
	db *pipeline.DB
	cf *pipeline.ColumnFamily
}

func (p *projection) read(tx *pipeline.Txn) (checkpoint uint64, t Totals, err error) {
	if err = p.get(tx, "checkpoint", &checkpoint); err == nil {
		err = p.get(tx, "totals", &t)
	}
	return checkpoint, t, err
}

// handle applies one log entry. Totals and checkpoint commit together and an entry at
// or below the checkpoint is skipped, so every event counts exactly once, even when a
// restarted subscription delivers entries again.
func (p *projection) handle(ctx context.Context, e pipeline.LogEntry) error {
	if len(e.Events) == 0 {
		return nil // fillers, and the projection's own commits
	}
	return p.db.Update(ctx, func(tx *pipeline.Txn) error {
		checkpoint, t, err := p.read(tx)
		if err != nil || e.Position <= checkpoint {
			return err
		}
		for _, ev := range e.Events {
			if err := t.apply(ev.Event); err != nil {
				return err
			}
		}
		if err := p.put(tx, "totals", t); err != nil {
			return err
		}
		return p.put(tx, "checkpoint", e.Position)
	})
}

func (p *projection) get(tx *pipeline.Txn, key string, v any) error {
	data, err := tx.Get(p.cf, []byte(key))
	if errors.Is(err, pipeline.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func (p *projection) put(tx *pipeline.Txn, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Put(p.cf, []byte(key), data)
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
