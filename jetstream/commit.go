package jetstream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/rockline/rockline/pipeline"
)

// Read is a key the transaction read and does not write: the commit fails with a
// *ConflictError if the key's version is no longer Version (0: the key was absent and
// never written).
type Read struct {
	Family  string
	Key     []byte
	Version uint64
	// Generation is the family's generation the key was read in (0 means 1; see
	// families.go).
	Generation uint64
}

// Write is a put of Value (or, with Delete, a delete) of Key in Family. Version is the
// key's version as read (0: absent, never written); the commit fails with a
// *ConflictError if the key's version has changed. A Blind write is not checked.
//
// With AtCommit, the write is positioned (the local engine's Txn.PutAtCommit): Value
// is the payload, and every read returns the Append of the codec of
// Config.PositionedValues named AtCommit, applied to the commit's position and the
// payload (positioned.go). AtCommit must name a configured codec and excludes Delete.
type Write struct {
	Family  string
	Key     []byte
	Value   []byte
	Delete  bool
	Version uint64
	Blind   bool
	// Generation is the family's generation written (0 means 1; see families.go).
	Generation uint64
	AtCommit   string
}

// StreamCheck makes the commit conditional on Stream's version (StreamHead: the
// sequence of its last event, 0 for a stream with no events). It is checked on the
// commit's first event on that stream, or by a read marker when the commit appends
// none to it.
type StreamCheck struct {
	Stream  string
	Version uint64
}

// Event is an event the commit appends to Stream ("" for none, as AddEvents does),
// with the Revision the caller assigns it there. ID, when set, is sent as the
// message's Nats-Msg-Id: within the dedupe window a retry of the same commit is
// recognised and returns the original position (see Commit).
type Event struct {
	Stream   string
	Revision uint64
	pipeline.Event
}

// Commit is one optimistic transaction: every check holds and every write and event
// lands, in one atomic batch, or nothing does.
type Commit struct {
	Reads   []Read
	Writes  []Write
	Streams []StreamCheck
	Events  []Event
	// Families makes the commit conditional on families' catalog records (see
	// FamilyCheck): a drop or re-creation since they were read fails it.
	Families []FamilyCheck
	// After, when set, is a position the commit is known to land above (a Txn's read
	// position: its checks hold only there). It bounds the search that settles a
	// batch fenced out while it was being proposed (fence.go); 0: bounded by time.
	After uint64
}

// Header names the engine stores.
const (
	hdrOp     = "Rl-Op"    // "del" on a delete
	hdrRev    = "Rl-Rev"   // an event's revision
	hdrTxn    = "Rl-Txn"   // the batch ID, on the commit marker
	hdrAbort  = "Rl-Abort" // the batch ID an abort marker fences out
	opDelete  = "del"
	msgIDEvt  = "e:" // Nats-Msg-Id of an event: "e:" + its ID
	msgIDTxn  = "c:" // Nats-Msg-Id of a commit marker: "c:" + the batch ID
	hdrExpSeq = "Nats-Expected-Last-Subject-Sequence"
	hdrExpSub = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrMsgID  = "Nats-Msg-Id"
	hdrBID    = "Nats-Batch-Id"
	hdrBSeq   = "Nats-Batch-Sequence"
	hdrBCom   = "Nats-Batch-Commit"
)

// check is one expectation of a commit, kept to name a conflict and to re-read.
type check struct {
	kind    string // "write", "read", "stream"
	family  string
	key     []byte
	stream  string
	subject string
	version uint64
}

func (c check) conflict(actual uint64, err error) *ConflictError {
	return &ConflictError{Kind: c.kind, Family: c.family, Key: c.key, Stream: c.stream, Subject: c.subject, Expected: c.version, Actual: actual, Err: err}
}

// Commit writes c as one atomic batch and returns its position: the stream sequence
// of its last message (the commit marker). Positions increase with every commit of
// the partition; they are dense in messages, not in commits (a commit of n messages
// takes n sequences).
//
// Every error says whether the commit was written, through one of these sentinels
// (errors.Is):
//   - not written: ErrConflict (a *ConflictError: a write's or read's version, or a
//     stream's, changed, or a concurrent commit held one of its subjects);
//     ErrInvalidArgument (an *ArgumentError or *LimitError: input that cannot be
//     sent, nothing is sent); ErrDuplicateEvent (a *DuplicateEventError: some of
//     its event IDs are already stored, but in another commit); ErrTimeout (a publish
//     timed out, the engine proved it was not written, and ctx ended, or
//     InFlightRetries ran out, before a new batch could be sent; or the stream had no
//     leader to answer for PublishTimeout); ErrNotSent (it failed before its commit
//     message went out); ErrRefused (the server refused it for another reason, named by the wrapped
//     *ServerError); ErrClosed (nothing was sent).
//   - may or may not be written: ErrOutcomeUnknown.
//
// A refusal is settled before it is reported (fenceRefusal), so a refused commit is
// never written later.
//
// When every event ID of c is already stored in one commit (a retry within the dedupe
// window), Commit returns that commit's position and writes nothing.
func (p *Partition) Commit(ctx context.Context, c *Commit) (uint64, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	msgs, checks, err := p.build(c)
	if err != nil {
		return 0, err
	}
	pos, err := p.commit(ctx, c, msgs, checks)
	switch {
	case err == nil:
		p.stats.commits.Add(1)
	case errors.Is(err, ErrConflict):
		p.stats.conflicts.Add(1)
	}
	return pos, err
}

func (p *Partition) commit(ctx context.Context, c *Commit, msgs []*nats.Msg, checks []check) (uint64, error) {
	var leaderless time.Time // the first "no responders" answer of a leaderless spell
	leaderlessRetries := 0
	// id is the batch's ID; it changes only once the previous batch is proved never to
	// land (an abort marker stored with its marker's message ID): a batch re-sent
	// after "subject in flight" keeps it, so if the first one landed after all (a
	// refusal from a stale leader), the marker's message ID answers the re-send as a
	// duplicate and duplicate finds the first one's position.
	b := newBatch(c.After)
	for attempt := 0; ; attempt++ {
		ack, aerr, wentOut, err := p.publishBatch(ctx, b.id, msgs)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			// The commit message reached no subscriber (the stream is between
			// leaders, which takes seconds after a crash or a partition), so
			// nothing of the batch can land: a new batch is safe. Wait for a
			// leader up to PublishTimeout, as a publish would, not a number of
			// attempts; then it is a timeout proved harmless.
			if leaderless.IsZero() {
				leaderless = time.Now()
			}
			if ctx.Err() == nil && time.Since(leaderless) < p.cfg.PublishTimeout {
				p.stats.retried.Add(1)
				if backoff(ctx, leaderlessRetries) == nil {
					leaderlessRetries++
					attempt-- // bounded by time, not by InFlightRetries
					b = newBatch(c.After)
					continue
				}
			}
			return 0, fmt.Errorf("%w: no stream leader answered for %v: %w", ErrTimeout, time.Since(leaderless).Round(time.Millisecond), err)
		case err != nil && (isTimeout(err) || wentOut):
			// A timeout, or any failure once the commit message may have gone out (a
			// connection lost after sending it): the batch may have landed, so it is
			// settled by an abort marker, never sent again blindly.
			p.stats.timeouts.Add(1)
			pos, rerr := p.resolve(ctx, b, err)
			if !errors.Is(rerr, ErrTimeout) || ctx.Err() != nil || attempt >= p.cfg.InFlightRetries {
				return pos, rerr
			}
			// Proved not written (and never to be): sending a new batch is the same
			// as sending the first one. Its ID is fenced out now: take another.
			p.stats.retried.Add(1)
			b = newBatch(c.After)
			continue
		case err != nil:
			// The commit message never went out (a publish of an earlier message of
			// the batch failed): the server cannot complete the batch.
			return 0, fmt.Errorf("%w: %w", ErrNotSent, err)
		case aerr == nil:
			return ack, nil
		}
		switch aerr.ErrCode {
		case codeWrongLastSeq:
			return p.fenceRefusal(ctx, b, p.nameConflict(ctx, checks, aerr.serverError("Commit")))
		case codeSubjectInFlight:
			// The server clears a subject's in-flight mark after it acks, so this
			// may come from a commit that has already finished: re-read, and send
			// again only if nothing this commit expects has changed.
			if cerr := p.recheck(ctx, checks, aerr.serverError("Commit")); cerr != nil {
				return p.fenceRefusal(ctx, b, cerr)
			}
			if attempt >= p.cfg.InFlightRetries {
				return p.fenceRefusal(ctx, b, checks[0].conflict(checks[0].version, fmt.Errorf("still in flight after %d attempts: %w", attempt+1, aerr.serverError("Commit"))))
			}
			p.stats.inFlight.Add(1)
		case codeDuplicateMsgID:
			pos, err := p.duplicate(ctx, b.id, c)
			switch {
			case err == nil:
				p.stats.duplicates.Add(1)
			case !errors.Is(err, ErrDuplicateEvent) && !errors.Is(err, ErrOutcomeUnknown):
				// A lookup failed: the batch or an event of it is stored somewhere.
				err = fmt.Errorf("%w: batch %s refused as a duplicate: %w", ErrOutcomeUnknown, b.id, err)
			}
			return pos, err
		case codeIncompleteBatch, codeTooManyInflight:
			// Nothing was stored (a leader change, or too many open batches): a new
			// batch is safe. Bounded like in-flight retries.
			if attempt >= p.cfg.InFlightRetries {
				return 0, fmt.Errorf("%w: no batch taken after %d attempts: %w", ErrTimeout, attempt+1, aerr.serverError("Commit"))
			}
			p.stats.retried.Add(1)
			// A fresh ID: the server may still hold the abandoned batch's staging.
			b = newBatch(c.After)
		default:
			// Refused for another reason (limits, a sealed or missing stream): settled
			// like any refusal, as a stale leader may have given it.
			return p.fenceRefusal(ctx, b, fmt.Errorf("%w: %w", ErrRefused, aerr.serverError("Commit")))
		}
		if err := backoff(ctx, attempt); err != nil {
			if aerr.ErrCode == codeSubjectInFlight {
				// The refused batch is settled before the caller hears of it.
				return p.fenceRefusal(ctx, b, checks[0].conflict(checks[0].version, fmt.Errorf("ended while waiting to send again: %w (refused: %w)", err, aerr.serverError("Commit"))))
			}
			return 0, fmt.Errorf("%w: ended before a new batch was sent: %w", ErrTimeout, err)
		}
	}
}

// build validates c and makes its messages, without batch headers, and the checks.
func (p *Partition) build(c *Commit) ([]*nats.Msg, []check, error) {
	const op = "Commit"
	if c == nil {
		return nil, nil, &ArgumentError{Op: op, Arg: "c", Reason: "must not be nil"}
	}
	n := len(c.Writes) + len(c.Events) + 1
	streamEvents := map[string]bool{}
	for _, e := range c.Events {
		streamEvents[e.Stream] = true
	}
	for _, s := range c.Streams {
		if !streamEvents[s.Stream] {
			n++
		}
	}
	n += len(c.Reads) + len(c.Families)
	if n > p.cfg.MaxBatch {
		return nil, nil, &LimitError{Op: op, Field: "commit", Limit: "messages per commit", Got: n, Max: p.cfg.MaxBatch}
	}
	msgs := make([]*nats.Msg, 0, n)
	var checks []check
	seen := map[string]string{} // subject -> what claimed it
	claim := func(subject, arg string) error {
		if len(subject) > MaxSubjectLen {
			return &LimitError{Op: op, Field: arg, Limit: "encoded subject length", Got: len(subject), Max: MaxSubjectLen}
		}
		if prev, dup := seen[subject]; dup {
			return &ArgumentError{Op: op, Arg: arg, Reason: "names the same key or stream as " + prev}
		}
		seen[subject] = arg
		return nil
	}
	add := func(m *nats.Msg, arg string) error {
		// Batch headers are added per attempt; count them now.
		if p.subj.summed(m.Subject) {
			sum(m)
		}
		size := hdrLen(m.Header) + len(m.Data) + len(hdrBID) + 22 + len(hdrBSeq) + 4 + len(hdrBCom) + 1 + 12 + len(hdrAt) + 8
		if size > p.maxPayload {
			return &LimitError{Op: op, Field: arg, Limit: "max_payload (headers and data of one message)", Got: size, Max: p.maxPayload}
		}
		msgs = append(msgs, m)
		return nil
	}
	// Events first: the server checks a message's ID before its expectations, message
	// by message, so a retried commit is recognised as a duplicate before a write's
	// expectation (stale since the original landed) refuses it as a conflict.
	expect := map[string]uint64{}
	for i, s := range c.Streams {
		if _, dup := expect[s.Stream]; dup {
			return nil, nil, &ArgumentError{Op: op, Arg: fmt.Sprintf("streams[%d].Stream", i), Reason: fmt.Sprintf("%q is checked twice", s.Stream)}
		}
		expect[s.Stream] = s.Version
	}
	ids := map[string]int{}
	checked := map[string]bool{}
	for i, e := range c.Events {
		if err := pipeline.CheckEvents(op, []pipeline.Event{e.Event}); err != nil {
			return nil, nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		subject := p.subj.stream(e.Stream)
		if len(subject) > MaxSubjectLen {
			return nil, nil, &LimitError{Op: op, Field: fmt.Sprintf("events[%d].Stream", i), Limit: "encoded subject length", Got: len(subject), Max: MaxSubjectLen}
		}
		m := nats.NewMsg(subject)
		m.Data = encodeEvent(e.Event)
		m.Header.Set(hdrRev, strconv.FormatUint(e.Revision, 10))
		if e.ID != "" {
			if !validHeaderValue(e.ID) {
				return nil, nil, &ArgumentError{Op: op, Arg: fmt.Sprintf("events[%d].ID", i), Reason: "must not hold CR, LF or leading or trailing blanks"}
			}
			if j, dup := ids[e.ID]; dup {
				return nil, nil, &ArgumentError{Op: op, Arg: fmt.Sprintf("events[%d].ID", i), Reason: fmt.Sprintf("repeats events[%d].ID", j)}
			}
			ids[e.ID] = i
			m.Header.Set(hdrMsgID, msgIDEvt+e.ID)
		}
		if v, ok := expect[e.Stream]; ok && !checked[e.Stream] {
			checked[e.Stream] = true
			m.Header.Set(hdrExpSeq, strconv.FormatUint(v, 10))
			checks = append(checks, check{kind: "stream", stream: e.Stream, subject: subject, version: v})
		}
		if err := add(m, fmt.Sprintf("events[%d].Data", i)); err != nil {
			return nil, nil, err
		}
	}
	for i, w := range c.Writes {
		arg := fmt.Sprintf("writes[%d].Key", i)
		subject := p.subj.keyGen(w.Family, w.Generation, w.Key)
		if err := claim(subject, arg); err != nil {
			return nil, nil, err
		}
		m := nats.NewMsg(subject)
		if w.Delete {
			m.Header.Set(hdrOp, opDelete)
		} else {
			m.Data = w.Value
		}
		if w.AtCommit != "" {
			switch {
			case w.Delete:
				return nil, nil, &ArgumentError{Op: op, Arg: fmt.Sprintf("writes[%d].AtCommit", i), Reason: "a delete cannot be positioned"}
			case p.codecs[w.AtCommit] == nil:
				return nil, nil, &ArgumentError{Op: op, Arg: fmt.Sprintf("writes[%d].AtCommit", i), Reason: fmt.Sprintf("%q is not in Config.PositionedValues", w.AtCommit)}
			}
			// The commit marker is message n-1 and this one is len(msgs).
			m.Header.Set(hdrEnc, w.AtCommit)
			m.Header.Set(hdrAt, strconv.Itoa(n-1-len(msgs)))
		}
		if !w.Blind {
			m.Header.Set(hdrExpSeq, strconv.FormatUint(w.Version, 10))
			checks = append(checks, check{kind: "write", family: w.Family, key: w.Key, subject: subject, version: w.Version})
		}
		if err := add(m, fmt.Sprintf("writes[%d].Value", i)); err != nil {
			return nil, nil, err
		}
	}
	marker := func(subject string, version uint64) *nats.Msg {
		m := nats.NewMsg(p.subj.marker())
		m.Header.Set(hdrExpSeq, strconv.FormatUint(version, 10))
		m.Header.Set(hdrExpSub, subject)
		return m
	}
	for i, s := range c.Streams {
		if checked[s.Stream] {
			continue
		}
		subject := p.subj.stream(s.Stream)
		if err := claim(subject, fmt.Sprintf("streams[%d].Stream", i)); err != nil {
			return nil, nil, err
		}
		checks = append(checks, check{kind: "stream", stream: s.Stream, subject: subject, version: s.Version})
		if err := add(marker(subject, s.Version), fmt.Sprintf("streams[%d]", i)); err != nil {
			return nil, nil, err
		}
	}
	for i, r := range c.Reads {
		arg := fmt.Sprintf("reads[%d].Key", i)
		subject := p.subj.keyGen(r.Family, r.Generation, r.Key)
		if err := claim(subject, arg); err != nil {
			return nil, nil, err
		}
		checks = append(checks, check{kind: "read", family: r.Family, key: r.Key, subject: subject, version: r.Version})
		if err := add(marker(subject, r.Version), arg); err != nil {
			return nil, nil, err
		}
	}
	for i, f := range c.Families {
		subject := p.subj.catalog(f.Family, f.shard())
		if err := claim(subject, fmt.Sprintf("families[%d].Family", i)); err != nil {
			return nil, nil, err
		}
		checks = append(checks, check{kind: "family", family: f.Family, subject: subject, version: f.Version})
		if err := add(marker(subject, f.Version), fmt.Sprintf("families[%d]", i)); err != nil {
			return nil, nil, err
		}
	}
	msgs = append(msgs, nats.NewMsg(p.subj.commit()))
	if len(msgs) != n {
		return nil, nil, fmt.Errorf("rockline/jetstream: Commit: built %d messages, counted %d", len(msgs), n)
	}
	return msgs, checks, nil
}

// encodeEvent frames an event's type, metadata and data in one payload:
// uvarint(len(type)) type uvarint(len(metadata)) metadata data. An event with tags
// is framed 0x00 uvarint(len(type)) type uvarint(len(tags)) (uvarint(len(tag)) tag)...
// uvarint(len(metadata)) metadata data: a type is never empty, so the leading zero
// tells the two apart, and events written before tags existed decode unchanged.
func encodeEvent(e pipeline.Event) []byte {
	n := 3*binary.MaxVarintLen32 + 1 + len(e.Type) + len(e.Metadata) + len(e.Data)
	for _, t := range e.Tags {
		n += binary.MaxVarintLen32 + len(t)
	}
	b := make([]byte, 0, n)
	if len(e.Tags) > 0 {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Type)))
	b = append(b, e.Type...)
	if len(e.Tags) > 0 {
		b = binary.AppendUvarint(b, uint64(len(e.Tags)))
		for _, t := range e.Tags {
			b = binary.AppendUvarint(b, uint64(len(t)))
			b = append(b, t...)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(e.Metadata)))
	b = append(b, e.Metadata...)
	return append(b, e.Data...)
}

// decodeEvent parses encodeEvent's payload; ok is false when it does not decode (a
// field past the end, a type or tag that is empty or not UTF-8).
func decodeEvent(b []byte) (typ string, tags []string, meta, data []byte, ok bool) {
	field := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, false
		}
		f := b[k : k+int(n)]
		b = b[k+int(n):]
		return f, true
	}
	tagged := len(b) > 0 && b[0] == 0
	if tagged {
		b = b[1:]
	}
	t, ok := field()
	if !ok || len(t) == 0 || !utf8.Valid(t) {
		return "", nil, nil, nil, false
	}
	if tagged {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(len(b)-k)/2 {
			return "", nil, nil, nil, false
		}
		b = b[k:]
		tags = make([]string, n)
		for i := range tags {
			tag, ok := field()
			if !ok || len(tag) == 0 || !utf8.Valid(tag) {
				return "", nil, nil, nil, false
			}
			tags[i] = string(tag)
		}
	}
	meta, ok = field()
	if !ok {
		return "", nil, nil, nil, false
	}
	return string(t), tags, meta, b, true
}

type pubAck struct {
	Stream    string    `json:"stream"`
	Seq       uint64    `json:"seq"`
	Duplicate bool      `json:"duplicate"`
	Batch     string    `json:"batch"`
	Count     int       `json:"count"`
	Error     *apiError `json:"error"`
}

// publishBatch sends msgs as the atomic batch id: every message but the last without
// a reply (one connection keeps them in order), the last with Nats-Batch-Commit as a
// request bounded by PublishTimeout. It returns the ack's sequence, or the server's
// error, or a transport error (a timeout: the batch may have landed).
func (p *Partition) publishBatch(ctx context.Context, id string, msgs []*nats.Msg) (seq uint64, aerr *apiError, sent bool, err error) {
	for i, tmpl := range msgs {
		m := nats.NewMsg(tmpl.Subject)
		for k, v := range tmpl.Header {
			m.Header[k] = v
		}
		m.Data = tmpl.Data
		m.Header.Set(hdrBID, id)
		m.Header.Set(hdrBSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := p.nc.PublishMsg(m); err != nil {
				return 0, nil, false, err
			}
			continue
		}
		m.Header.Set(hdrBCom, "1")
		m.Header.Set(hdrTxn, id)
		m.Header.Set(hdrMsgID, msgIDTxn+id)
		pctx, cancel := deadline(ctx, p.cfg.PublishTimeout)
		resp, err := p.nc.RequestMsgWithContext(pctx, m)
		cancel()
		if err != nil {
			// No responders means nothing received the commit message; any other
			// failure may have come after it was sent.
			return 0, nil, !errors.Is(err, nats.ErrNoResponders), err
		}
		var ack pubAck
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, nil, true, fmt.Errorf("decoding the publish ack %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			return 0, ack.Error, true, nil
		}
		if ack.Batch != id || ack.Count != len(msgs) {
			return 0, nil, true, fmt.Errorf("publish ack for batch %q of %d messages, sent %q of %d", ack.Batch, ack.Count, id, len(msgs))
		}
		return ack.Seq, nil, true, nil
	}
	return 0, nil, false, errors.New("empty batch")
}

// fenceRefusal settles a batch the server refused before the refusal is reported as
// conflict. A refusal needs no quorum: a leader cut off from the others keeps leading
// its old term for seconds, and after the partition heals it can refuse a batch (in
// flight, wrong last sequence, as it sees a stale state) that the real leader stores,
// and answer first. So an abort marker carrying the commit marker's message ID is
// published, as for a timeout (resolve): answered as a duplicate, the batch landed and
// its position is returned; stored, the batch can never land and conflict stands. It
// costs one replicated write, and an Aborted log entry, per conflict.
func (p *Partition) fenceRefusal(ctx context.Context, b batch, conflict error) (uint64, error) {
	pos, err := p.resolve(ctx, b, conflict)
	switch {
	case err == nil:
		p.stats.staleRefusals.Add(1)
		return pos, nil
	case errors.Is(err, ErrTimeout): // fenced out: the refusal was the outcome
		return 0, conflict
	}
	return 0, err
}

// resolve settles a commit whose publish timed out, by landing an abort marker that
// carries the commit marker's message ID: if the commit landed, the server answers
// the abort as a duplicate with the commit's position; if the abort lands, the commit
// can no longer land (its marker would now be the duplicate). A duplicate answer is
// read back before it is believed: it may name an earlier abort marker of the same
// batch (an attempt whose answer was lost but which was stored), and then the batch
// is fenced out at that marker, never landed. It never resends the commit itself. It
// runs for at most ResolveTimeout, past ctx's end.
func (p *Partition) resolve(ctx context.Context, b batch, cause error) (uint64, error) {
	id := b.id
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ResolveTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		m := nats.NewMsg(p.subj.commit())
		m.Header.Set(hdrMsgID, msgIDTxn+id)
		m.Header.Set(hdrAbort, id)
		pctx, pcancel := deadline(rctx, p.cfg.PublishTimeout)
		resp, err := p.nc.RequestMsgWithContext(pctx, m)
		pcancel()
		if err == nil {
			var ack pubAck
			if err := json.Unmarshal(resp.Data, &ack); err != nil {
				return 0, fmt.Errorf("%w: batch %s: decoding the abort's ack: %w (publish: %w)", ErrOutcomeUnknown, id, err, cause)
			}
			abort := ack.Seq
			if ack.Error == nil && ack.Duplicate {
				// The marker's message ID is stored at ack.Seq: the batch's own
				// commit marker (it landed there), or an abort marker of this same
				// batch sent earlier, one whose answer was lost (a request that
				// timed out, flushed by the client library on reconnect), which
				// fenced the batch out just as this one would have.
				kind, err := p.markerAt(rctx, id, ack.Seq)
				switch {
				case err != nil:
					return 0, fmt.Errorf("%w: batch %s: %w (publish: %w)", ErrOutcomeUnknown, id, err, cause)
				case kind == markerCommit:
					return ack.Seq, nil
				case kind != markerAbort:
					return 0, fmt.Errorf("%w: batch %s: the message at %d holds its commit marker's message ID but is neither its commit nor its abort marker (publish: %w)", ErrOutcomeUnknown, id, ack.Seq, cause)
				}
			}
			switch {
			case ack.Error == nil:
				// An abort marker of the batch is stored at abort: the batch can no
				// longer land, but it may have landed just before, while it was
				// being proposed (fence.go).
				pos, found, err := p.landedBelow(rctx, b, abort)
				switch {
				case err != nil:
					return 0, fmt.Errorf("%w: batch %s: %w (publish: %w)", ErrOutcomeUnknown, id, err, cause)
				case found:
					p.stats.landedBelow.Add(1)
					return pos, nil
				}
				return 0, fmt.Errorf("%w: batch %s fenced out by the abort marker at %d (publish: %w)", ErrTimeout, id, abort, cause)
			case ack.Error.ErrCode != codeDuplicateInFlight:
				return 0, fmt.Errorf("%w: batch %s: abort refused: %w (publish: %w)", ErrOutcomeUnknown, id, ack.Error.serverError("Commit"), cause)
			}
			// 10158: the commit is being proposed right now; ask again.
		} else if !isTimeout(err) && !errors.Is(err, nats.ErrNoResponders) {
			return 0, fmt.Errorf("%w: batch %s: %w (publish: %w)", ErrOutcomeUnknown, id, err, cause)
		}
		if err := backoff(rctx, attempt); err != nil {
			return 0, fmt.Errorf("%w: batch %s unresolved after %v (publish: %w)", ErrOutcomeUnknown, id, p.cfg.ResolveTimeout, cause)
		}
	}
}

// latest reads the current version of every check's subject (Direct Get multi_last
// without a position; a replica may answer a little behind, which can only make a
// changed version look unchanged, and the server then judges the retry itself).
func (p *Partition) latest(ctx context.Context, checks []check) (map[string]uint64, error) {
	out := make(map[string]uint64, len(checks))
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	for start := 0; start < len(checks); start += MaxMultiGet {
		end := min(start+MaxMultiGet, len(checks))
		req := multiGetRequest{}
		for _, c := range checks[start:end] {
			req.MultiLast = append(req.MultiLast, c.subject)
		}
		msgs, err := p.multiGet(rctx, "Commit", req)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			out[m.Subject] = msgSeq(m)
		}
	}
	return out, nil
}

// recheck returns a *ConflictError for the first check whose version changed, or nil
// when none did. A re-read that fails (ctx ended, no replica answered) is reported as
// a conflict on the first check, the re-read's error with the cause: the refusal
// stands, and whether anything changed is not known.
func (p *Partition) recheck(ctx context.Context, checks []check, cause error) error {
	if len(checks) == 0 {
		return nil
	}
	cur, err := p.latest(ctx, checks)
	if err != nil {
		return checks[0].conflict(0, fmt.Errorf("re-reading after %w: %w", cause, err))
	}
	for _, c := range checks {
		if cur[c.subject] != c.version {
			return c.conflict(cur[c.subject], cause)
		}
	}
	return nil
}

// nameConflict turns a failed expectation (10071) into a *ConflictError naming the
// key or stream that changed, found by re-reading.
func (p *Partition) nameConflict(ctx context.Context, checks []check, cause error) error {
	if len(checks) == 0 {
		return &ConflictError{Kind: "write", Err: cause}
	}
	if err := p.recheck(ctx, checks, cause); err != nil {
		return err
	}
	// The replica that answered is behind the leader: name the first check.
	return checks[0].conflict(checks[0].version, cause)
}

// duplicate handles a batch refused because a message ID is already stored (10201,
// which carries no sequence). The batch's own commit marker ID first: stored, this
// batch ID landed before (a re-send after a refusal that came from a stale leader)
// and its position is the marker's. Then each event ID is looked up with a probe, and
// if all of them belong to one commit that commit's position is returned.
func (p *Partition) duplicate(ctx context.Context, id string, c *Commit) (uint64, error) {
	if pos, found, err := p.ownMarker(ctx, id); err != nil || found {
		return pos, err
	}
	var pos uint64
	var firstDup string
	all := true
	for _, e := range c.Events {
		if e.ID == "" {
			continue
		}
		seq, found, err := p.probe(ctx, msgIDEvt+e.ID)
		if err != nil {
			return 0, err
		}
		if !found {
			all = false
			continue
		}
		at, _, err := p.leaderGet(ctx, "Commit", msgGetRequest{Seq: seq, NextFor: p.subj.commit()})
		if err != nil {
			return 0, err
		}
		if firstDup == "" {
			firstDup, pos = e.ID, at
		} else if at != pos {
			all = false
		}
	}
	if firstDup == "" {
		// The server holds one of the batch's message IDs, and it is none of its
		// events': its commit marker's, which the probe did not see (answered by a
		// leader cut off from the others, or a replica behind). Ask again until
		// ReadTimeout; the batch landed if it is ours.
		rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
		defer cancel()
		for attempt := 0; backoff(rctx, attempt) == nil; attempt++ {
			if pos, found, err := p.ownMarker(rctx, id); err == nil && found {
				return pos, nil
			}
		}
		return 0, fmt.Errorf("%w: batch %s: the server holds one of its message IDs (10201), but neither its commit marker nor an event of it was found", ErrOutcomeUnknown, id)
	}
	if !all {
		return 0, &DuplicateEventError{ID: firstDup, Position: pos}
	}
	return pos, nil
}

// ownMarker reports the position of batch id's commit marker if it is stored: the
// probe of its message ID answers with a sequence, and the message there is a commit
// marker of that batch (an abort marker carries the same message ID; it is not).
func (p *Partition) ownMarker(ctx context.Context, id string) (uint64, bool, error) {
	seq, found, err := p.probe(ctx, msgIDTxn+id)
	if err != nil || !found {
		return 0, false, err
	}
	kind, err := p.markerAt(ctx, id, seq)
	return seq, kind == markerCommit, err
}

// What markerAt found at a sequence that holds a batch's commit marker message ID.
const (
	markerOther  = iota // neither (not a marker of the batch)
	markerCommit        // the batch's commit marker: the batch landed there
	markerAbort         // an abort marker of the batch: it fenced the batch out
)

// markerAt reads the message at seq, which the server named as the holder of batch
// id's commit marker message ID, and says which of the batch's markers it is. Both
// markers carry that message ID, so a duplicate answer alone never proves the batch
// landed. It waits, up to ReadTimeout, for a replica that has not applied seq yet.
func (p *Partition) markerAt(ctx context.Context, id string, seq uint64) (int, error) {
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		msgs, _, err := p.batchBySeq(rctx, "Commit", seq, 1)
		if err != nil {
			return markerOther, err
		}
		if len(msgs) > 0 && msgSeq(msgs[0]) == seq {
			h := msgs[0].Header
			switch {
			case h.Get(hdrAbort) == id:
				return markerAbort, nil
			case h.Get(hdrTxn) == id && h.Get(hdrAbort) == "":
				return markerCommit, nil
			}
			return markerOther, nil
		}
		if err := backoff(rctx, attempt); err != nil {
			return markerOther, fmt.Errorf("rockline/jetstream: Commit: reading the stored marker of batch %s at %d: %w", id, seq, err)
		}
	}
}

// probe asks whether the message ID id is stored within the dedupe window and at
// which sequence, without storing anything: the server checks message IDs before
// expectations, and the probe's expectation on a subject never written always fails.
func (p *Partition) probe(ctx context.Context, id string) (uint64, bool, error) {
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		m := nats.NewMsg(p.subj.probe())
		m.Header.Set(hdrMsgID, id)
		m.Header.Set(hdrExpSeq, strconv.FormatUint(1<<62, 10))
		resp, err := p.nc.RequestMsgWithContext(rctx, m)
		if err != nil {
			return 0, false, fmt.Errorf("rockline/jetstream: Commit: looking up message id %q: %w", id, err)
		}
		var ack pubAck
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, false, fmt.Errorf("rockline/jetstream: Commit: looking up message id %q: %w", id, err)
		}
		switch {
		case ack.Error == nil && ack.Duplicate:
			return ack.Seq, true, nil
		case ack.Error == nil:
			return 0, false, fmt.Errorf("rockline/jetstream: Commit: the probe for message id %q was stored at %d", id, ack.Seq)
		case ack.Error.ErrCode == codeWrongLastSeq || ack.Error.ErrCode == codeSubjectInFlight:
			return 0, false, nil
		case ack.Error.ErrCode != codeDuplicateInFlight:
			return 0, false, ack.Error.serverError("Commit")
		}
		if err := backoff(rctx, attempt); err != nil {
			return 0, false, fmt.Errorf("rockline/jetstream: Commit: message id %q stays in flight: %w", id, err)
		}
	}
}
