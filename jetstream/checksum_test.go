package jetstream_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
)

// A message whose content no longer matches the checksum its commit gave it, as a
// replica with damaged files serves it, is a *CorruptMessageError on every read that
// decodes it (point reads, the log by position and in pages, stream reads and
// subscriptions), never wrong data; a commit around it reads as before.
func TestCorruptMessageIsTypedError(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	good, err := p.Commit(ctx, &jetstream.Commit{
		Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("before"), Blind: true}},
		Events: []jetstream.Event{ev("s", "", "Happened", "first")},
	})
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) func([]*nats.Msg) {
		return func(msgs []*nats.Msg) {
			d := append([]byte(nil), msgs[i].Data...)
			d[0] ^= 0x01 // one bit, as on a damaged disk
			msgs[i].Data = d
		}
	}
	cases := []struct {
		name    string
		corrupt func([]*nats.Msg)
	}{
		{"event data", flip(0)},
		{"key value", flip(1)},
		{"no checksum", func(msgs []*nats.Msg) { msgs[1].Header.Del("Rl-Sum") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad, err := p.PublishCorruptedForTest(ctx, &jetstream.Commit{
				Events: []jetstream.Event{ev("s", "", "Happened", "second")},
				Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("after"), Blind: true}},
			}, tc.corrupt)
			if err != nil {
				t.Fatal(err)
			}
			isCorrupt := func(what string, err error) {
				t.Helper()
				var ce *jetstream.CorruptMessageError
				if !errors.Is(err, pipeline.ErrCorrupt) || !errors.As(err, &ce) {
					t.Errorf("%s: %v, want a *CorruptMessageError matching pipeline.ErrCorrupt", what, err)
				}
			}
			if tc.name != "event data" {
				_, _, err = p.Get(ctx, "f", []byte("k"), bad)
				isCorrupt("Get", err)
			} else {
				_, err = p.ReadStream(ctx, "s", 0, 10)
				isCorrupt("ReadStream", err)
			}
			_, err = p.Entry(ctx, bad)
			isCorrupt("Entry", err)
			_, err = p.ReadLog(ctx, good+1, 10)
			isCorrupt("ReadLog", err)
			s, err := p.Subscribe(ctx, good, func(jetstream.Entry) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			isCorrupt("Subscribe", s.Wait())
			// What was written soundly reads as before.
			if it, ok, err := p.Get(ctx, "f", []byte("k"), good); err != nil || !ok || string(it.Value) != "before" {
				t.Errorf("Get at the sound commit: %q %v %v", it.Value, ok, err)
			}
		})
	}
}
