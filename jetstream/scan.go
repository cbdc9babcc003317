package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Paged reads of a family: an Iterator over a key range at a commit position, in key
// order, forward and backward, with no bound on the family's size.
//
// How it reads. JetStream has no ordered index of subjects, and a Direct Get
// multi_last over a wildcard resolves every matching subject before it answers
// (413 "too many results" past 1,024), so a family is read in two steps:
//
//  1. The family's subjects are listed once, from the stream leader: STREAM.INFO
//     with subjects_filter P.k.<family>.*, 100,000 subjects a page (the server's
//     JSMaxSubjectDetails, pages by offset in subject order). The leader's list holds
//     every key the family had at any position it has applied, so every key that
//     exists at the iterator's position: keys are never removed but by a purge (a
//     delete is a message). Subjects only being added between pages, a page can repeat
//     one, never miss one. The keys are decoded and sorted (base64url does not keep
//     byte order) and cut to [Lower, Upper).
//  2. Values are read as the iterator moves, in windows of consecutive keys: one
//     Direct Get multi_last naming the window's subjects (and the commit marker fence)
//     with up_to_seq at the position, as Get does. A window starts at 32 keys and
//     doubles to MaxMultiGet-1, bounded by the request's size; an answer the server
//     cuts at its max_pending bytes is continued from the next sequence.
//
// Cost: one listing request per 100,000 keys of the family (whatever the range),
// holding every key of the family in memory once, and one multi-get per window. A
// family's subjects include keys deleted at the position (their tombstones) and keys
// written after it; both are read and skipped.

// IterOptions bound an Iterator: Lower inclusive, Upper exclusive, nil for
// unbounded. Generation is the family's generation to read (0 means 1).
type IterOptions struct {
	Lower, Upper []byte
	Generation   uint64
}

// Iterator walks the keys of one generation of a family that exist at a commit
// position, in key order: First, Seek and Next ascending, Last and Prev descending,
// either step after any positioning. It is not safe for concurrent use. Its reads use
// the context it was opened with; an error ends the walk (Valid false) and Err
// reports it. Close releases it.
type Iterator struct {
	p      *Partition
	ctx    context.Context
	op     string
	family string
	gen    uint64
	at     uint64
	origin posOrigin // where at came from (callerPos unless a Txn's)

	keys     [][]byte // every listed key within bounds, sorted
	subjects []string // keys' subjects

	// own overlays a transaction's buffered writes by key (a delete hides the key;
	// own-only keys are in keys with an empty subject), and onYield sees every key
	// yielded from the snapshot (Txn.NewIterator tracks them).
	own     map[string]Write
	onYield func(Item)

	lo, hi int         // the window loaded: keys[lo:hi]
	win    []*nats.Msg // the last message at or below at of each key in the window (nil: none)
	chunk  int         // the next window's size

	i     int
	item  Item
	valid bool
	err   error
}

const (
	firstWindow = 32
	maxWindow   = MaxMultiGet - 1
)

// NewIterator opens an iterator over family at the commit position at (0: the empty
// partition, an iterator with no keys). It lists the family's keys now (one
// STREAM.INFO per 100,000 keys); values are read as it moves. Errors: ErrClosed, a
// *TruncatedError for a position below the truncation point, a *LimitError for a
// family name whose subjects cannot fit, the server's errors. A position that is not
// a commit position, or one the answering replica lacks, fails the first move, as Get
// does.
func (p *Partition) NewIterator(ctx context.Context, family string, o IterOptions, at uint64) (*Iterator, error) {
	return p.newIterator(ctx, "NewIterator", family, o, at)
}

func (p *Partition) newIterator(ctx context.Context, op, family string, o IterOptions, at uint64) (*Iterator, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if t := p.truncated.Load(); at < t {
		return nil, &TruncatedError{Position: at, First: t}
	}
	if n := p.subj.keyGenLen(family, o.Generation, []byte{0}); n > MaxSubjectLen {
		return nil, &LimitError{Op: op, Field: "family", Limit: "encoded subject length", Got: n, Max: MaxSubjectLen}
	}
	it := &Iterator{p: p, ctx: ctx, op: op, family: family, gen: max(o.Generation, 1), at: at, chunk: firstWindow}
	return it, it.list(o, nil)
}

// list fills keys and subjects: the family's keys within o's bounds, plus the keys of
// own (which need no subject).
func (it *Iterator) list(o IterOptions, own map[string]Write) error {
	p, op, family := it.p, it.op, it.family
	var subjects []string
	if it.at > 0 {
		var err error
		if subjects, err = p.listSubjects(it.ctx, op, p.subj.familyGen(family, o.Generation)); err != nil {
			return err
		}
	}
	type entry struct {
		key     []byte
		subject string
	}
	es := make([]entry, 0, len(subjects))
	for _, s := range subjects {
		kind, fam, key, gen, ok := p.subj.parseGen(s)
		if !ok || kind != tokKey || string(fam) != family || gen != it.gen {
			return fmt.Errorf("rockline/jetstream: %s: unexpected subject %q in family %q", op, s, family)
		}
		if (o.Lower != nil && bytes.Compare(key, o.Lower) < 0) || (o.Upper != nil && bytes.Compare(key, o.Upper) >= 0) {
			continue
		}
		es = append(es, entry{key, s})
	}
	for k := range own {
		key := []byte(k)
		if (o.Lower != nil && bytes.Compare(key, o.Lower) < 0) || (o.Upper != nil && bytes.Compare(key, o.Upper) >= 0) {
			continue
		}
		es = append(es, entry{key, ""})
	}
	// Sorted by key, a key's subject before its own-only entry ("" sorts first, so
	// compare descending), then one entry per key.
	slices.SortFunc(es, func(a, b entry) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return -strings.Compare(a.subject, b.subject)
	})
	es = slices.CompactFunc(es, func(a, b entry) bool { return bytes.Equal(a.key, b.key) })
	it.keys = make([][]byte, len(es))
	it.subjects = make([]string, len(es))
	for i, e := range es {
		it.keys[i], it.subjects[i] = e.key, e.subject
	}
	it.own = own
	return nil
}

// First moves to the first key.
func (it *Iterator) First() { it.settle(0, 1) }

// Last moves to the last key.
func (it *Iterator) Last() { it.settle(len(it.keys)-1, -1) }

// Seek moves to the first key at or after key.
func (it *Iterator) Seek(key []byte) {
	i, _ := slices.BinarySearchFunc(it.keys, key, bytes.Compare)
	it.settle(i, 1)
}

// SeekForPrev moves to the last key at or before key.
func (it *Iterator) SeekForPrev(key []byte) {
	i, found := slices.BinarySearchFunc(it.keys, key, bytes.Compare)
	if !found {
		i--
	}
	it.settle(i, -1)
}

// Next moves to the next key (ascending); nothing when not Valid.
func (it *Iterator) Next() {
	if it.valid {
		it.settle(it.i+1, 1)
	}
}

// Prev moves to the previous key (descending); nothing when not Valid.
func (it *Iterator) Prev() {
	if it.valid {
		it.settle(it.i-1, -1)
	}
}

// Valid reports whether the iterator is at a key.
func (it *Iterator) Valid() bool { return it.valid }

// Item returns the current key, value and version (valid while Valid).
func (it *Iterator) Item() Item { return it.item }

// Key returns the current key.
func (it *Iterator) Key() []byte { return it.item.Key }

// Value returns the current value.
func (it *Iterator) Value() []byte { return it.item.Value }

// Err returns the error that ended the walk, or nil.
func (it *Iterator) Err() error { return it.err }

// Close releases the iterator; it is then not Valid. It returns Err.
func (it *Iterator) Close() error {
	it.valid, it.keys, it.subjects, it.win = false, nil, nil, nil
	return it.err
}

// settle moves to the first key from index i on, in direction dir, that exists at the
// position, loading windows as needed.
func (it *Iterator) settle(i, dir int) {
	it.valid = false
	if it.err != nil {
		return
	}
	for ; i >= 0 && i < len(it.keys); i += dir {
		if w, ok := it.own[string(it.keys[i])]; ok {
			if w.Delete {
				continue
			}
			it.i, it.valid = i, true
			it.item = Item{Family: it.family, Key: it.keys[i], Value: w.Value, Generation: it.gen}
			return
		}
		if i < it.lo || i >= it.hi {
			if err := it.load(i, dir); err != nil {
				it.err = err
				return
			}
		}
		m := it.win[i-it.lo]
		if m == nil || m.Header.Get(hdrOp) == opDelete {
			continue
		}
		seq := msgSeq(m)
		v, atCommit, err := it.p.value(m.Subject, seq, m.Header, m.Data)
		if err != nil {
			it.err = err
			return
		}
		it.i, it.valid = i, true
		it.item = Item{Family: it.family, Key: it.keys[i], Value: v, Version: seq, Generation: it.gen, AtCommit: atCommit}
		if it.onYield != nil {
			it.onYield(it.item)
		}
		return
	}
}

// load reads the window that starts at i (dir 1) or ends at i (dir -1).
func (it *Iterator) load(i, dir int) error {
	n := it.chunk
	it.chunk = min(2*it.chunk, maxWindow)
	lo, hi := i, min(len(it.keys), i+n)
	if dir < 0 {
		lo, hi = max(0, i+1-n), i+1
	}
	// Bound the request's size (the subjects, quoted, plus the fence) by half the
	// server's max_payload.
	size, limit := 64+len(it.p.subj.commit()), it.p.maxPayload/2
	if dir > 0 {
		for j := lo; j < hi; j++ {
			if size += len(it.subjects[j]) + 3; size > limit {
				hi = max(j, lo+1)
				break
			}
		}
	} else {
		for j := hi - 1; j >= lo; j-- {
			if size += len(it.subjects[j]) + 3; size > limit {
				lo = min(j+1, hi-1)
				break
			}
		}
	}
	var ask []string
	for _, s := range it.subjects[lo:hi] {
		if s != "" {
			ask = append(ask, s)
		}
	}
	msgs, err := it.p.snapshotAll(it.ctx, it.op, ask, it.at, it.origin)
	if err != nil {
		return err
	}
	idx := make(map[string]int, hi-lo)
	for j := lo; j < hi; j++ {
		if it.subjects[j] != "" {
			idx[it.subjects[j]] = j - lo
		}
	}
	win := make([]*nats.Msg, hi-lo)
	for _, m := range msgs {
		j, ok := idx[m.Subject]
		if !ok {
			return fmt.Errorf("rockline/jetstream: %s: answer holds subject %q, not asked for", it.op, m.Subject)
		}
		win[j] = m
	}
	it.lo, it.hi, it.win = lo, hi, win
	return nil
}

// listSubjects returns every subject of the stream matching filter, as the stream
// leader holds them now (STREAM.INFO with subjects_filter, paged by offset).
func (p *Partition) listSubjects(ctx context.Context, op, filter string) ([]string, error) {
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	seen := map[string]struct{}{}
	var out []string
	for offset := 0; ; {
		body, _ := json.Marshal(struct {
			Filter string `json:"subjects_filter"`
			Offset int    `json:"offset,omitempty"`
		}{filter, offset})
		m, err := p.apiRequest(rctx, op, "$JS.API.STREAM.INFO."+p.cfg.Stream, body)
		if err != nil {
			return nil, err
		}
		var resp struct {
			Error  *apiError `json:"error"`
			Total  int       `json:"total"`
			Offset int       `json:"offset"`
			Limit  int       `json:"limit"`
			State  struct {
				Subjects map[string]uint64 `json:"subjects"`
			} `json:"state"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			return nil, fmt.Errorf("rockline/jetstream: %s: decoding the stream info: %w", op, err)
		}
		if resp.Error != nil {
			return nil, resp.Error.serverError(op)
		}
		for s := range resp.State.Subjects {
			if _, dup := seen[s]; !dup {
				seen[s] = struct{}{}
				out = append(out, s)
			}
		}
		if resp.Limit <= 0 || len(resp.State.Subjects) == 0 || offset+len(resp.State.Subjects) >= resp.Total {
			return out, nil
		}
		offset += len(resp.State.Subjects)
	}
}

// apiRequest sends a JetStream API request answered by the stream leader, asking again
// (each try bounded by a second) while nobody answers, until ctx ends.
func (p *Partition) apiRequest(ctx context.Context, op, subject string, body []byte) (*nats.Msg, error) {
	for {
		tctx, cancel := deadline(ctx, time.Second)
		m, err := p.nc.RequestWithContext(tctx, subject, body)
		cancel()
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil || (!isTimeout(err) && !errors.Is(err, nats.ErrNoResponders)) {
			return nil, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
		}
	}
}

// multiLastPaged reads the last message at or below at of every subject, in windows of
// at most MaxMultiGet-1 subjects, and hands each found to fn.
func (p *Partition) multiLastPaged(ctx context.Context, op string, subjects []string, at uint64, origin posOrigin, fn func(*nats.Msg) error) error {
	for start := 0; start < len(subjects); {
		end, size := start, 64
		for end < len(subjects) && end-start < maxWindow && size+len(subjects[end])+3 <= p.maxPayload/2 {
			size += len(subjects[end]) + 3
			end++
		}
		end = max(end, start+1)
		msgs, err := p.snapshotAll(ctx, op, subjects[start:end], at, origin)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := fn(m); err != nil {
				return err
			}
		}
		start = end
	}
	return nil
}

// snapshotAll is snapshot for literal subjects with an answer of any size: an answer
// the server cut at its max_pending bytes (Nats-Num-Pending > 0 at the end of batch)
// is continued from the sequence after the last one received.
func (p *Partition) snapshotAll(ctx context.Context, op string, subjects []string, at uint64, origin posOrigin) ([]*nats.Msg, error) {
	if t := p.truncated.Load(); at < t {
		return nil, &TruncatedError{Position: at, First: t}
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	commit := p.subj.commit()
	filters := append(slices.Clip(subjects), commit)
	for attempt := 0; ; attempt++ {
		var out []*nats.Msg
		var fence, from uint64
		for {
			msgs, pending, err := p.multiGetFrom(rctx, op, multiGetSeqRequest{MultiLast: filters, UpToSeq: at, Seq: from})
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				from = msgSeq(m) + 1
				if m.Subject == commit {
					fence = msgSeq(m)
					continue
				}
				out = append(out, m)
			}
			if pending == 0 || len(msgs) == 0 {
				break
			}
		}
		if fence == at {
			return out, nil
		}
		if err := p.awaitFence(rctx, op, at, fence, attempt, origin); err != nil {
			return nil, err
		}
	}
}

type multiGetSeqRequest struct {
	MultiLast []string `json:"multi_last"`
	UpToSeq   uint64   `json:"up_to_seq,omitempty"`
	Seq       uint64   `json:"seq,omitempty"`
}

// multiGetFrom sends one Direct Get multi_last request and returns its messages and
// the count the server left out (Nats-Num-Pending of the end of batch).
func (p *Partition) multiGetFrom(ctx context.Context, op string, req multiGetSeqRequest) ([]*nats.Msg, uint64, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, 0, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
	}
	return p.directBatch(ctx, op, body, MaxMultiGet)
}

// directBatch sends a Direct Get request answered in several messages (multi_last, or
// a batch by sequence) and collects them up to the end of batch, returning the count
// the server left out.
//
// Direct Gets are answered by any replica. One that is cut off from the others, or
// gone, may still hold interest in the request subject, and a request routed to it
// gets no answer: so a request whose first answer does not come within
// directAttemptTimeout (or that meets no responders, a stream electing its leader)
// is sent again, to whichever replica takes it, until ctx ends. Once a replica has
// answered, the rest of its answer is awaited up to ctx's end.
func (p *Partition) directBatch(ctx context.Context, op string, body []byte, most int) ([]*nats.Msg, uint64, error) {
	for attempt := 0; ; attempt++ {
		out, pending, answered, err := p.directBatchOnce(ctx, op, body, most)
		if err == nil || answered || ctx.Err() != nil {
			return out, pending, err
		}
		p.stats.readRetries.Add(1)
		if berr := backoff(ctx, attempt); berr != nil {
			return nil, 0, err
		}
	}
}

// directAttemptTimeout bounds the wait for the first answer to one Direct Get request.
const directAttemptTimeout = 250 * time.Millisecond

// directBatchOnce is one attempt of directBatch; answered reports whether a replica
// answered at all (an error then is its answer, or ctx's end while it streamed).
// most is the largest number of messages the request can be answered with, besides
// the end of batch (the server's cap for multi_last, the batch size otherwise).
func (p *Partition) directBatchOnce(ctx context.Context, op string, body []byte, most int) (out []*nats.Msg, pending uint64, answered bool, err error) {
	inbox := p.nc.NewInbox()
	sub, err := p.subscribeAnswers(inbox, most)
	if err != nil {
		return nil, 0, true, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
	}
	defer sub.close()
	if err := p.nc.PublishRequest("$JS.API.DIRECT.GET."+p.cfg.Stream, inbox, body); err != nil {
		return nil, 0, true, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
	}
	first, cancel := deadline(ctx, directAttemptTimeout)
	defer cancel()
	for {
		wait := ctx
		if !answered {
			wait = first
		}
		m, err := sub.next(wait)
		if err != nil {
			return nil, 0, answered, fmt.Errorf("rockline/jetstream: %s: direct get: %w", op, err)
		}
		status := m.Header.Get("Status")
		if status == "503" && !answered { // no responders: between leaders
			return nil, 0, false, fmt.Errorf("rockline/jetstream: %s: direct get: %w", op, nats.ErrNoResponders)
		}
		answered = true
		switch status {
		case "":
			m.Subject = m.Header.Get("Nats-Subject")
			if err := p.verify(msgSeq(m), m.Subject, m.Header, m.Data); err != nil {
				return nil, 0, true, err
			}
			out = append(out, m)
		case "204": // end of batch
			np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, np, true, nil
		case "404":
			return out, 0, true, nil
		case "413":
			return nil, 0, true, &LimitError{Op: op, Field: "answer", Limit: "multi-get results", Got: MaxMultiGet + 1, Max: MaxMultiGet - 1}
		default:
			return nil, 0, true, &ServerError{Op: op, Code: atoiOr(status, 0), Description: m.Header.Get("Description")}
		}
	}
}

// prefixEnd returns the smallest key above every key with prefix p (nil: none).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
