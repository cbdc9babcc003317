package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/rockline/rockline/internal/settings"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
	"github.com/rockline/rockline/validators"
)

// Errors returned by this package. They are sentinels to match with errors.Is; the
// error returned usually wraps one with more context.
var (
	// ErrConflict: a key the transaction read (with Get) or wrote was written by another
	// commit after the transaction began. Nothing was written; retry (Update does).
	ErrConflict = validators.ErrConflict
	// ErrTxnTooOld: the transaction stayed open so long that the conflict state it needs
	// was pruned (see validators.MaxTableKeys). Nothing was written; retry.
	ErrTxnTooOld = validators.ErrTxnTooOld
	// ErrStopped: a write failed and its log position could not be filled; the database
	// accepts no more commits until it is reopened. Commits whose groups were being
	// written beside the failed one also fail with it, and may have reached storage:
	// their outcome is unknown until the next Open, which keeps what reached the WAL
	// and fills the gap.
	ErrStopped = validators.ErrStopped
	// ErrNotFound: the key does not exist.
	ErrNotFound = storage.ErrNotFound
	// ErrReplaying is returned by Begin (through the transaction's calls),
	// CreateColumnFamily and DropColumnFamily while a Replay holds the database alone.
	ErrReplaying = errors.New("rockline: a replay holds the database alone")
	// ErrNotExclusive is returned by Replay while transactions are open or commits are
	// in flight.
	ErrNotExclusive = errors.New("rockline: replay needs the database alone (no open transactions or in-flight commits)")
	// ErrDropPending is matched by the *storage.DropPendingError Close returns for a
	// family drop that a commit's claim kept from running before Close; the next Open
	// completes it.
	ErrDropPending = storage.ErrDropPending
	// ErrLocked is matched by the *storage.LockedError Open returns for a folder that
	// another open database holds, in this process or another; it names the folder.
	ErrLocked = storage.ErrLocked
	// ErrCorrupt is matched by errors that report stored data, other than a log entry
	// (see ErrCorruptEntry), that does not decode: a stream head or record, a meta
	// record, a generation record.
	ErrCorrupt = storage.ErrCorrupt
	// ErrClosed: the database is closed or closing.
	ErrClosed = errors.New("rockline: database closed")
	// ErrTxnDone: the transaction was already committed or discarded.
	ErrTxnDone = errors.New("rockline: transaction already committed or discarded")
	// ErrInvalidConfig is matched by every *ConfigError, whichever rockline package
	// returned it: it is storage.ErrInvalidConfig, lanes.ErrInvalidConfig and
	// otelsetup.ErrInvalidConfig too.
	ErrInvalidConfig = settings.ErrInvalid
	// ErrInvalidArgument is matched by every *ArgumentError.
	ErrInvalidArgument = errors.New("rockline: invalid argument")
	// ErrColumnFamilyNotFound: no live column family has that name.
	ErrColumnFamilyNotFound = storage.ErrColumnFamilyNotFound
	// ErrColumnFamilyExists: CreateColumnFamily was given a live name.
	ErrColumnFamilyExists = storage.ErrColumnFamilyExists
	// ErrColumnFamilyDropped: the column family was dropped; transactions that touch it
	// are refused whole.
	ErrColumnFamilyDropped = errors.New("rockline: column family dropped")
	// ErrTooLarge is matched by an *ArgumentError for a key or value over MaxKeySize or
	// MaxValueSize, and by the storage layer's limit errors: it is storage.ErrTooLarge.
	ErrTooLarge = storage.ErrTooLarge
	// ErrForeignFamily is matched by an *ArgumentError for a column family, or a
	// transaction, of another database than the one called (a layer such as the event
	// store refuses a foreign transaction with it too): it is storage.ErrForeignFamily.
	ErrForeignFamily = storage.ErrForeignFamily
)

// ConfigError names one refused setting: Field is the Config field as written
// ("Lanes", "Families[orders].WriteBufferSize", "FamilyDefaults.WriteBufferSize") or
// an argument ("dir" of Open, "checkpoint dir" of Checkpoint), Value the value given
// and Expected what is accepted; Err is a cause, or nil. Its message reads
// `rockline: <Field> = <Value>: expected <Expected>` and it matches ErrInvalidConfig.
//
// It is one type shared by every rockline package: storage.ConfigError,
// lanes.ConfigError and otelsetup.ConfigError are the same type, so errors.As with a
// *pipeline.ConfigError catches a bad setting whichever layer refused it.
type ConfigError = settings.Error

// ArgumentError names a bad argument to a call: which argument and what was expected.
// It matches ErrInvalidArgument, and also the cause it wraps (for example
// storage.ErrTooLarge for an oversized key).
type ArgumentError struct {
	Op     string // the call, e.g. "Txn.Put"
	Arg    string // the argument, e.g. "key"
	Reason string
	Err    error // optional cause
}

// Error describes the problem, naming what was wrong.
func (e *ArgumentError) Error() string {
	return fmt.Sprintf("rockline: %s: invalid %s: %s", e.Op, e.Arg, e.Reason)
}

// Is reports whether target is ErrInvalidArgument.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns the cause.
func (e *ArgumentError) Unwrap() error { return e.Err }

// DroppedError reports a commit or write refused because a family it touches was
// dropped, or a read through a dropped family that nothing keeps readable any more
// (see ColumnFamily). It matches ErrColumnFamilyDropped.
type DroppedError struct{ Family string }

// Error describes the problem, naming what was wrong.
func (e *DroppedError) Error() string {
	return fmt.Sprintf("rockline: column family %q was dropped", e.Family)
}

// Is reports whether target is ErrColumnFamilyDropped.
func (e *DroppedError) Is(target error) bool { return target == ErrColumnFamilyDropped }

// SyncError is the error that stops the database when an fsync of the WAL fails under
// Config.Sync. Positions First..Last were written (a process kill keeps them, a power
// loss may not) but never published: their commits fail with this error, no commit is
// acknowledged after it, and the database accepts no more commits until it is reopened
// (after a failed fsync the kernel may have dropped the unsynced pages, so no later
// fsync could prove them durable; RocksDB itself stops writes too). It matches
// ErrStopped and wraps the storage error.
type SyncError struct {
	First, Last uint64
	Err         error
}

// Error describes the failure and the positions it left undurable.
func (e *SyncError) Error() string {
	return fmt.Sprintf("%v: WAL sync failed, positions %d..%d are written but not durable: %v", ErrStopped, e.First, e.Last, e.Err)
}

// Is reports whether target is ErrStopped.
func (e *SyncError) Is(target error) bool { return target == ErrStopped }

// Unwrap returns the storage error.
func (e *SyncError) Unwrap() error { return e.Err }

// readErr maps a storage read error through f: a dropped family's refusal becomes a
// *DroppedError naming it, a closed database ErrClosed.
func readErr(f *storage.Family, err error) error {
	if errors.Is(err, storage.ErrFamilyRetired) {
		return &DroppedError{Family: f.Name()}
	}
	return closedErr(err)
}

// closedErr maps the storage layer's closed error to ours.
func closedErr(err error) error {
	if errors.Is(err, storage.ErrClosed) {
		return fmt.Errorf("%w (%w)", ErrClosed, err)
	}
	return err
}

// errorType classifies an error for the error.type attribute.
func errorType(err error) string {
	switch {
	case errors.Is(err, ErrConflict):
		return tracing.ErrorConflict
	case errors.Is(err, ErrTxnTooOld):
		return tracing.ErrorTxnTooOld
	case errors.Is(err, ErrClosed):
		return tracing.ErrorClosed
	case errors.Is(err, ErrColumnFamilyDropped):
		return tracing.ErrorCFDropped
	case errors.Is(err, ErrStopped):
		return tracing.ErrorStopped
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return tracing.ErrorCanceled
	}
	return tracing.ErrorOther
}
