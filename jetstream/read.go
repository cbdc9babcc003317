package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Item is a key as a snapshot read found it. Version is the stream sequence of the
// key's last message at or below the read's position (0: never written); pass it back
// as Read.Version or Write.Version to commit against what was read. A deleted key has
// a Version (its delete) and no Value, and Get reports it as not found.
//
// For a positioned write (Write.AtCommit), Value is the encoding's value and AtCommit
// the commit position it was made from (0 for any other write).
type Item struct {
	Family     string
	Key        []byte
	Value      []byte
	Version    uint64
	Generation uint64 // the family's generation read (1 unless re-created)
	AtCommit   uint64
}

// Get returns key of family as of the commit position at (0: the empty partition),
// and whether it exists there. The Item's Version is set even when it does not exist
// (a delete's sequence, or 0). at must be a position this partition returned (from
// Commit, Position or a subscription entry): a sequence inside a commit is refused with
// an *ArgumentError, a position above the latest with ErrPositionUnavailable, both at
// once; a replica behind at is waited for, up to Config.ReadTimeout. Errors:
// *ArgumentError, *LimitError, *TruncatedError, ErrPositionUnavailable, ErrClosed.
func (p *Partition) Get(ctx context.Context, family string, key []byte, at uint64) (Item, bool, error) {
	return p.GetGen(ctx, family, 1, key, at)
}

// GetGen is Get in generation gen of family (0 means 1; see families.go).
func (p *Partition) GetGen(ctx context.Context, family string, gen uint64, key []byte, at uint64) (Item, bool, error) {
	return p.getGen(ctx, family, gen, key, at, callerPos)
}

// getGen is GetGen at a position of the given origin.
func (p *Partition) getGen(ctx context.Context, family string, gen uint64, key []byte, at uint64, origin posOrigin) (Item, bool, error) {
	if p.closed.Load() {
		return Item{}, false, ErrClosed
	}
	if n := p.subj.keyGenLen(family, gen, key); n > MaxSubjectLen {
		return Item{}, false, &LimitError{Op: "Get", Field: "key", Limit: "encoded subject length", Got: n, Max: MaxSubjectLen}
	}
	it := Item{Family: family, Key: key, Generation: max(gen, 1)}
	if at == 0 {
		return it, false, nil
	}
	msgs, err := p.snapshot(ctx, "Get", []string{p.subj.keyGen(family, gen, key)}, at, origin)
	if err != nil {
		return it, false, err
	}
	for _, m := range msgs {
		it.Version = msgSeq(m)
		if m.Header.Get(hdrOp) == opDelete {
			return it, false, nil
		}
		it.Value, it.AtCommit, err = p.value(m.Subject, it.Version, m.Header, m.Data)
		if err != nil {
			return it, false, err
		}
		return it, true, nil
	}
	return it, false, nil
}

// Scan returns every key of family (generation 1) that starts with prefix and exists
// as of the commit position at, in key order: an Iterator over [prefix, the first key
// after every key with prefix) walked to its end, so a family of any size can be
// scanned (see scan.go for what that costs). Errors as for Get.
func (p *Partition) Scan(ctx context.Context, family string, prefix []byte, at uint64) ([]Item, error) {
	o := IterOptions{Lower: prefix, Upper: prefixEnd(prefix)}
	if len(prefix) == 0 {
		o = IterOptions{}
	}
	it, err := p.newIterator(ctx, "Scan", family, o, at)
	if err != nil {
		return nil, err
	}
	var out []Item
	for it.First(); it.Valid(); it.Next() {
		out = append(out, it.Item())
	}
	return out, it.Close()
}

// StreamHead returns the version of stream as of the commit position at: the
// sequence of its last event there, 0 for a stream with no events. It is the version
// a StreamCheck expects.
func (p *Partition) StreamHead(ctx context.Context, stream string, at uint64) (uint64, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if at == 0 {
		return 0, nil
	}
	msgs, err := p.snapshot(ctx, "StreamHead", []string{p.subj.stream(stream)}, at, callerPos)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	return msgSeq(msgs[0]), nil
}

// Position returns the partition's latest commit position, asking the stream leader
// (so it is at least every position a Commit has returned before the call).
func (p *Partition) Position(ctx context.Context) (uint64, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	seq, found, err := p.leaderGet(ctx, "Position", msgGetRequest{LastFor: p.subj.commit()})
	if err != nil || !found {
		return 0, err
	}
	return seq, nil
}

// snapshot runs one Direct Get multi_last over filters plus the commit marker subject,
// up to the commit position at, and returns the messages other than the marker. The
// marker is the fence: its last sequence at or below at must be at itself, else the
// replica that answered has not applied at yet (direct gets are served by every
// replica) and the read is retried until the read deadline (awaitFence, which origin
// steers).
func (p *Partition) snapshot(ctx context.Context, op string, filters []string, at uint64, origin posOrigin) ([]*nats.Msg, error) {
	if t := p.truncated.Load(); at < t {
		return nil, &TruncatedError{Position: at, First: t}
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	commit := p.subj.commit()
	req := multiGetRequest{MultiLast: append(slices.Clone(filters), commit), UpToSeq: at}
	for attempt := 0; ; attempt++ {
		msgs, err := p.multiGet(rctx, op, req)
		if err != nil {
			return nil, err
		}
		var fence uint64
		out := msgs[:0]
		for _, m := range msgs {
			if m.Subject == commit {
				fence = msgSeq(m)
				continue
			}
			out = append(out, m)
		}
		if fence == at {
			return out, nil
		}
		if err := p.awaitFence(rctx, op, at, fence, attempt, origin); err != nil {
			return nil, err
		}
	}
}

// posOrigin says where a snapshot read's position came from, which decides when a
// read that finds its replica behind the position asks the stream leader about it
// (awaitFence). The zero value, callerPos, always asks at once.
type posOrigin uint8

const (
	// callerPos: a position a caller passed (Get, Scan, NewIterator, StreamHead,
	// Family, Families). It may be no commit position, or above the latest one, and
	// waiting mends neither: the first wait asks the leader (checkPosition), so such a
	// position fails at once rather than at the read deadline.
	callerPos posOrigin = iota
	// leaderPos: a position the stream leader reported as its latest commit marker
	// (Position; a Txn's position and the re-reads of its revive and familyChanged).
	// It is a commit position the leader holds, and a leader stores a message only
	// once it applies the entry a quorum committed, so a replica without it is only
	// behind: asking the leader at once would cost a round trip and could only say
	// so. The read waits without asking for leaderCheckAttempt waits, then asks once,
	// which tells a replica behind from a position that went away since (a Truncate
	// past it by another client, the stream deleted and created again).
	leaderPos
)

// leaderCheckAttempt is the wait (0-based) at which a read at a leaderPos position
// asks the leader: after about 7.5 ms of backoff (0.5, 1, 2 and 4 ms), when one more
// round trip no longer matters against the wait.
const leaderCheckAttempt = 4

// awaitFence is what a snapshot read does when the replica that answered has not
// applied position at (its last commit marker is fence): once (at once for a
// callerPos position, at wait leaderCheckAttempt for a leaderPos one; see posOrigin)
// it asks the leader whether at is a commit position at all (waiting only helps a
// replica that is behind), then backs off before the caller retries; past the
// deadline it fails with ErrPositionUnavailable.
func (p *Partition) awaitFence(ctx context.Context, op string, at, fence uint64, attempt int, origin posOrigin) error {
	check := 0
	if origin == leaderPos {
		check = leaderCheckAttempt
	}
	if attempt == check {
		if err := p.checkPosition(ctx, op, at); err != nil {
			return err
		}
	}
	p.stats.fenceWaits.Add(1)
	if err := backoff(ctx, attempt); err != nil {
		return fmt.Errorf("%w: %s at %d: the replica answering has applied up to %d (%w)", ErrPositionUnavailable, op, at, fence, err)
	}
	return nil
}

type multiGetRequest struct {
	MultiLast []string `json:"multi_last"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
}

// multiGet sends one Direct Get multi_last request and collects its answer up to the
// end-of-batch message; an answer cut short by the server's max_pending bytes is a
// *LimitError.
func (p *Partition) multiGet(ctx context.Context, op string, req multiGetRequest) ([]*nats.Msg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
	}
	out, pending, err := p.directBatch(ctx, op, body, MaxMultiGet)
	if err == nil && pending > 0 {
		return nil, &LimitError{Op: op, Field: "answer", Limit: "multi-get bytes (the server's max_pending)", Got: len(out) + int(pending), Max: len(out)}
	}
	return out, err
}

// msgGetRequest is JetStream's message get request (STREAM.MSG.GET, answered by the
// stream leader).
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// checkPosition fails unless the stream leader holds a commit marker at at.
func (p *Partition) checkPosition(ctx context.Context, op string, at uint64) error {
	seq, found, err := p.leaderGet(ctx, op, msgGetRequest{Seq: at, NextFor: p.subj.commit()})
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: %s at %d: the partition's latest position is below it", ErrPositionUnavailable, op, at)
	case seq != at:
		if t := p.truncated.Load(); at < t {
			return &TruncatedError{Position: at, First: t}
		}
		return &ArgumentError{Op: op, Arg: "at", Reason: fmt.Sprintf("%d is not a commit position (the next one is %d)", at, seq)}
	}
	return nil
}

// leaderGet asks the stream leader for one message's sequence: the leader's view is
// current, which reads at a position cannot promise.
func (p *Partition) leaderGet(ctx context.Context, op string, req msgGetRequest) (uint64, bool, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	// While the stream elects a leader nobody answers: ask again, each try bounded by
	// a second, until the read deadline.
	var m *nats.Msg
	for attempt := 0; ; attempt++ {
		tctx, tcancel := deadline(rctx, time.Second)
		m, err = p.nc.RequestWithContext(tctx, "$JS.API.STREAM.MSG.GET."+p.cfg.Stream, body)
		tcancel()
		if err == nil {
			break
		}
		if rctx.Err() != nil || (!isTimeout(err) && !errors.Is(err, nats.ErrNoResponders)) {
			return 0, false, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
		}
	}
	var resp struct {
		Error   *apiError `json:"error"`
		Message *struct {
			Seq  uint64    `json:"seq"`
			Time time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, false, fmt.Errorf("rockline/jetstream: %s: decoding the answer: %w", op, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == codeNoMessage:
		return 0, false, nil
	case resp.Error != nil:
		return 0, false, resp.Error.serverError(op)
	case resp.Message == nil:
		return 0, false, errors.New("rockline/jetstream: " + op + ": empty answer")
	}
	return resp.Message.Seq, true, nil
}

func msgSeq(m *nats.Msg) uint64 {
	s, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	return s
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// WaitForPosition returns once the partition's latest position (as its stream leader
// answers Position) is at least pos, polling with backoff, or ctx's error. After it, a
// read at pos is served as soon as the answering replica has applied pos (reads wait
// for that themselves, up to Config.ReadTimeout).
func (p *Partition) WaitForPosition(ctx context.Context, pos uint64) error {
	for attempt := 0; ; attempt++ {
		cur, err := p.Position(ctx)
		if err != nil {
			return err
		}
		if cur >= pos {
			return nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}
