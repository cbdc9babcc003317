package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rockline/rockline/internal/logentry"
)

// LogEntry is one published commit: its dense position, commit time, the events the
// transaction carried (each a RecordedEvent with the entry's position and time) and
// its write set. Writes replayed in order give the commit's effect, and the last
// write of each key is its state after the commit; how many writes of one key an
// entry holds is the engine's: the local engine logs every write in the order made
// (a key put twice appears twice), the JetStream engine only the last of each key. A Filler entry marks a position whose commit
// failed after the position was assigned; it has no events and no writes. An entry
// with Families records the creation or drop of a column family (CreateColumnFamily,
// DropColumnFamily) at that point of the log, so a replay reproduces the family set.
type LogEntry struct {
	Position uint64
	Time     time.Time
	Filler   bool
	Events   []RecordedEvent
	Writes   []LogWrite
	Families []FamilyChange
}

// LogWrite is one write of a commit: a put of Value, or a Delete, of Key in the given
// generation of Family (1 for a family never dropped; a family re-created after a drop
// is a new generation, so a replay can tell its writes from the old one's). With Range
// it is a Txn.DeleteRange of every key in [Key, Value) (Delete is then false).
type LogWrite struct {
	Family     string
	Generation int
	Key        []byte
	Value      []byte
	Delete     bool
	Range      bool
}

// FamilyChange is the creation, or with Dropped the drop, of one generation of a
// column family. Generations of a name only grow, across reopens too.
type FamilyChange struct {
	Family     string
	Generation int
	Dropped    bool
}

// CorruptEntryError reports a log entry that does not decode (bad checksum, truncated,
// unknown version). It matches ErrCorruptEntry.
type CorruptEntryError = logentry.CorruptEntryError

// ErrCorruptEntry is matched by every *CorruptEntryError.
var ErrCorruptEntry = logentry.ErrCorrupt

// ErrLogTruncated is returned when reading log positions removed by TruncateLog.
var ErrLogTruncated = errors.New("rockline: log truncated below the requested position")

// maxReadLimit bounds ReadLog's limit.
const maxReadLimit = 1 << 20

// ReadLog returns up to limit published entries with positions from, from+1, ... (from
// 0 means 1). It never returns a gap or an entry that is not yet published: every
// entry's data is readable when it is returned. limit must be 1..1<<20. Positions
// removed by TruncateLog, also by one that runs concurrently, fail with
// ErrLogTruncated. An entry that does not decode ends the read: ReadLog returns the
// intact entries before it together with the *CorruptEntryError. After Close began it
// fails with ErrClosed.
func (db *DB) ReadLog(from uint64, limit int) ([]LogEntry, error) {
	if limit < 1 || limit > maxReadLimit {
		return nil, &ArgumentError{Op: "ReadLog", Arg: "limit", Reason: fmt.Sprintf("%d is not between 1 and %d", limit, maxReadLimit)}
	}
	if db.closing.Load() {
		return nil, ErrClosed
	}
	if from == 0 {
		from = 1
	}
	es, err := db.eng.ReadLog(context.Background(), from, limit)
	if n := len(es); n > 0 {
		db.saw(es[n-1].Position)
	}
	if err != nil && db.closing.Load() {
		return es, closedIfNot(err)
	}
	return es, err
}

// Entry returns the published log entry at pos (1 or more: position 0 holds no entry
// and is refused with an *ArgumentError), ErrNotFound for a position not yet
// published, or ReadLog's errors.
func (db *DB) Entry(pos uint64) (LogEntry, error) {
	if pos == 0 {
		return LogEntry{}, &ArgumentError{Op: "Entry", Arg: "pos", Reason: "0 is not a log position (the log starts at 1)"}
	}
	if db.closing.Load() {
		return LogEntry{}, ErrClosed
	}
	return db.eng.Entry(context.Background(), pos)
}

// LogIterator walks published log entries forward in pages. It sees positions
// published up to each page read.
type LogIterator struct {
	read func(from uint64, limit int) ([]LogEntry, error) // a page of the log
	next uint64
	page []LogEntry
	cur  LogEntry
	// pending is the error that ended the last page read, reported (as err) once the
	// entries read before it are delivered.
	pending error
	err     error
}

// LogIterator returns an iterator over the published log from position from.
func (db *DB) LogIterator(from uint64) *LogIterator {
	if from == 0 {
		from = 1
	}
	return &LogIterator{read: db.ReadLog, next: from}
}

// Next advances to the next published entry; false at the end of what is published or
// on error (see Err). Entries before a corrupt one are delivered first.
func (it *LogIterator) Next() bool {
	if it.err != nil {
		return false
	}
	if len(it.page) == 0 {
		if it.pending == nil {
			it.page, it.pending = it.read(it.next, 256)
		}
		if len(it.page) == 0 {
			it.err = it.pending
			return false
		}
	}
	it.cur, it.page = it.page[0], it.page[1:]
	it.next = it.cur.Position + 1
	return true
}

// Entry returns the current entry.
func (it *LogIterator) Entry() LogEntry { return it.cur }

// Err returns the error that stopped the iterator, if any. It is set once Next has
// returned false.
func (it *LogIterator) Err() error { return it.err }

// FirstPosition returns the lowest log position still held: 1, or the position
// TruncateLog cut the log below. Positions under it read as ErrLogTruncated.
func (db *DB) FirstPosition() uint64 { return db.eng.FirstPosition() }

// WaitForPosition returns once log position pos, and every position below it, is
// published (at once if it already is), so an entry a reader found through a record
// written with it (a stream index entry) can be read with Entry. It returns ctx's
// error when ctx ends first, ErrClosed when the database closes first, and the error
// that stopped the database (ErrStopped) if it stops. A position nobody has been
// assigned yet is waited for like any other.
func (db *DB) WaitForPosition(ctx context.Context, pos uint64) error {
	if db.last.Load() >= pos {
		return nil
	}
	if db.closing.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(db.closed, cancel) // Close ends the wait
	defer stop()
	err := db.eng.WaitForPosition(ctx, pos)
	if err == nil {
		db.saw(pos)
		return nil
	}
	if db.closing.Load() {
		return ErrClosed
	}
	return err
}

// closedIfNot returns err when it already matches ErrClosed, or err joined to it: a
// read that failed while Close ran.
func closedIfNot(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("%w (%w)", ErrClosed, err)
}
