package jetstream

import (
	"context"

	"github.com/nats-io/nats.go"
)

// maxChanAnswer is the largest answer (in messages, the end of batch included) read
// through a channel of its own size; a larger one is read through a synchronous
// subscription.
const maxChanAnswer = 4096

// answers is the subscription one Direct Get request's answer arrives on.
//
// A synchronous subscription (nc.SubscribeSync) allocates a channel of the
// connection's SubChanLen, 65,536 messages by default: 512 KiB allocated and zeroed
// for every read, which cost more CPU than the rest of a JetStream commit's client
// work (measured: 767 µs per commit at 8 workers, and most of the GC). The server
// sends at most most+1 messages for a request (most answers and the end of batch), so
// a channel of that size never fills and no message is dropped.
type answers struct {
	sub *nats.Subscription
	ch  chan *nats.Msg // nil: sub is synchronous
}

// subscribeAnswers subscribes to inbox for an answer of at most most messages.
func (p *Partition) subscribeAnswers(inbox string, most int) (*answers, error) {
	if most+1 > maxChanAnswer {
		sub, err := p.nc.SubscribeSync(inbox)
		return &answers{sub: sub}, err
	}
	ch := make(chan *nats.Msg, most+1)
	sub, err := p.nc.ChanSubscribe(inbox, ch)
	return &answers{sub: sub, ch: ch}, err
}

// next returns the next message of the answer, or ctx's error once it ends.
func (a *answers) next(ctx context.Context) (*nats.Msg, error) {
	if a.ch == nil {
		return a.sub.NextMsgWithContext(ctx)
	}
	select {
	case m := <-a.ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *answers) close() { _ = a.sub.Unsubscribe() }
