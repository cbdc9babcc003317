package ordersapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// An order's status is the type of its last event.
const (
	placed    = "placed"
	paid      = "paid"
	shipped   = "shipped"
	cancelled = "cancelled"
)

// transitions are the business rules: the event each command records, by the order's
// status; a command from any other status is refused.
var transitions = map[string]map[string]string{
	"place":  {"": placed},
	"pay":    {placed: paid},
	"ship":   {paid: shipped},
	"cancel": {placed: cancelled, paid: cancelled},
}

var described = map[string]string{"": "a missing", placed: "an unpaid", paid: "a paid", shipped: "a shipped", cancelled: "a cancelled"}

// ErrRejected is matched by every command a business rule refuses.
var ErrRejected = errors.New("rejected")

// orderEvent is the data of a "placed" event; amounts are in cents. The other events
// carry no data: their stream says which order, their type what happened.
type orderEvent struct {
	Amount int64 `json:"amount"`
}

func streamName(id string) string { return "order-" + id }

// order is an order's state, folded from its stream.
type order struct {
	status string // "" until placed
	amount int64
	events uint64
}

// expected is what the next append to the order's stream expects.
func (o order) expected() eventstore.ExpectedRevision {
	if o.events == 0 {
		return eventstore.NoStream
	}
	return eventstore.Revision(o.events - 1)
}

func loadOrder(ctx context.Context, es *eventstore.Store, id string) (order, error) {
	var o order
	events, err := es.ReadStream(ctx, streamName(id), 0, 100)
	if err != nil {
		return o, err
	}
	for _, e := range events {
		if e.Type == placed {
			var d orderEvent
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return o, fmt.Errorf("%s revision %d: %w", e.Stream, e.Revision, err)
			}
			o.amount = d.Amount
		}
		o.status, o.events = e.Type, e.Revision+1
	}
	return o, nil
}

// service runs commands and counts what became of them.
type service struct {
	db                                                *pipeline.DB
	es                                                *eventstore.Store
	commits, updates, attempts, wrongVersion, refused atomic.Int64
}

// execute loads the order, applies the rules and appends the event, expecting the
// revision it loaded. If another command appended first, the append fails with a wrong
// expected version (at once, or after Update retried a conflict) and the command is
// decided again on the new state, where a rule may now refuse it.
func (s *service) execute(ctx context.Context, id, cmd string, amount int64) error {
	for {
		o, err := loadOrder(ctx, s.es, id)
		if err != nil {
			return err
		}
		typ, ok := transitions[cmd][o.status]
		if !ok {
			s.refused.Add(1)
			if cmd == "place" {
				return fmt.Errorf("place order %s: %w: it already exists", id, ErrRejected)
			}
			return fmt.Errorf("%s order %s: %w: can't %s %s order", cmd, id, ErrRejected, cmd, described[o.status])
		}
		if cmd == "place" {
			o.amount = amount
		}
		var data []byte
		if typ == placed {
			if data, err = json.Marshal(orderEvent{Amount: amount}); err != nil {
				return err
			}
		}
		s.updates.Add(1)
		err = s.db.Update(ctx, func(tx *pipeline.Txn) error {
			s.attempts.Add(1)
			return s.es.AppendTxn(tx, streamName(id), o.expected(), eventstore.Event{Type: typ, Data: data})
		})
		var wrong *eventstore.WrongExpectedVersionError
		if !errors.As(err, &wrong) {
			if err == nil {
				s.commits.Add(1)
			}
			return err
		}
		s.wrongVersion.Add(1) // decide again on the stream as it is now
	}
}
