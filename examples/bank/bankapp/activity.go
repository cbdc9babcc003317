package bankapp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"go.uber.org/fx"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// ActivityFamily holds the activity read model: one JSON AccountActivity per account.
const ActivityFamily = "activity"

// Event types the bank records on each account's stream, "account-<id>".
const (
	EventOpened   = "AccountOpened"
	EventDebited  = "Debited"
	EventCredited = "Credited"
)

// moneyEvent is the data of the bank's events.
type moneyEvent struct {
	Amount int64  `json:"amount"`
	Other  string `json:"other,omitempty"` // the transfer's other account
}

// AccountActivity is the read model of one account: transfers out and in, and the money
// sent and received. Position is the log position the read model had reached.
type AccountActivity struct {
	ID       string `json:"id"`
	Out      int64  `json:"transfers_out"`
	In       int64  `json:"transfers_in"`
	Sent     int64  `json:"sent"`
	Received int64  `json:"received"`
	Position uint64 `json:"position"`
}

// Activity keeps the activity read model with an exactly-once projection of the
// accounts' streams (eventstore.Store.StartProjection): the read model and the
// projection's position commit together, so it survives any crash without double
// counting. Its goroutine belongs to the projection and ends with Close.
type Activity struct {
	db *pipeline.DB
	p  *eventstore.Projection
}

// StartActivity starts the projection (resuming after its stored position).
func StartActivity(db *pipeline.DB, es *eventstore.Store) (*Activity, error) {
	if _, err := db.EnsureColumnFamily(ActivityFamily); err != nil {
		return nil, err
	}
	a := &Activity{db: db}
	p, err := es.StartProjection(context.Background(), eventstore.ProjectionConfig{
		Name:           "bank-activity",
		Filter:         eventstore.Filter{StreamPrefix: "account-"},
		Handle:         a.apply,
		MaxBatchEvents: 128,
		Owns:           []string{ActivityFamily},
	})
	if err != nil {
		return nil, err
	}
	a.p = p
	return a, nil
}

// NewActivity is StartActivity for fx: the projection stops when the app stops, before
// the database closes.
func NewActivity(lc fx.Lifecycle, db *pipeline.DB, es *eventstore.Store) (*Activity, error) {
	a, err := StartActivity(db, es)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{OnStop: func(context.Context) error { return a.Close() }})
	return a, nil
}

// Close stops the projection.
func (a *Activity) Close() error { return a.p.Close() }

// Projection returns the projection that keeps the read model (its Status, CaughtUp).
func (a *Activity) Projection() *eventstore.Projection { return a.p }

// apply folds a batch of account events into the read model.
func (a *Activity) apply(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
	cf, err := a.db.ColumnFamily(ActivityFamily)
	if err != nil {
		return err
	}
	for _, e := range events {
		if e.Type == EventOpened {
			continue
		}
		var d moneyEvent
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		id := strings.TrimPrefix(e.Stream, "account-")
		acc, err := readActivity(tx, cf, id)
		if err != nil {
			return err
		}
		switch e.Type {
		case EventDebited:
			acc.Out, acc.Sent = acc.Out+1, acc.Sent+d.Amount
		case EventCredited:
			acc.In, acc.Received = acc.In+1, acc.Received+d.Amount
		}
		b, err := json.Marshal(acc)
		if err != nil {
			return err
		}
		if err := tx.Put(cf, []byte(id), b); err != nil {
			return err
		}
	}
	return nil
}

// Of returns the activity of account id, once the read model reflects log position at
// (0: as it is).
func (a *Activity) Of(ctx context.Context, id string, at uint64) (AccountActivity, error) {
	if at > 0 {
		if err := a.p.CaughtUp(ctx, at); err != nil {
			return AccountActivity{}, err
		}
	}
	cf, err := a.db.ColumnFamily(ActivityFamily)
	if err != nil {
		return AccountActivity{}, err
	}
	var acc AccountActivity
	err = a.db.View(func(tx *pipeline.Txn) error {
		acc, err = readActivity(tx, cf, id)
		return err
	})
	acc.Position = a.p.Status().Position
	return acc, err
}

func readActivity(tx *pipeline.Txn, cf *pipeline.ColumnFamily, id string) (AccountActivity, error) {
	acc := AccountActivity{ID: id}
	v, err := tx.Get(cf, []byte(id))
	if errors.Is(err, pipeline.ErrNotFound) {
		return acc, nil
	}
	if err != nil {
		return acc, err
	}
	return acc, json.Unmarshal(v, &acc)
}

// recordMoney appends a bank event to an account's stream inside tx.
func recordMoney(es *eventstore.Store, tx *pipeline.Txn, id, typ string, d moneyEvent) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return es.AppendTxn(tx, "account-"+id, eventstore.Any, eventstore.Event{Type: typ, Data: data})
}
