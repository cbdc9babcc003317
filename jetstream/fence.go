package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nuid"
)

// An abort marker fences out a batch whose outcome is unknown (a timed-out publish, a
// refusal that may have come from a stale leader): it carries the batch's commit
// marker's message ID, so it is answered as a duplicate if the batch is stored, and
// once stored it makes the batch's marker the duplicate. That holds for a batch the
// leader has stored, not for one it is still proposing: such a batch is not in the
// dedupe map yet, so the marker passes, and both land, the batch first (the leader
// proposes in order and a batch proposed after the marker is refused by it).
//
// So when the marker lands at sequence a, the batch may still be stored just below
// it. landedBelow looks: it reads the commit markers below a (Direct Get batches
// filtered on the commit subject), and the batch landed if one of them carries its ID
// in Rl-Txn. A transaction's batch lands above its read position (Commit.After), so
// its search reads the markers between the two, usually a few. Without that bound,
// a window of sequences below a doubles while its oldest marker is younger than the
// batch's first send (less a margin for the clocks of client and server), up to
// maxFenceSpan sequences: a batch sent at time t is stored after t. An answer that
// does not reach a comes from a replica that has not applied a yet and is asked
// again.

const (
	firstFenceSpan = 512     // sequences below the abort marker read first
	maxFenceSpan   = 1 << 15 // the widest window read
	fenceSkew      = 2 * time.Second
)

// batch is one batch ID of a commit: sent when it was first sent, after the commit's
// Commit.After.
type batch struct {
	id    string
	sent  time.Time
	after uint64
}

func newBatch(after uint64) batch { return batch{id: nuid.Next(), sent: time.Now(), after: after} }

// landedBelow reports the position of batch b's commit marker if it is stored below
// the abort marker at abort.
func (p *Partition) landedBelow(ctx context.Context, b batch, abort uint64) (uint64, bool, error) {
	id, sent := b.id, b.sent
	if b.after > 0 && b.after < abort {
		pos, found, _, err := p.scanMarkers(ctx, id, b.after+1, abort)
		return pos, found, err
	}
	for span := uint64(firstFenceSpan); ; span *= 2 {
		lo := uint64(1)
		if abort > span {
			lo = abort - span
		}
		pos, found, oldest, err := p.scanMarkers(ctx, id, lo, abort)
		if err != nil || found {
			return pos, found, err
		}
		if lo == 1 || span >= maxFenceSpan || (!oldest.IsZero() && oldest.Before(sent.Add(-fenceSkew))) {
			return 0, false, nil
		}
	}
}

// scanMarkers reads the commit markers from lo up to abort (which must be among them)
// and returns the position of id's, if there, and the time of the first marker read.
func (p *Partition) scanMarkers(ctx context.Context, id string, lo, abort uint64) (pos uint64, found bool, oldest time.Time, err error) {
	from := lo
	for attempt := 0; ; {
		body, _ := json.Marshal(struct {
			Seq       uint64 `json:"seq"`
			Batch     int    `json:"batch"`
			NextFor   string `json:"next_by_subj"`
			NoHeaders bool   `json:"no_hdr,omitempty"`
		}{Seq: from, Batch: int(abort - from + 1), NextFor: p.subj.commit()})
		msgs, pending, err := p.directBatch(ctx, "Commit", body, int(abort-from+1))
		if err != nil {
			return 0, false, oldest, err
		}
		for _, m := range msgs {
			seq := msgSeq(m)
			if seq >= abort {
				return 0, false, oldest, nil // the window is whole: not there
			}
			if oldest.IsZero() {
				oldest = directTime(m)
			}
			if m.Header.Get(hdrTxn) == id && m.Header.Get(hdrAbort) == "" {
				return seq, true, oldest, nil
			}
			from = seq + 1
		}
		if pending > 0 && len(msgs) > 0 {
			continue // the answer was cut by its size: read on
		}
		// The replica that answered has not applied the abort marker yet.
		if err := backoff(ctx, attempt); err != nil {
			return 0, false, oldest, fmt.Errorf("rockline/jetstream: Commit: looking for batch %s below its abort marker at %d: %w", id, abort, err)
		}
		attempt++
	}
}
