package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// The bare side of the jsbare scenario: what one eventstore append through the
// JetStream engine's public API puts on the wire, sent with nats.go and nothing else.
// The engine's commit of one 100-byte event to stream S at revision r, expecting r-1,
// is one atomic batch of four messages under the partition's prefix P (see the
// jetstream package doc and jsbare_test.go, which checks this against what the engine
// sends):
//
//  1. P.e.<S>: the event (type, metadata and data framed in 110 bytes), Rl-Rev r, Rl-Sum;
//  2. P.k.<rockline.streams>.<'h' S>: the event store's head record, uvarint(r), with
//     Nats-Expected-Last-Subject-Sequence = the head's last sequence, Rl-Sum;
//  3. P.k.<rockline.streams>.<'r' S 0 BE64(r)>: the event's index record, a new
//     subject every commit, positioned (Rl-Enc rockline.event, Rl-At 1), Rl-Sum;
//  4. P.c: the commit marker, Nats-Batch-Commit, Nats-Msg-Id c:<batch>, Rl-Txn <batch>;
//
// every message with Nats-Batch-Id and Nats-Batch-Sequence. (Until 2026-12-03 the
// engine also sent a read marker checking the catalog record of rockline.streams, a
// family that cannot be dropped; it no longer does, and the bare side follows.) The
// first three are published without a reply on the worker's connection, the last is
// a request, and the append is done when its publish ack names the batch and its four
// messages. A batch refused with "subject in flight" (10164) is sent again after the
// engine's backoff until it lands, as the engine and the event store's retry of a
// conflict do.
// The bare side sends exactly these (its checksums are placeholders of the same size:
// the server does not read them) and keeps the head's sequence from the ack instead
// of reading it. With reads, it also makes the two round trips the engine makes
// before sending: the stream leader's latest commit marker (STREAM.MSG.GET
// last_by_subj P.c, Begin's position) and one Direct Get multi_last of the catalog
// record, the head and P.c up to that position (the head read, fenced by the
// marker), on one inbox subscription the worker keeps; or the Direct Get alone.

// Header names of the engine's messages (the jetstream package's, not exported).
const (
	hdrBatchID   = "Nats-Batch-Id"
	hdrBatchSeq  = "Nats-Batch-Sequence"
	hdrBatchDone = "Nats-Batch-Commit"
	hdrMsgID     = "Nats-Msg-Id"
	hdrExpSeq    = "Nats-Expected-Last-Subject-Sequence"
	hdrRlRev     = "Rl-Rev"
	hdrRlSum     = "Rl-Sum"
	hdrRlEnc     = "Rl-Enc"
	hdrRlAt      = "Rl-At"
	hdrRlTxn     = "Rl-Txn"
)

// esFamily is the event store's family as the engine names it (LayerFamily("streams")).
const esFamily = "rockline.streams"

// catalogShards is the number of copies of a family's catalog record (jetstream.FamilyShards).
const catalogShards = 16

// subjectToken encodes b as the engine does: "_" when empty, else unpadded base64url.
func subjectToken(b []byte) string {
	if len(b) == 0 {
		return "_"
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// bareAppender appends to one event stream of one partition the way the engine's
// commit does, on its own connection, one append at a time.
type bareAppender struct {
	nc     *nats.Conn
	stream string // the partition's JetStream stream (for its API subjects)
	prefix string // the partition's subject prefix, with its trailing dot
	event  string // P.e.<S>
	head   string // P.k.<family>.<'h' S>
	commit string // P.c
	family string // the family token
	name   string // S
	data   []byte // the framed event, as the engine encodes it

	rev     uint64 // the revision the next append gets
	headSeq uint64 // the head's last sequence (0: none yet)

	inFlight   *atomic.Uint64 // counts re-sends after "subject in flight" (10164)
	fenceWaits *atomic.Uint64 // counts Direct Gets asked again, the replica behind

	readTrips int                // reads before each append: 0, 1 (a Direct Get) or 2 (the engine's)
	lastPos   uint64             // the worker's last commit's position
	inbox     string             // the Direct Get answers' subject
	sub       *nats.Subscription // on inbox
}

// newBareAppender returns an appender of payload-byte events to stream name of the
// partition (JetStream stream, subject prefix without its dot) on nc, reading before
// every append in readTrips round trips (see read).
func newBareAppender(nc *nats.Conn, jsStream, prefix, name string, payload int, readTrips int, inFlight, fenceWaits *atomic.Uint64) (*bareAppender, error) {
	p := prefix + "."
	fam := subjectToken([]byte(esFamily))
	const typ = "Happened"
	data := binary.AppendUvarint(nil, uint64(len(typ)))
	data = append(data, typ...)
	data = binary.AppendUvarint(data, 0) // no metadata
	data = append(data, make([]byte, payload)...)
	a := &bareAppender{nc: nc, stream: jsStream, prefix: p, name: name, family: fam, data: data,
		event: p + "e." + subjectToken([]byte(name)), head: p + "k." + fam + "." + subjectToken(append([]byte{'h'}, name...)),
		commit: p + "c", readTrips: readTrips, inFlight: inFlight, fenceWaits: fenceWaits}
	if readTrips > 0 {
		a.inbox = nc.NewInbox()
		sub, err := nc.SubscribeSync(a.inbox)
		if err != nil {
			return nil, fmt.Errorf("bare appender: subscribing to its inbox: %w", err)
		}
		a.sub = sub
	}
	return a, nil
}

func (a *bareAppender) close() error {
	if a.sub == nil {
		return nil
	}
	return a.sub.Unsubscribe()
}

// indexKey is the event store's index key of the stream's event at rev.
func (a *bareAppender) indexKey(rev uint64) string {
	k := append([]byte{'r'}, a.name...)
	k = append(k, 0)
	return a.prefix + "k." + a.family + "." + subjectToken(binary.BigEndian.AppendUint64(k, rev))
}

// batch builds the four messages of the append of revision rev, expecting the head's
// last sequence headSeq, under batch id.
func (a *bareAppender) batch(id string, rev, headSeq uint64) []*nats.Msg {
	const sum = "00000000" // the engine's CRC-32C, 8 hex digits; the server does not read it
	revs := strconv.FormatUint(rev, 10)
	ev := nats.NewMsg(a.event)
	ev.Header.Set(hdrRlRev, revs)
	ev.Header.Set(hdrRlSum, sum)
	ev.Data = a.data
	head := nats.NewMsg(a.head)
	head.Header.Set(hdrExpSeq, strconv.FormatUint(headSeq, 10))
	head.Header.Set(hdrRlSum, sum)
	head.Data = binary.AppendUvarint(nil, rev)
	idx := nats.NewMsg(a.indexKey(rev))
	idx.Header.Set(hdrRlEnc, "rockline.event")
	idx.Header.Set(hdrRlAt, "1") // the commit marker is the next message
	idx.Header.Set(hdrRlSum, sum)
	idx.Data = []byte{0} // uvarint(index in the commit), no event ID
	com := nats.NewMsg(a.commit)
	com.Header.Set(hdrBatchDone, "1")
	com.Header.Set(hdrMsgID, "c:"+id)
	com.Header.Set(hdrRlTxn, id)
	msgs := []*nats.Msg{ev, head, idx, com}
	for i, m := range msgs {
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
	}
	return msgs
}

// catalog is the subject of a catalog record copy picked at random, as a transaction does.
func (a *bareAppender) catalog() string {
	return a.prefix + "f." + a.family + "." + strconv.Itoa(rand.IntN(catalogShards))
}

// batchAck is JetStream's publish ack of a batch.
type batchAck struct {
	Seq   uint64 `json:"seq"`
	Batch string `json:"batch"`
	Count int    `json:"count"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// append makes one append: the reads (when asked), then the batch, and waits for its
// ack, within timeout.
func (a *bareAppender) append(ctx context.Context, timeout time.Duration) error {
	headSeq := a.headSeq
	if a.readTrips > 0 {
		var seq uint64
		err := nats.ErrNoResponders
		first := time.Now()
		for attempt := 0; errors.Is(err, nats.ErrNoResponders) && time.Since(first) < timeout; attempt++ {
			// No responder yet (a stream just created): asked again, as the
			// engine's reads do.
			if attempt > 0 {
				if berr := backoffJS(ctx, attempt-1); berr != nil {
					return fmt.Errorf("%w (%w)", berr, err)
				}
			}
			seq, err = a.read(ctx, timeout)
		}
		if err != nil {
			return err
		}
		headSeq = seq
	}
	id := nuid.Next()
	msgs := a.batch(id, a.rev, headSeq)
	var leaderless time.Time
	for attempt := 0; ; attempt++ {
		ack, err := a.send(ctx, msgs, timeout)
		switch {
		case errors.Is(err, nats.ErrNoResponders) && (leaderless.IsZero() || time.Since(leaderless) < timeout):
			// Nothing received the commit message (the stream's leader, or the
			// interest in its subjects, has not reached this node yet): a new batch
			// is safe, after a backoff, for as long as a publish may take, as the
			// engine does.
			if leaderless.IsZero() {
				leaderless = time.Now()
			}
			if err := backoffJS(ctx, attempt); err != nil {
				return fmt.Errorf("bare append: %w", err)
			}
			id = nuid.Next()
			msgs = a.batch(id, a.rev, headSeq)
			continue
		case err != nil:
			return err
		case ack.Error != nil && ack.Error.ErrCode == jsSubjectInFlight:
			// Another batch expecting a version of the same subject is being
			// proposed: sent again after the engine's backoff. The engine re-reads
			// first, and after InFlightRetries re-sends reports a conflict, which
			// the event store's Append retries: sent again until it lands, here.
			a.inFlight.Add(1)
			if err := backoffJS(ctx, attempt); err != nil {
				return fmt.Errorf("bare append: %w", err)
			}
			continue
		case ack.Error != nil:
			return fmt.Errorf("bare append: refused: %s (%d)", ack.Error.Description, ack.Error.ErrCode)
		case ack.Batch != id || ack.Count != len(msgs):
			return fmt.Errorf("bare append: ack for batch %q of %d messages, sent %q of %d", ack.Batch, ack.Count, id, len(msgs))
		}
		a.headSeq = ack.Seq - uint64(len(msgs)) + 2 // the head is the batch's second message
		a.lastPos = ack.Seq
		a.rev++
		return nil
	}
}

// backoffJS waits as the engine does before re-sending attempt n (0-based): 0.5 ms
// doubling up to 32 ms, or until ctx ends.
func backoffJS(ctx context.Context, n int) error {
	t := time.NewTimer(500 * time.Microsecond << min(n, 6))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// send publishes msgs as one atomic batch, the last message as the request, and
// returns the publish ack.
func (a *bareAppender) send(ctx context.Context, msgs []*nats.Msg, timeout time.Duration) (batchAck, error) {
	for _, m := range msgs[:len(msgs)-1] {
		if err := a.nc.PublishMsg(m); err != nil {
			return batchAck{}, fmt.Errorf("bare append: %w", err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := a.nc.RequestMsgWithContext(rctx, msgs[len(msgs)-1])
	cancel()
	if err != nil {
		return batchAck{}, fmt.Errorf("bare append: commit: %w", err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return batchAck{}, fmt.Errorf("bare append: the ack %q: %w", resp.Data, err)
	}
	return ack, nil
}
