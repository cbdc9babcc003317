package pipeline

import (
	"context"
)

// The local engine's maintenance, offered through the front as optional interfaces
// the front asserts: an engine without one refuses the call with a
// *NotSupportedError.

type (
	checkpointer interface {
		Checkpoint(dir string) (uint64, error)
		CheckpointedPosition() (uint64, error)
	}
	compactor interface {
		CompactRange(f EngineFamily, start, end []byte) error
		CompactAll(progress func(family string, done, total int)) error
	}
	replayer interface {
		Replay(ctx context.Context, entries []LogEntry) error
		Rebuild(ctx context.Context, dir string, cfg Config) (Engine, error)
	}
	verifier interface {
		Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error)
	}
	settingsRecorder interface {
		RecordedSettings() (created, lastOpened FolderSettings, err error)
	}
	readOnlyEngine interface {
		ReadOnly() bool
	}
	secondary interface {
		CatchUp() error
	}
)

// maintenance returns the engine as M, or the error of op: a *NotSupportedError, or
// ErrClosed once Close began.
func maintenance[M any](db *DB, op string) (M, error) {
	m, ok := db.eng.(M)
	if !ok {
		return m, db.notSupported(op)
	}
	if db.closing.Load() {
		return m, ErrClosed
	}
	return m, nil
}

// Checkpoint writes an openable copy of the database into dir (which must not exist)
// and returns the log position it covers: the copy's log is exactly 1..covered, dense,
// because commits pause (after validation) while the copy is taken. The
// log may then be truncated up to that position with TruncateLog; a database opened
// from the copy and given the rest of the log with Replay equals this one. While a
// Replay holds the database it fails with ErrReplaying.
//
// On a secondary (OpenSecondary) the copy is taken from the files as the secondary
// last caught up with them plus the primary's write-ahead log, as a crash of the
// primary would leave them: it holds at least positions 1..returned (what the
// secondary sees) and possibly later commits, which an Open of the copy completes as it
// would after a crash. A secondary writes nothing, so this does not record the
// checkpoint in the primary and does not allow TruncateLog there. It fails when the
// primary deleted a file meanwhile: CatchUp and try again. On an OpenReadOnly database
// it fails with ErrReadOnly.
func (db *DB) Checkpoint(dir string) (uint64, error) {
	m, err := maintenance[checkpointer](db, "DB.Checkpoint")
	if err != nil {
		return 0, err
	}
	return m.Checkpoint(dir)
}

// CheckpointedPosition returns the highest log position a Checkpoint of this database
// recorded as covered (0 when none did): TruncateLog may delete the log below it
// plus one.
func (db *DB) CheckpointedPosition() (uint64, error) {
	m, err := maintenance[checkpointer](db, "DB.CheckpointedPosition")
	if err != nil {
		return 0, err
	}
	return m.CheckpointedPosition()
}

// TruncateLog removes log entries below position before, which a checkpoint must cover
// (before-1 <= the highest position a Checkpoint returned); otherwise it fails with
// ErrNotCheckpointed. Reads of removed positions then fail with ErrLogTruncated, also
// reads that began before the call. Stream events whose entries were removed can no
// longer be read. Concurrent calls are serialised; the largest before wins.
func (db *DB) TruncateLog(before uint64) error {
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return db.eng.TruncateLog(context.Background(), before)
}

// CompactRange compacts the keys of cf in [start, end) (nil for an unbounded end) down
// to RocksDB's bottommost level and returns when it is done: deleted and overwritten
// data is dropped and the family's space on disk (StorageStats: SSTBytes) shrinks to
// its live data. It is not a commit: the log and the data are unchanged. With
// Config.DisableWAL it holds commits back (after validation) while it runs: RocksDB
// 7.8 can leave a family that receives a write meanwhile out of the atomic flush
// CompactRange starts, and with the WAL off a crash then loses that write while the
// log keeps it (facebook/rocksdb#11148, fixed in 8.1; test/crash reproduces it without
// this). Errors: ErrReadOnly, a *ConfigError for start after end, ErrClosed.
func (db *DB) CompactRange(cf *ColumnFamily, start, end []byte) error {
	m, err := maintenance[compactor](db, "DB.CompactRange")
	if err != nil {
		return err
	}
	if err := db.writable(); err != nil {
		return err
	}
	f, err := db.family("CompactRange", cf)
	if err != nil {
		return err
	}
	return m.CompactRange(f, start, end)
}

// CompactAll compacts every live family, rockline's own included (the log family after
// TruncateLog is where most space comes back), one at a time, as CompactRange does for
// one. progress, when set, is called before each family with its name, the families
// done and their number. With Config.DisableWAL it holds commits back during each
// family's compaction, as CompactRange does. Errors as CompactRange's.
func (db *DB) CompactAll(progress func(family string, done, total int)) error {
	m, err := maintenance[compactor](db, "DB.CompactAll")
	if err != nil {
		return err
	}
	if err := db.writable(); err != nil {
		return err
	}
	return m.CompactAll(progress)
}

// Replay applies log entries to db as if they had been committed here, in order: each
// entry's writes and the entry itself land in one batch at the entry's own position,
// which must be LastPosition()+1. Family creations and drops recorded in the entries
// (LogEntry.Families) are carried out here with the source's generations, so a family
// dropped and re-created in the source is dropped and re-created here too, and a
// write to a generation that was dropped (a commit admitted before its drop) is
// skipped, as the source's live state never shows it. Replay bypasses conflict
// validation, so it takes the database alone before it changes anything: it fails
// with an error matching ErrNotExclusive while transactions are open or commits are in
// flight, and while it runs Begin, CreateColumnFamily, DropColumnFamily and Checkpoint
// fail with ErrReplaying. It is how a checkpoint is brought up to date and how Rebuild
// recreates a database from a log.
func (db *DB) Replay(ctx context.Context, entries []LogEntry) error {
	m, err := maintenance[replayer](db, "DB.Replay")
	if err != nil {
		return err
	}
	return m.Replay(ctx, entries)
}

// Rebuild recreates the database from its log alone into a new database in dir
// (opened with cfg, whose Families give options but are not created: the log says
// which families exist), replaying every entry; afterwards the new database's families
// (with their generations) and their contents equal this one's, and its log is
// identical. The log must not have been truncated (use Checkpoint and Replay for
// that). Rebuild reads published entries while commits may go on; the result holds the
// log as of the moment it read the last page.
func (db *DB) Rebuild(ctx context.Context, dir string, cfg Config) (*DB, error) {
	m, err := maintenance[replayer](db, "DB.Rebuild")
	if err != nil {
		return nil, err
	}
	e, err := m.Rebuild(ctx, dir, cfg)
	if err != nil {
		return nil, err
	}
	return newFront(e, cfg.withDefaults())
}

// Verify checks the database: every log entry from FirstPosition to LastPosition
// decodes with a valid checksum at its own position (the log is dense), and, with
// opts.ScratchDir, that the state (every family with its generation and contents,
// rockline's own log family included, its system family of settings and marks not) is
// exactly a replay of the log, by rebuilding the database into ScratchDir and
// comparing key by key. The state check needs the whole log; when it was truncated it
// is skipped and StateSkipped says so.
//
// Verify reads a database that does not change meanwhile, so it runs only on a
// read-only or secondary open (a secondary holds still between CatchUp calls):
// on a writable one it fails with an *ArgumentError (Checkpoint a live database and
// verify the copy). Problems found go into the report; the error is for a check that
// could not run (a closed database, ctx done, a scratch folder that exists).
func (db *DB) Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	m, err := maintenance[verifier](db, "DB.Verify")
	if err != nil {
		return VerifyReport{}, err
	}
	return m.Verify(ctx, opts)
}

// RecordedSettings returns the settings the folder was created with and those of its
// latest writable open (zero values when not recorded: a folder last opened writable
// by a rockline that did not record them). A record that does not decode is
// ErrCorrupt.
func (db *DB) RecordedSettings() (created, lastOpened FolderSettings, err error) {
	m, err := maintenance[settingsRecorder](db, "DB.RecordedSettings")
	if err != nil {
		return FolderSettings{}, FolderSettings{}, err
	}
	return m.RecordedSettings()
}

// ReadOnly reports whether the database was opened with OpenReadOnly or OpenSecondary.
func (db *DB) ReadOnly() bool { return db.readOnly }

// writable refuses a write to a read-only database.
func (db *DB) writable() error {
	if db.readOnly {
		return ErrReadOnly
	}
	return nil
}

// CatchUp brings a secondary up to the primary's writes and publishes the log
// positions it gained, in order, so transactions begun afterwards, the log readers and
// subscriptions see them. It fails with ErrNotSecondary on any other database.
func (db *DB) CatchUp() error {
	m, err := maintenance[secondary](db, "DB.CatchUp")
	if err != nil {
		return err
	}
	return m.CatchUp()
}
