package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Outcome is what a client knows of a transaction when it completes.
type Outcome string

// The outcomes of a transaction.
const (
	// OK: the commit was acknowledged (or a read-only transaction's reads all
	// succeeded).
	OK Outcome = "ok"
	// Failed: the transaction definitely did not commit (a conflict, a timeout the
	// engine proved harmless, a read that failed before the commit was sent).
	Failed Outcome = "fail"
	// Unknown: the commit may or may not have landed (ErrOutcomeUnknown, a process
	// killed while it was in flight, an untyped error).
	Unknown Outcome = "info"
)

// Micro-operation functions of a list-append transaction.
const (
	FRead   = "r"      // read a key's list
	FAppend = "append" // append one unique element to a key's list
)

// Op is one micro-operation: a read of key K (Read holds the list it returned, for a
// transaction that completed OK) or an append of element V to key K.
type Op struct {
	F    string  `json:"f"`
	K    int     `json:"k"`
	V    int64   `json:"v,omitempty"`
	Read []int64 `json:"read,omitempty"`
}

// Txn is one transaction of a history: its client, invoke and completion times (unix
// nanoseconds; Complete is 0 for one whose client never heard back), operations,
// outcome, the log position Commit returned (OK commits that wrote), and the error's
// text and class for a failed or unknown one. Final marks the read of every key after
// recovery.
type Txn struct {
	ID       int     `json:"id"`
	Client   int     `json:"client"`
	Invoke   int64   `json:"invoke"`
	Complete int64   `json:"complete,omitempty"`
	Ops      []Op    `json:"ops"`
	Outcome  Outcome `json:"outcome"`
	Pos      uint64  `json:"pos,omitempty"`
	Err      string  `json:"err,omitempty"`
	ErrClass string  `json:"class,omitempty"`
	Final    bool    `json:"final,omitempty"`
}

// Writes reports whether the transaction appends anything.
func (t *Txn) Writes() bool {
	for _, o := range t.Ops {
		if o.F == FAppend {
			return true
		}
	}
	return false
}

// String is a compact form: id, client, outcome, position and the operations.
func (t *Txn) String() string {
	s := fmt.Sprintf("T%d c%d %s", t.ID, t.Client, t.Outcome)
	if t.Pos != 0 {
		s += fmt.Sprintf(" @%d", t.Pos)
	}
	if t.Final {
		s += " final"
	}
	s += " ["
	for i, o := range t.Ops {
		if i > 0 {
			s += " "
		}
		if o.F == FAppend {
			s += fmt.Sprintf("a%d=%d", o.K, o.V)
		} else {
			s += fmt.Sprintf("r%d=%v", o.K, o.Read)
		}
	}
	s += "]"
	if t.Err != "" {
		s += fmt.Sprintf(" (%s: %s)", t.ErrClass, t.Err)
	}
	return s
}

// History is every transaction of a test, in invocation order.
type History []*Txn

// Counts returns how many transactions ended with each outcome.
func (h History) Counts() map[Outcome]int {
	out := map[Outcome]int{}
	for _, t := range h {
		out[t.Outcome]++
	}
	return out
}

// Event is one line of a recorded history: a transaction invoked or completed, or a
// log entry a subscriber delivered.
type Event struct {
	Kind string `json:"ev"` // "invoke", "complete", "sub"
	Txn  *Txn   `json:"txn,omitempty"`
	Sub  *Seen  `json:"sub,omitempty"`
}

// Recorder collects the transactions of concurrent clients. With a sink, every
// invocation and completion is also written to it as one JSON line as it happens (a
// child process reports its history this way, so that a SIGKILL leaves only the
// transactions in flight without completion). It is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	txns map[int]*Txn
	ids  []int
	done map[Outcome]int
	sink *json.Encoder
	err  error
}

// NewRecorder returns an empty recorder writing events to sink (nil for none).
func NewRecorder(sink io.Writer) *Recorder {
	r := &Recorder{txns: map[int]*Txn{}, done: map[Outcome]int{}}
	if sink != nil {
		r.sink = json.NewEncoder(sink)
	}
	return r
}

// Invoke records t as invoked now (its outcome Unknown until Complete).
func (r *Recorder) Invoke(t *Txn) {
	t.Invoke = time.Now().UnixNano()
	t.Outcome = Unknown
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(t)
	r.emit(Event{Kind: "invoke", Txn: t})
}

// Complete records t, invoked before, as completed now with its outcome set.
func (r *Recorder) Complete(t *Txn) {
	t.Complete = time.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(t)
	r.done[t.Outcome]++
	r.emit(Event{Kind: "complete", Txn: t})
}

// Completed returns how many transactions Complete recorded with outcome o.
func (r *Recorder) Completed(o Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[o]
}

// Seen records a log entry a subscriber delivered (to the sink only).
func (r *Recorder) Seen(s Seen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emit(Event{Kind: "sub", Sub: &s})
}

// Add records a transaction that is already complete (a replayed event, a final read).
func (r *Recorder) Add(t *Txn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(t)
}

// add stores a copy of t, so the client may go on changing its own.
func (r *Recorder) add(t *Txn) {
	if _, dup := r.txns[t.ID]; !dup {
		r.ids = append(r.ids, t.ID)
	}
	c := *t
	c.Ops = cloneOps(t.Ops)
	r.txns[t.ID] = &c
}

func cloneOps(ops []Op) []Op {
	out := slices.Clone(ops)
	for i := range out {
		out[i].Read = slices.Clone(out[i].Read)
	}
	return out
}

func (r *Recorder) emit(e Event) {
	if r.sink == nil || r.err != nil {
		return
	}
	r.err = r.sink.Encode(e)
}

// Err returns the first error writing to the sink.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// History returns copies of the transactions recorded, in invocation order.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(History, 0, len(r.ids))
	for _, id := range r.ids {
		t := *r.txns[id]
		t.Ops = cloneOps(t.Ops)
		out = append(out, &t)
	}
	slices.SortStableFunc(out, func(a, b *Txn) int { return compareInt(a.Invoke, b.Invoke) })
	return out
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Replay reads events written by a Recorder's sink from rd into r (invocations and
// completions) until rd ends, calls each (when not nil) with every event after
// recording it, and returns the subscribers' deliveries. A truncated last line (the
// writer was killed mid-line) is ignored; any other bad line is an error naming it.
func (r *Recorder) Replay(rd io.Reader, each func(Event)) ([]Seen, error) {
	var seen []Seen
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	var pending error
	for sc.Scan() {
		line++
		if pending != nil {
			return seen, pending // a bad line that was not the last
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			pending = fmt.Errorf("history: event line %d %q: %w", line, sc.Bytes(), err)
			continue
		}
		switch {
		case e.Kind == "sub" && e.Sub != nil:
			seen = append(seen, *e.Sub)
		case (e.Kind == "invoke" || e.Kind == "complete") && e.Txn != nil:
			r.Add(e.Txn)
		default:
			return seen, fmt.Errorf("history: event line %d: unknown event %q", line, e.Kind)
		}
		if each != nil {
			each(e)
		}
	}
	return seen, sc.Err()
}

// WriteJSONL writes the history as JSON lines, one transaction a line.
func (h History) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, t := range h {
		if err := enc.Encode(t); err != nil {
			return err
		}
	}
	return nil
}

// ReadJSONL reads a history written by WriteJSONL.
func ReadJSONL(rd io.Reader) (History, error) {
	var h History
	dec := json.NewDecoder(rd)
	for dec.More() {
		var t Txn
		if err := dec.Decode(&t); err != nil {
			return h, fmt.Errorf("history: transaction %d: %w", len(h)+1, err)
		}
		h = append(h, &t)
	}
	return h, nil
}
