package history

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rockline/rockline/pipeline"
)

// entryTxn finds the one transaction whose appends a log entry's writes are: each
// written key's list must end with that transaction's appends to it, in order, and the
// keys written must be exactly those it appended to. prev, when not nil, is each key's
// list before the entry, which the new list must extend.
func entryTxn(e pipeline.LogEntry, writer map[int64]*Txn, prev map[int][]int64) (*Txn, error) {
	var t *Txn
	keys := map[int]bool{}
	final, order, err := finalValues(e)
	if err != nil {
		return nil, err
	}
	for _, k := range order {
		l := final[k]
		if len(l) == 0 {
			return nil, fmt.Errorf("key %d: an empty list", k)
		}
		wt := writer[l[len(l)-1]]
		if wt == nil {
			return nil, fmt.Errorf("key %d = %v: no transaction appended %d", k, l, l[len(l)-1])
		}
		if t != nil && wt != t {
			return nil, fmt.Errorf("key %d = %v ends with T%d's append, another key with T%d's", k, l, wt.ID, t.ID)
		}
		t = wt
		own := appendsTo(t, k)
		if len(l) < len(own) || !slices.Equal(l[len(l)-len(own):], own) {
			return nil, fmt.Errorf("key %d = %v does not end with T%d's appends %v", k, l, t.ID, own)
		}
		if prev != nil && !slices.Equal(l[:len(l)-len(own)], prev[k]) {
			return nil, fmt.Errorf("key %d = %v is T%d's appends %v on %v, not on the log's previous value %v", k, l, t.ID, own, l[:len(l)-len(own)], prev[k])
		}
		keys[k] = true
	}
	if t == nil {
		return nil, errors.New("no writes")
	}
	for _, o := range t.Ops {
		if o.F == FAppend && !keys[o.K] {
			return nil, fmt.Errorf("T%d appended to key %d, which the entry does not write", t.ID, o.K)
		}
	}
	return t, nil
}

// finalValues returns the list each key of e holds after the entry (a transaction
// that appended twice to a key wrote it twice), and the keys in the order first
// written.
func finalValues(e pipeline.LogEntry) (map[int][]int64, []int, error) {
	final := map[int][]int64{}
	var order []int
	for _, w := range e.Writes {
		k, ok := ParseKey(w.Key)
		if !ok || w.Delete || w.Range {
			return nil, nil, fmt.Errorf("write %q (delete %v, range %v) is not a list append", w.Key, w.Delete, w.Range)
		}
		l, err := DecodeList(w.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("key %d: %w", k, err)
		}
		if _, seen := final[k]; !seen {
			order = append(order, k)
		}
		final[k] = l
	}
	return final, order, nil
}

func appendsTo(t *Txn, k int) []int64 {
	var out []int64
	for _, o := range t.Ops {
		if o.F == FAppend && o.K == k {
			out = append(out, o.V)
		}
	}
	return out
}

func writers(h History) map[int64]*Txn {
	out := map[int64]*Txn{}
	for _, t := range h {
		for _, o := range t.Ops {
			if o.F == FAppend {
				out[o.V] = t
			}
		}
	}
	return out
}

// CheckLog checks the whole log, read back in order after the history: every entry
// with writes is one transaction's appends on top of the keys' previous values in the
// log; no transaction that failed is there, none twice; every acknowledged commit that
// appended is there.
func CheckLog(h History, log []pipeline.LogEntry) []Anomaly {
	var out []Anomaly
	writer := writers(h)
	prev := map[int][]int64{}
	at := map[int]uint64{}
	for _, e := range log {
		if e.Filler || len(e.Writes) == 0 {
			continue
		}
		t, err := entryTxn(e, writer, prev)
		if err != nil {
			out = append(out, Anomaly{Kind: LogMismatch, Key: -1, Detail: fmt.Sprintf("entry at %d: %v", e.Position, err)})
			t, err = entryTxn(e, writer, nil)
			if err != nil {
				continue
			}
		}
		final, _, _ := finalValues(e) // entryTxn decoded them already
		for k, l := range final {
			prev[k] = l
		}
		if p, dup := at[t.ID]; dup {
			out = append(out, Anomaly{Kind: DuplicateInLog, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d's writes at %d and %d", t.ID, p, e.Position)})
			continue
		}
		at[t.ID] = e.Position
		if t.Outcome == Failed {
			out = append(out, Anomaly{Kind: FailedInLog, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d failed (%s: %s), its writes are at %d", t.ID, t.ErrClass, t.Err, e.Position)})
		}
	}
	for _, t := range h {
		if t.Outcome != OK || !t.Writes() {
			continue
		}
		if _, ok := at[t.ID]; !ok {
			out = append(out, Anomaly{Kind: MissingFromLog, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d was acknowledged at %d; no log entry holds its writes", t.ID, t.Pos)})
		}
	}
	return out
}

// CheckPositions reads, through entry (the DB's log reader), the log entry at every
// acknowledged commit's position and checks that it holds that commit's writes. An
// entry not found (pipeline.ErrNotFound) is reported as missing; any other error of
// entry is returned.
func CheckPositions(h History, entry func(pos uint64) (pipeline.LogEntry, error)) ([]Anomaly, error) {
	var out []Anomaly
	writer := writers(h)
	for _, t := range h {
		if t.Outcome != OK || !t.Writes() {
			continue
		}
		if t.Pos == 0 {
			out = append(out, Anomaly{Kind: PositionNotCommit, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d appended and was acknowledged with position 0", t.ID)})
			continue
		}
		e, err := entry(t.Pos)
		if errors.Is(err, pipeline.ErrNotFound) {
			out = append(out, Anomaly{Kind: MissingFromLog, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d was acknowledged at %d; the log has no entry there: %v", t.ID, t.Pos, err)})
			continue
		}
		if err != nil {
			return out, fmt.Errorf("history: reading the entry at %d (T%d's position): %w", t.Pos, t.ID, err)
		}
		if e.Filler {
			out = append(out, Anomaly{Kind: PositionNotCommit, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d was acknowledged at %d, which holds a filler (abort marker)", t.ID, t.Pos)})
			continue
		}
		got, err := entryTxn(e, writer, nil)
		switch {
		case err != nil:
			out = append(out, Anomaly{Kind: PositionNotCommit, Txns: []int{t.ID}, Key: -1, Detail: fmt.Sprintf("T%d was acknowledged at %d, whose entry is not a transaction's appends: %v", t.ID, t.Pos, err)})
		case got != t:
			out = append(out, Anomaly{Kind: PositionNotCommit, Txns: []int{t.ID, got.ID}, Key: -1, Detail: fmt.Sprintf("T%d was acknowledged at %d, which holds T%d's writes", t.ID, t.Pos, got.ID)})
		}
	}
	return out, nil
}

// Seen is a log entry as a subscriber delivered it: which subscription (Sub), its
// position, whether it is a filler, and the digest of its writes.
type Seen struct {
	Sub    int    `json:"s"`
	Pos    uint64 `json:"pos"`
	Filler bool   `json:"filler,omitempty"`
	Digest string `json:"d"`
}

// Digest is a log entry's writes and family changes in one canonical string.
func Digest(e pipeline.LogEntry) string {
	var b strings.Builder
	for _, w := range e.Writes {
		fmt.Fprintf(&b, "%s/%d/%q=%q", w.Family, w.Generation, w.Key, w.Value)
		if w.Delete {
			b.WriteString("!del")
		}
		b.WriteByte(';')
	}
	for _, f := range e.Families {
		fmt.Fprintf(&b, "cf %s/%d dropped=%v;", f.Family, f.Generation, f.Dropped)
	}
	return b.String()
}

// SeenOf is what a subscriber records of an entry it delivered.
func SeenOf(sub int, e pipeline.LogEntry) Seen {
	return Seen{Sub: sub, Pos: e.Position, Filler: e.Filler, Digest: Digest(e)}
}

// CheckSubscription checks what one subscriber from position 0 delivered against the
// log read back: the log's entries, in order, each once, as stored, with none
// skipped. With complete, it must also have reached the log's last entry; otherwise it
// may have ended early (its process was killed).
func CheckSubscription(name string, log []pipeline.LogEntry, seen []Seen, complete bool) []Anomaly {
	var out []Anomaly
	flag := func(kind, detail string) {
		out = append(out, Anomaly{Kind: kind, Key: -1, Detail: name + ": " + detail})
	}
	j := 0
	var last uint64
	for _, s := range seen {
		if s.Pos <= last {
			flag(SubscriptionRepeat, fmt.Sprintf("delivered %d after %d", s.Pos, last))
			continue
		}
		last = s.Pos
		start := j
		for j < len(log) && log[j].Position < s.Pos {
			j++
		}
		if j > start {
			flag(SubscriptionSkip, fmt.Sprintf("delivered %d after %d, skipping %d entries from %d", s.Pos, positionBefore(log, start), j-start, log[start].Position))
		}
		if j == len(log) || log[j].Position != s.Pos {
			flag(SubscriptionMismatch, fmt.Sprintf("delivered %d, which is not a position of the log read back", s.Pos))
			continue
		}
		if want := SeenOf(s.Sub, log[j]); want != s {
			flag(SubscriptionMismatch, fmt.Sprintf("delivered at %d filler=%v %s, the log holds filler=%v %s", s.Pos, s.Filler, s.Digest, want.Filler, want.Digest))
		}
		j++
	}
	if complete && j < len(log) {
		flag(SubscriptionSkip, fmt.Sprintf("ended at %d; the log holds %d more entries, from %d to %d", last, len(log)-j, log[j].Position, log[len(log)-1].Position))
	}
	return out
}

func positionBefore(log []pipeline.LogEntry, i int) uint64 {
	if i == 0 {
		return 0
	}
	return log[i-1].Position
}
