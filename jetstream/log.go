package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/pipeline"
)

// Reading commits by position: Entry and ReadLog return the same Entry a subscription
// delivers, read with Direct Get by sequence (served by every replica).
//
// A commit's messages are consecutive in the stream and its commit marker is the
// last; the marker's Nats-Batch-Sequence (stored with it, as every batch header is)
// is therefore the commit's message count n, and its messages are the sequences
// pos-n+1 .. pos.
//
//   - Entry(pos): one Direct Get of the message at pos (it must be a commit marker:
//     that is what makes pos a commit position), then one Direct Get batch of the n
//     messages from pos-n+1: two round trips. A commit whose messages exceed the
//     server's max_pending bytes (64 MiB by default) takes one more per such slice.
//   - ReadLog(from, limit): Direct Get batches by sequence from from, regrouped into
//     commits as Subscribe does. A batch ends mid-commit and the next one continues
//     it; from inside a commit costs one more request, to go back to its first
//     message (its Nats-Batch-Sequence says how far).
//
// A replica that has not applied pos yet answers Entry "not found": the stream leader
// is then asked whether pos is a commit position, and the read is retried until
// Config.ReadTimeout, as snapshot reads are. ReadLog returns what the answering
// replica holds: in order and none skipped, but possibly short of the leader's latest
// commit (an empty answer does not prove there is nothing after from; Position asks
// the leader).

// maxReadLog bounds ReadLog's limit, as pipeline.ReadLog's.
const maxReadLog = 1 << 20

// Entry returns the commit at pos. Errors: an *ArgumentError for 0 or a position that
// is not a commit position (a sequence inside a commit, or one a purge removed); an
// error matching ErrPositionUnavailable and pipeline.ErrNotFound for a position above
// the partition's latest (or one the answering replicas did not apply within
// Config.ReadTimeout); a *TruncatedError for a position at or below the truncation
// point (Truncate removed its events and markers); ErrClosed.
func (p *Partition) Entry(ctx context.Context, pos uint64) (Entry, error) {
	const op = "Entry"
	if p.closed.Load() {
		return Entry{}, ErrClosed
	}
	if pos == 0 {
		return Entry{}, &ArgumentError{Op: op, Arg: "pos", Reason: "0 is not a commit position (the log starts at 1)"}
	}
	if t := p.truncated.Load(); t > 0 && pos <= t {
		return Entry{}, &TruncatedError{Position: pos, First: t + 1}
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		e, found, err := p.entry(rctx, op, pos)
		if err != nil || found {
			return e, err
		}
		if attempt == 0 {
			if err := p.checkEntryPosition(rctx, op, pos); err != nil {
				return Entry{}, err
			}
		}
		p.stats.fenceWaits.Add(1)
		if err := backoff(rctx, attempt); err != nil {
			return Entry{}, fmt.Errorf("%w: %s %d: the replicas answering have not applied it (%w)", ErrPositionUnavailable, op, pos, err)
		}
	}
}

// checkEntryPosition asks the stream leader whether pos is a commit position.
func (p *Partition) checkEntryPosition(ctx context.Context, op string, pos uint64) error {
	seq, found, err := p.leaderGet(ctx, op, msgGetRequest{Seq: pos, NextFor: p.subj.commit()})
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: %s %d: above the partition's latest position: %w", ErrPositionUnavailable, op, pos, pipeline.ErrNotFound)
	case seq != pos:
		if t := p.truncated.Load(); pos <= t {
			return &TruncatedError{Position: pos, First: t + 1}
		}
		return &ArgumentError{Op: op, Arg: "pos", Reason: fmt.Sprintf("%d is not a commit position (the next one is %d)", pos, seq)}
	}
	return nil
}

// entry reads the commit at pos from the replica that answers; found is false when
// that replica has no message at pos (or not all of the commit's).
func (p *Partition) entry(ctx context.Context, op string, pos uint64) (Entry, bool, error) {
	body, _ := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{pos})
	m, err := p.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+p.cfg.Stream, body)
	if err != nil {
		return Entry{}, false, fmt.Errorf("rockline/jetstream: %s %d: direct get: %w", op, pos, err)
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return Entry{}, false, nil
	default:
		return Entry{}, false, &ServerError{Op: op, Code: atoiOr(status, 0), Description: m.Header.Get("Description")}
	}
	if subject := m.Header.Get("Nats-Subject"); subject != p.subj.commit() {
		return Entry{}, false, &ArgumentError{Op: op, Arg: "pos", Reason: fmt.Sprintf("%d is not a commit position (it holds %s)", pos, subject)}
	}
	if m.Header.Get(hdrBID) == "" { // an abort marker
		e, _, _, err := p.appendMsg(Entry{}, "", pos, directTime(m), p.subj.commit(), m.Header, m.Data)
		return e, true, err
	}
	n, err := strconv.ParseUint(m.Header.Get(hdrBSeq), 10, 64)
	if err != nil || n == 0 || n > pos || n > MaxBatchMessages {
		return Entry{}, false, fmt.Errorf("rockline/jetstream: %s %d: %w: the commit marker's %s is %q", op, pos, pipeline.ErrCorrupt, hdrBSeq, m.Header.Get(hdrBSeq))
	}
	var e Entry
	var batch string
	for from := pos - n + 1; ; {
		msgs, _, err := p.batchBySeq(ctx, op, from, int(pos-from+1))
		if err != nil {
			return Entry{}, false, err
		}
		for _, m := range msgs {
			seq := msgSeq(m)
			if seq > pos {
				break
			}
			var done bool
			if e, batch, done, err = p.appendMsg(e, batch, seq, directTime(m), m.Subject, m.Header, m.Data); err != nil {
				return Entry{}, false, fmt.Errorf("rockline/jetstream: %s %d: %w", op, pos, err)
			}
			if done {
				return e, true, nil
			}
			from = seq + 1
		}
		if len(msgs) == 0 || msgSeq(msgs[len(msgs)-1]) < from-1 {
			return Entry{}, false, nil // this replica ends before pos
		}
	}
}

// ReadLog returns up to limit commits with positions from from on (0 means 1), in
// order, none skipped, as the answering replica holds them (see log.go): fewer than
// limit, possibly none, when it has no more. limit must be 1..1<<20. Errors: an
// *ArgumentError for limit; a *TruncatedError when from is at or below the truncation
// point; ErrClosed; the server's errors.
func (p *Partition) ReadLog(ctx context.Context, from uint64, limit int) ([]Entry, error) {
	const op = "ReadLog"
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if limit < 1 || limit > maxReadLog {
		return nil, &ArgumentError{Op: op, Arg: "limit", Reason: fmt.Sprintf("%d is not between 1 and %d", limit, maxReadLog)}
	}
	from = max(from, 1)
	if t := p.truncated.Load(); t > 0 && from <= t {
		return nil, &TruncatedError{Position: from, First: t + 1}
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	var out []Entry
	var e Entry
	var batch string
	next, first := from, true
	for len(out) < limit {
		page := min(max(64, 8*(limit-len(out))), 4096)
		msgs, pending, err := p.batchBySeq(rctx, op, next, page)
		if err != nil {
			return out, err
		}
		if first && len(msgs) > 0 {
			first = false
			// Started inside a commit: go back to its first message.
			if k, _ := strconv.ParseUint(msgs[0].Header.Get(hdrBSeq), 10, 64); k > 1 && msgs[0].Header.Get(hdrBID) != "" {
				if s := msgSeq(msgs[0]); s >= k {
					next = s - k + 1
					continue
				}
			}
		}
		for _, m := range msgs {
			seq := msgSeq(m)
			var done bool
			if e, batch, done, err = p.appendMsg(e, batch, seq, directTime(m), m.Subject, m.Header, m.Data); err != nil {
				return out, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
			}
			next = seq + 1
			if done {
				out = append(out, e)
				e, batch = Entry{}, ""
				if len(out) == limit {
					break
				}
			}
		}
		if len(msgs) == 0 || pending == 0 {
			break
		}
	}
	return out, nil
}

// batchBySeq reads up to n stored messages from sequence from on (Direct Get batch;
// purged sequences are skipped), and returns them with the count the server reports
// still pending after them.
func (p *Partition) batchBySeq(ctx context.Context, op string, from uint64, n int) ([]*nats.Msg, uint64, error) {
	body, _ := json.Marshal(struct {
		Seq   uint64 `json:"seq"`
		Batch int    `json:"batch"`
	}{from, n})
	return p.directBatch(ctx, op, body, n)
}

// directTime is the stored time of a Direct Get answer.
func directTime(m *nats.Msg) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
	return t
}
