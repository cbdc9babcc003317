package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/tracing"

	"github.com/rockline/rockline/storage"
)

// ColumnFamily is a handle on one generation of a column family. It stays valid until
// the database closes; once the family is dropped, writes through it fail with
// ErrColumnFamilyDropped while reads keep working.
type ColumnFamily struct {
	db *DB
	f  *storage.Family
}

// Name returns the family's name.
func (c *ColumnFamily) Name() string { return c.f.Name() }

// Options returns the family's memtable options, defaults filled in.
func (c *ColumnFamily) Options() storage.FamilyOptions { return c.f.Options() }

func (db *DB) wrap(f *storage.Family) *ColumnFamily { return &ColumnFamily{db: db, f: f} }

// CreateColumnFamily creates a family with the options Config.Families gives its name
// (or Config.FamilyDefaults). It fails with ErrColumnFamilyExists for a live name and
// with an *ArgumentError for an empty, over-long or reserved ("rockline." prefix) name.
func (db *DB) CreateColumnFamily(name string) (*ColumnFamily, error) {
	if err := checkFamilyName("CreateColumnFamily", name); err != nil {
		return nil, err
	}
	opts, ok := db.cfg.Families[name]
	if !ok {
		opts = db.cfg.FamilyDefaults
	}
	f, err := db.store.CreateFamily(name, opts)
	if err != nil {
		return nil, closedErr(err)
	}
	return db.wrap(f), nil
}

// ColumnFamily returns the live family with that name, or an error matching
// ErrColumnFamilyNotFound.
func (db *DB) ColumnFamily(name string) (*ColumnFamily, error) {
	if isReserved(name) {
		return nil, fmt.Errorf("rockline: family %q: %w", name, ErrColumnFamilyNotFound)
	}
	f, err := db.store.Family(name)
	if err != nil {
		return nil, closedErr(err)
	}
	return db.wrap(f), nil
}

// Default returns the default column family, which always exists and cannot be
// dropped. After Close it returns a handle whose every use fails with ErrClosed.
func (db *DB) Default() *ColumnFamily {
	f := db.store.Default()
	if f == nil {
		return &ColumnFamily{db: db}
	}
	return db.wrap(f)
}

// ColumnFamilies returns the names of the live families, sorted, without rockline's own.
func (db *DB) ColumnFamilies() ([]string, error) {
	names, err := db.store.Families()
	if err != nil {
		return nil, closedErr(err)
	}
	out := names[:0]
	for _, n := range names {
		if !isReserved(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// DropColumnFamily drops the family and returns without waiting for commits already
// admitted that write to it: they complete normally. From the call on, new writes to
// the family and commits that buffered writes to it before the drop fail whole with
// ErrColumnFamilyDropped (a *DroppedError naming it), and the name can be created
// again at once as a new, empty family. The drop is recorded durably before the call
// returns; the physical RocksDB drop runs exactly once, when the last admitted commit
// releases the family (a crash in between is completed by the next Open). Reads and
// iterators already open on the old family keep working. The default family and
// rockline's own families cannot be dropped (*ArgumentError). The span
// rockline.cf.drop covers the call up to the physical drop.
func (db *DB) DropColumnFamily(name string) error {
	if name == storage.DefaultFamily {
		return &ArgumentError{Op: "DropColumnFamily", Arg: "name", Reason: "the default family cannot be dropped"}
	}
	if isReserved(name) {
		return &ArgumentError{Op: "DropColumnFamily", Arg: "name", Reason: fmt.Sprintf("%q is reserved by rockline", name)}
	}
	start := time.Now()
	_, span := db.tracer.Start(context.Background(), tracing.SpanDropCF, trace.WithAttributes(tracing.AttrFamily.String(name)))
	err := db.store.DropFamily(name, func(err error) {
		span.SetAttributes(tracing.AttrDropWaitMillis.Float64(float64(time.Since(start).Microseconds()) / 1000))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(tracing.AttrErrorType.String(errorType(err)))
		span.End()
		return closedErr(err)
	}
	return nil
}

func checkFamilyName(op, name string) error {
	if err := storage.ValidateFamilyName(name); err != nil {
		reason := "must be 1 to 255 bytes long, without \"#\""
		var oe *storage.OptionsError
		if errors.As(err, &oe) {
			reason = fmt.Sprintf("%v %s", oe.Value, oe.Reason)
		}
		return &ArgumentError{Op: op, Arg: "name", Reason: reason, Err: err}
	}
	if isReserved(name) {
		return &ArgumentError{Op: op, Arg: "name", Reason: fmt.Sprintf("%q: names starting with %q are reserved", name, reservedPrefix)}
	}
	return nil
}

// checkFamily verifies a family argument of a transaction call. A dropped family
// passes: reads through its handle keep working (writes check Dropped themselves).
func (db *DB) checkFamily(op string, c *ColumnFamily) (*storage.Family, error) {
	if c == nil || c.f == nil {
		if c != nil && c.db == db {
			return nil, ErrClosed
		}
		if c != nil && c.db != nil { // Default() of another, closed database
			return nil, fmt.Errorf("rockline: %s: column family of a closed database: %w", op, ErrClosed)
		}
		return nil, &ArgumentError{Op: op, Arg: "column family", Reason: "must not be nil"}
	}
	if c.db != db {
		return nil, &ArgumentError{Op: op, Arg: "column family", Reason: fmt.Sprintf("%q belongs to another database", c.f.Name()), Err: storage.ErrForeignFamily}
	}
	return c.f, nil
}
