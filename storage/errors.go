package storage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rockline/rockline/internal/settings"
)

// Sentinel errors. Every error this package returns either is one of these, wraps one
// of them with %w, or wraps the RocksDB status with the operation named.
// ErrReadOnly is returned by every write to a database opened with Options.ReadOnly.
var ErrReadOnly = errors.New("rockline: database opened read-only")

// ErrNotSecondary is returned by CatchUp on a database not opened as a secondary.
var ErrNotSecondary = errors.New("rockline: not a secondary database")

var (
	// ErrClosed is returned by every call made after Close has begun.
	ErrClosed = errors.New("rockline: database closed")
	// ErrNotFound is returned by Get when the key does not exist.
	ErrNotFound = errors.New("rockline: key not found")
	// ErrColumnFamilyNotFound is returned when a family name is unknown or was dropped.
	ErrColumnFamilyNotFound = errors.New("rockline: column family not found")
	// ErrColumnFamilyExists is returned by CreateFamily when the name is taken.
	ErrColumnFamilyExists = errors.New("rockline: column family already exists")
	// ErrInvalidConfig is matched by every *ConfigError, whichever rockline package
	// returned it (it is pipeline.ErrInvalidConfig too).
	ErrInvalidConfig = settings.ErrInvalid
	// ErrBusy maps RocksDB's "Resource busy" status.
	ErrBusy = errors.New("rockline: resource busy")
	// ErrTryAgain maps RocksDB's "Operation failed. Try again." status.
	ErrTryAgain = errors.New("rockline: try again")
	// ErrTooLarge is matched by every *LimitError.
	ErrTooLarge = errors.New("rockline: too large")
	// ErrForeignFamily is returned when a *Family of another database is used.
	ErrForeignFamily = errors.New("rockline: column family belongs to another database")
	// ErrCorrupt is matched by errors that report stored data that does not decode.
	ErrCorrupt = errors.New("rockline: corrupt stored data")
	// ErrDropPending is matched by the *DropPendingError Close returns for a drop
	// that could not run before Close (a claim was still held): the next Open
	// completes it.
	ErrDropPending = errors.New("rockline: family drop still pending")
	// ErrLocked is matched by the *LockedError Open returns for a folder that another
	// open database (in this process or another) holds.
	ErrLocked = errors.New("rockline: database folder locked by another open")
	// ErrForeignSnapshot is returned when a *Snapshot of another database is used.
	ErrForeignSnapshot = errors.New("rockline: snapshot belongs to another database")
)

// ConfigError reports one refused option or argument: Field names it (an Options
// field such as "Families[orders].WriteBufferSize", or "dir", "family name",
// "generation", "checkpoint dir", "range start"), Value is the value given and
// Expected what is accepted; Err is a cause, or nil. Its message reads
// `rockline: <Field> = <Value>: expected <Expected>` and it matches ErrInvalidConfig.
//
// It is one type shared by every rockline package (pipeline.ConfigError,
// lanes.ConfigError and otelsetup.ConfigError are the same type), so a storage option
// refused through pipeline.Open is caught by either name.
type ConfigError = settings.Error

// DropPendingError reports, from Close, a family whose drop could not run because a
// commit still held a claim on it. The drop is durable: the next Open completes it
// before it returns. It matches ErrDropPending.
type DropPendingError struct {
	Family string // the family's name
	Claims int    // claims still held at Close
}

// Error names the family and says when the drop completes.
func (e *DropPendingError) Error() string {
	return fmt.Sprintf("rockline: drop of family %q still pending at close (%d claims held): it completes at the next Open", e.Family, e.Claims)
}

// Is reports whether target is ErrDropPending.
func (e *DropPendingError) Is(target error) bool { return target == ErrDropPending }

// LockedError reports that Open found its folder held by another open database, in
// this process or another: RocksDB allows one writer per folder. It matches ErrLocked.
type LockedError struct {
	Dir    string // the folder
	Detail string // RocksDB's message
}

// Error names the folder and says what holds it.
func (e *LockedError) Error() string {
	return fmt.Sprintf("rockline: open %s: the folder is held by another open database (close it first): %s", e.Dir, e.Detail)
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockError returns a *LockedError when err is RocksDB's failure to take dir's LOCK
// file, and nil otherwise.
func lockError(dir string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "/LOCK: ") && (strings.Contains(msg, "lock hold by current process") || strings.Contains(msg, "While lock file")) {
		return &LockedError{Dir: dir, Detail: msg}
	}
	return nil
}

// LimitError reports a key or value past its documented limit. It matches ErrTooLarge.
type LimitError struct {
	What  string // "key" or "value"
	Size  int    // the size given
	Limit int    // the largest size accepted
}

// Error describes the problem, naming what was wrong.
func (e *LimitError) Error() string {
	return fmt.Sprintf("rockline: %s of %d bytes exceeds the limit of %d bytes", e.What, e.Size, e.Limit)
}

// Is reports whether target is ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// mapError turns a RocksDB status into an error that names the operation and, where
// the status means the same thing as one of our sentinels, matches that sentinel.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "Resource busy"):
		return fmt.Errorf("rockline: %s: %w: %s", op, ErrBusy, msg)
	case strings.HasPrefix(msg, "Operation failed. Try again."):
		return fmt.Errorf("rockline: %s: %w: %s", op, ErrTryAgain, msg)
	case strings.Contains(msg, "Column family not found"),
		strings.Contains(msg, "Invalid column family"),
		strings.Contains(msg, "column family") && strings.Contains(msg, "does not exist"):
		return fmt.Errorf("rockline: %s: %w: %s", op, ErrColumnFamilyNotFound, msg)
	case strings.Contains(msg, "Column family already exists"):
		return fmt.Errorf("rockline: %s: %w: %s", op, ErrColumnFamilyExists, msg)
	}
	return fmt.Errorf("rockline: %s: %w", op, err)
}
