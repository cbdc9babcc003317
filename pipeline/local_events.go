package pipeline

import "slices"

// txnEvent is an event a transaction carries, with its stream (AddStreamEvents).
type txnEvent struct {
	Event
	stream string
	rev    uint64
}

// addEvents copies checked events into the transaction.
func (t *localTxn) addEvents(events []Event) { t.addStreamEvents("", 0, events) }

// addStreamEvents copies checked events into the transaction, as stream's from
// revision first on (no stream when stream is empty).
func (t *localTxn) addStreamEvents(stream string, first uint64, events []Event) {
	for i, e := range events {
		e.Data = t.copyBytes(e.Data)
		e.Metadata = t.copyBytes(e.Metadata)
		if len(e.Tags) > 0 {
			e.Tags = slices.Clone(e.Tags)
			t.taggedEvents++
		} else {
			e.Tags = nil
		}
		te := txnEvent{Event: e}
		if stream != "" {
			te.stream, te.rev = stream, first+uint64(i)
		}
		t.events = append(t.events, te)
		if stream != "" {
			t.streamEvents++
		}
	}
}

// copyBytes copies p into the transaction's arena (nil stays nil).
func (t *localTxn) copyBytes(p []byte) []byte {
	if p == nil {
		return nil
	}
	start := len(t.arena)
	t.arena = append(t.arena, p...)
	return t.arena[start:len(t.arena):len(t.arena)]
}
