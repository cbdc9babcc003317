package eventstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// MaxStreamNameLen bounds a stream name, in bytes.
const MaxStreamNameLen = 1024

// Store is the event store of one database: streams of events with expected
// revisions, kept in the layer family "rockline.streams" (pipeline.DB.LayerFamily).
// A Store holds no resource of its own but the projections started through it (each
// with a goroutine, ended by its Close or the DB's): it is a view of its DB, safe for
// concurrent use, usable until the DB closes (then its calls fail with
// pipeline.ErrClosed). Any number of Stores of one DB may exist; they agree.
//
// The family's key layout, which nothing outside this package reads:
//
//	'h' stream                 -> uvarint(last revision) [state: deletes, metadata]
//	'r' stream 0x00 BE64(rev)  -> uvarint(position) uvarint(index in entry) event id
//	'p' projection name        -> uvarint(last log position applied)
//	's' stream                 -> empty: the stream has a state (Reclaim's index)
//	't' tag                    -> uvarint(position of the last commit that appended
//	                              an event with the tag): the tag's marker
//	'i' index name             -> the index's kind: an index the database keeps
//	'x' index value position i -> empty: an index entry (see indexkey.go)
//
// A head is read with tracking and written with Txn.Put, so two appends that expect
// the same revision conflict and exactly one wins. An event record names its commit's
// log position, known only once the commit is validated, so it is written with
// Txn.PutAtCommit: with the commit's batch and in its log entry, so a replay of the
// log rebuilds it.
type Store struct {
	db *pipeline.DB
	cf *pipeline.ColumnFamily

	indexes []Index // fixed by agree
	// swept is the log's first position when Reclaim last deleted the index entries
	// below it (reclaimTruncatedEntries); it runs again once TruncateLog moved it.
	swept atomic.Uint64

	mu      sync.Mutex
	running map[string]*Projection // projections started through this Store
}

// layerName is the store's family, "rockline.streams", as LayerFamily names it.
const layerName = "streams"

// New returns the event store of db, creating its family the first time a database
// has one: NewWithConfig with the zero Config, which keeps the indexes the database
// already keeps. It fails with db's error (pipeline.ErrClosed on a closed database).
func New(db *pipeline.DB) (*Store, error) {
	return NewWithConfig(context.Background(), db, Config{})
}

// NewWithConfig returns the event store of db as New does, keeping the indexes
// cfg declares. The indexes of a database are fixed, within a process, by the first
// Store made for it while it is open: a later Store declares the same names and
// kinds, or none and adopts them, or fails with an *IndexMismatchError. The first
// Store must declare every index the database already keeps (or none, adopting them:
// such a Store cannot append while a selector index, whose function it lacks, is
// kept); an index it declares that the database does not keep yet is built before
// NewWithConfig returns, over every event already stored (a commit per 256 log
// entries; ctx ends it), so no read of it misses an event. Indexes need keys made at
// commit: on an engine without them (JetStream) a Config with indexes fails with a
// *pipeline.NotSupportedError. Errors: cfg.Validate's, *IndexMismatchError, and db's.
func NewWithConfig(ctx context.Context, db *pipeline.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, &pipeline.ArgumentError{Op: "eventstore.New", Arg: "db", Reason: "must not be nil"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cf, err := db.LayerFamily(layerName)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, cf: cf}
	if len(cfg.Indexes) > 0 {
		// Only an engine's refusal counts: a read-only database refuses every write,
		// and reads the indexes it keeps all the same.
		if err := s.probeKeysAtCommit(); errors.Is(err, pipeline.ErrNotSupported) {
			return nil, err
		}
	}
	if err := s.agree(ctx, cfg.Indexes); err != nil {
		return nil, err
	}
	return s, nil
}

// probeKeysAtCommit checks that the engine writes keys made at commit, in a
// transaction it discards.
func (s *Store) probeKeysAtCommit() error {
	tx := s.db.Begin()
	defer tx.Discard()
	return tx.PutKeyAtCommit(s.cf, indexKeyCodec, indexPayload(nil, indexPrefix(nil, "probe", "probe"), 0), nil)
}

// DB returns the database the store keeps its streams in.
func (s *Store) DB() *pipeline.DB { return s.db }

func checkStream(op, stream string) error {
	switch {
	case stream == "":
		return &pipeline.ArgumentError{Op: op, Arg: "stream", Reason: "must not be empty"}
	case len(stream) > MaxStreamNameLen:
		return &pipeline.ArgumentError{Op: op, Arg: "stream", Reason: fmt.Sprintf("%d bytes exceeds %d", len(stream), MaxStreamNameLen)}
	case !utf8.ValidString(stream):
		return &pipeline.ArgumentError{Op: op, Arg: "stream", Reason: "must be valid UTF-8"}
	case bytes.IndexByte([]byte(stream), 0) >= 0:
		return &pipeline.ArgumentError{Op: op, Arg: "stream", Reason: "must not contain NUL"}
	}
	return nil
}

func headKey(stream string) []byte { return append([]byte{'h'}, stream...) }

func eventKey(stream string, rev uint64) []byte {
	k := make([]byte, 0, len(stream)+10)
	k = append(k, 'r')
	k = append(k, stream...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, rev)
}

// eventCodec is the positioned value of an event record (revision.AppendRecord under
// revision.RecordName): an engine that stores it by name finds it by that name.
// Records are read only with GetUntracked, so their writes need no conflict mark.
var eventCodec = pipeline.NewUntrackedPositionedValue(revision.RecordName, revision.AppendRecord)

// markCodec is the positioned value of a tag marker (revision.AppendMark under
// revision.MarkName).
var markCodec = pipeline.NewPositionedValue(revision.MarkName, revision.AppendMark)

// PositionedValues returns the positioned values the store writes with
// pipeline.Txn.PutAtCommit: the event record, named revision.RecordName
// ("rockline.event"), and the tag marker, revision.MarkName ("rockline.mark"). An
// engine that stores a positioned write's codec by name and makes its value on every
// read registers them (the JetStream engine's OpenDB registers these itself). The
// store writes nothing else positioned.
func PositionedValues() []pipeline.PositionedValue {
	return []pipeline.PositionedValue{eventCodec, markCodec}
}

func parseEventValue(v []byte) (pos uint64, idx int, id string, err error) {
	pos, idx, id, ok := revision.ParseRecord(v)
	if !ok {
		return 0, 0, "", fmt.Errorf("%w: stream record %x", pipeline.ErrCorrupt, v)
	}
	return pos, idx, id, nil
}

// encodeHead is a head record: the last revision, then the state when there is one.
func encodeHead(last uint64, st streamState) []byte {
	b := binary.AppendUvarint(nil, last)
	if st.zero() {
		return b
	}
	return append(b, st.encode()...)
}

// parseHead parses a head record into the last revision and the state.
func parseHead(stream string, v []byte) (uint64, streamState, error) {
	rev, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, streamState{}, fmt.Errorf("%w: head of stream %q holds %x", pipeline.ErrCorrupt, stream, v)
	}
	if n == len(v) {
		return rev, streamState{}, nil
	}
	st, err := decodeState(stream, v[n:])
	if err == nil && st.zero() {
		err = fmt.Errorf("%w: head of stream %q holds %x: an empty state", pipeline.ErrCorrupt, stream, v)
	}
	return rev, st, err
}
