package eventstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// catchUp subscribes to stream from revision from, collects what the subscription
// hands out until it has caught up with the published log, and closes it.
func catchUp(t *testing.T, es *eventstore.Store, stream string, from uint64) ([]eventstore.RecordedEvent, error) {
	t.Helper()
	var got []eventstore.RecordedEvent
	live := make(chan struct{})
	sub, err := es.SubscribeToStream(ctx, stream, from, func(e eventstore.RecordedEvent) error {
		got = append(got, e)
		return nil
	}, pipeline.OnLive(func(l bool) {
		if l {
			select {
			case <-live:
			default:
				close(live)
			}
		}
	}))
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	wait(t, func() { <-live }, fmt.Sprintf("the subscription to %s from %d catching up", stream, from))
	if err := sub.Close(); err != nil { // and the handler is done with got
		t.Fatal(err)
	}
	return got, nil
}

// TestSubscribeToStreamHiddenRevisions: a stream subscription from a revision hands
// out what ReadStream forward from that revision returns: the visible revisions from
// there on, starting at the first one still stored when the revision asked for is
// hidden (a soft delete, TruncateBefore, MaxCount) or its record reclaimed, and it
// fails as reads do on a tombstoned stream; the same before and after Reclaim.
func TestSubscribeToStreamHiddenRevisions(t *testing.T) {
	appendN := func(t *testing.T, es *eventstore.Store, stream string, n int) {
		t.Helper()
		for range n {
			mustAppend(t, es, stream, eventstore.Any)
			mustAppend(t, es, "other", eventstore.Any) // interleaved, never delivered
		}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, es *eventstore.Store)
	}{
		{"soft delete then recreate", func(t *testing.T, es *eventstore.Store) {
			appendN(t, es, "s", 2)
			if _, err := es.DeleteStream(ctx, "s", eventstore.Any); err != nil {
				t.Fatal(err)
			}
			appendN(t, es, "s", 1) // revision 2
		}},
		{"soft delete", func(t *testing.T, es *eventstore.Store) {
			appendN(t, es, "s", 3)
			if _, err := es.DeleteStream(ctx, "s", eventstore.Any); err != nil {
				t.Fatal(err)
			}
		}},
		{"TruncateBefore", func(t *testing.T, es *eventstore.Store) {
			appendN(t, es, "s", 5)
			if _, err := es.SetStreamMetadata(ctx, "s", eventstore.StreamMetadata{TruncateBefore: 3}); err != nil {
				t.Fatal(err)
			}
		}},
		{"TruncateBefore beyond the head", func(t *testing.T, es *eventstore.Store) {
			appendN(t, es, "s", 2)
			if _, err := es.SetStreamMetadata(ctx, "s", eventstore.StreamMetadata{TruncateBefore: 4}); err != nil {
				t.Fatal(err)
			}
			appendN(t, es, "s", 3) // revisions 2..4; 2 and 3 hidden
		}},
		{"MaxCount", func(t *testing.T, es *eventstore.Store) {
			appendN(t, es, "s", 5)
			if _, err := es.SetStreamMetadata(ctx, "s", eventstore.StreamMetadata{MaxCount: 2}); err != nil {
				t.Fatal(err)
			}
		}},
		{"tombstone", func(t *testing.T, es *eventstore.Store) {
			appendN(t, es, "s", 2)
			if _, err := es.TombstoneStream(ctx, "s", eventstore.Any); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		for _, reclaim := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reclaim=%v", tc.name, reclaim), func(t *testing.T) {
				_, es, _ := openStore(t, pipeline.Config{})
				tc.setup(t, es)
				if reclaim {
					if _, err := es.Reclaim(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for _, from := range []uint64{0, 1, 2, 3, 4, 9} {
					want, rerr := es.ReadStream(ctx, "s", from, eventstore.ToEnd)
					got, serr := catchUp(t, es, "s", from)
					if rerr != nil || serr != nil {
						if !errors.Is(rerr, eventstore.ErrStreamDeleted) || !errors.Is(serr, eventstore.ErrStreamDeleted) {
							t.Errorf("from %d: ReadStream error %v, SubscribeToStream error %v; want both a *StreamDeletedError", from, rerr, serr)
						}
						continue
					}
					if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("from %d: subscription vs ReadStream (-read +subscription):\n%s", from, diff)
					}
				}
			})
		}
	}
}
