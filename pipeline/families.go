package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
)

// reservedPrefix starts the names of families rockline keeps for itself: the local
// engine's log and system families and the families of layers (LayerFamily).
const reservedPrefix = "rockline."

func isReserved(name string) bool { return strings.HasPrefix(name, reservedPrefix) }

// ColumnFamily is a handle on one generation of a column family, safe to use until
// the database closes. Once the family is dropped, writes through it fail with
// ErrColumnFamilyDropped. Reads through it work only while something keeps the
// dropped generation: on the local engine, a transaction begun before the drop reads
// it until that transaction ends, and any read works until the physical drop (which
// waits for the commits admitted before the drop). After both, the generation's
// native memory is freed and reads through the handle fail with
// ErrColumnFamilyDropped (a *DroppedError naming the family). An iterator opened
// before the drop keeps working until it is closed.
type ColumnFamily struct {
	db *DB
	f  EngineFamily // nil: the default family of a database closed before Default
}

// Name returns the family's name.
func (c *ColumnFamily) Name() string {
	if c.f == nil {
		return storage.DefaultFamily
	}
	return c.f.Name()
}

// Options returns the family's memtable options, defaults filled in (zero on a DB
// opened with OpenEngine: the engine has no memtables of rockline's).
func (c *ColumnFamily) Options() storage.FamilyOptions {
	if o, ok := c.f.(interface{ Options() storage.FamilyOptions }); ok {
		return o.Options()
	}
	return storage.FamilyOptions{}
}

func (db *DB) wrap(f EngineFamily) *ColumnFamily { return &ColumnFamily{db: db, f: f} }

// family checks a family argument of a transaction call and returns the engine's
// handle: not nil, of this database, and the database open.
func (db *DB) family(op string, c *ColumnFamily) (EngineFamily, error) {
	switch {
	case c == nil || (c.db == nil && c.f == nil): // nil, or the zero ColumnFamily
		return nil, &ArgumentError{Op: op, Arg: "column family", Reason: "must not be nil"}
	case c.db != db && c.db != nil && c.f == nil: // Default() of another, closed database
		return nil, fmt.Errorf("rockline: %s: column family of a closed database: %w", op, ErrClosed)
	case c.db != db:
		return nil, &ArgumentError{Op: op, Arg: "column family", Reason: fmt.Sprintf("%q belongs to another database", c.Name()), Err: ErrForeignFamily}
	case c.f == nil || db.closing.Load():
		return nil, ErrClosed
	}
	return c.f, nil
}

// CreateColumnFamily creates a family with the options Config.Families gives its name
// (or Config.FamilyDefaults). It fails with ErrColumnFamilyExists for a live name and
// with an *ArgumentError for an empty, over-long or reserved ("rockline." prefix) name.
// The creation is a log entry of its own (LogEntry.Families), durable before the call
// returns, so Replay and Rebuild reproduce it. A name dropped earlier gets a new
// generation, above every one it had, also across reopens.
func (db *DB) CreateColumnFamily(name string) (*ColumnFamily, error) {
	if err := db.writable(); err != nil {
		return nil, err
	}
	if err := checkFamilyName("CreateColumnFamily", name); err != nil {
		return nil, err
	}
	if name == storage.DefaultFamily {
		return nil, fmt.Errorf("rockline: family %q: %w", name, ErrColumnFamilyExists)
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	f, err := db.eng.CreateFamily(context.Background(), name)
	if err != nil {
		return nil, err
	}
	return db.wrap(f), nil
}

// EnsureColumnFamily returns the live family with that name, creating it (as
// CreateColumnFamily does) when there is none: the open-or-create call for code that
// runs against a new or an existing database alike. It fails as ColumnFamily and
// CreateColumnFamily do, never with ErrColumnFamilyExists.
func (db *DB) EnsureColumnFamily(name string) (*ColumnFamily, error) {
	if err := checkFamilyName("EnsureColumnFamily", name); err != nil {
		return nil, err
	}
	cf, err := db.ColumnFamily(name)
	if !errors.Is(err, ErrColumnFamilyNotFound) {
		return cf, err
	}
	cf, err = db.CreateColumnFamily(name)
	if errors.Is(err, ErrColumnFamilyExists) { // created meanwhile by another caller
		return db.ColumnFamily(name)
	}
	return cf, err
}

// ColumnFamily returns the live family with that name, or an error matching
// ErrColumnFamilyNotFound.
func (db *DB) ColumnFamily(name string) (*ColumnFamily, error) {
	if isReserved(name) {
		return nil, fmt.Errorf("rockline: family %q: %w", name, ErrColumnFamilyNotFound)
	}
	if db.closing.Load() {
		return nil, ErrClosed
	}
	if name == storage.DefaultFamily {
		return db.Default(), nil
	}
	f, err := db.eng.Family(context.Background(), name)
	if err != nil {
		return nil, err
	}
	return db.wrap(f), nil
}

// Default returns the default column family, which always exists and cannot be
// dropped. After Close it returns a handle whose every use fails with ErrClosed.
func (db *DB) Default() *ColumnFamily {
	if db.closing.Load() {
		return &ColumnFamily{db: db}
	}
	return db.wrap(db.eng.Default())
}

// ColumnFamilies returns the names of the live families, sorted, without rockline's
// own; the default family is always among them.
func (db *DB) ColumnFamilies() ([]string, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	names, err := db.eng.Families(context.Background())
	if err != nil {
		return nil, err
	}
	out := []string{storage.DefaultFamily}
	for _, n := range names {
		if !isReserved(n) && n != storage.DefaultFamily {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DropColumnFamily drops the family. It does not wait for commits already admitted
// that write to it: they complete normally, and only the physical drop waits for
// them. From the call on, new writes to the family and commits that buffered writes to
// it (or read it with tracking) before the drop fail whole with ErrColumnFamilyDropped
// (a *DroppedError naming it), and the name can be created again at once as a new,
// empty family. The drop is a log entry of its own (LogEntry.Families), durable before
// the call returns, so Replay and Rebuild reproduce it. On the local engine that
// entry takes the next log position as a commit does, so the call waits for the write
// group ahead of it in the writer queue: under the parallel policy only for that
// group's write, under the serial policy also for its validation, Checks included,
// since the serial leader validates a whole group before it assigns positions. The
// physical RocksDB drop runs exactly once, when the last admitted commit releases the
// family (a crash in between is completed by the next Open). Transactions begun before
// the drop keep reading the old family, and iterators already open on it keep working,
// until they end; its native memory is freed after that and the physical drop (see
// ColumnFamily). The default family and rockline's own families cannot be dropped
// (*ArgumentError). The span rockline.cf.drop covers the call up to the physical drop.
func (db *DB) DropColumnFamily(name string) error {
	if err := db.writable(); err != nil {
		return err
	}
	if name == storage.DefaultFamily {
		return &ArgumentError{Op: "DropColumnFamily", Arg: "name", Reason: "the default family cannot be dropped"}
	}
	if isReserved(name) {
		return &ArgumentError{Op: "DropColumnFamily", Arg: "name", Reason: fmt.Sprintf("%q is reserved by rockline", name)}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	start := time.Now()
	ctx, span := db.tracer.Start(context.Background(), tracing.SpanDropCF, trace.WithAttributes(tracing.AttrFamily.String(name)))
	err := db.eng.DropFamily(ctx, name, func(err error) {
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
	}
	return err
}

// LayerFamily returns the family a layer built on the core keeps its records in
// ("rockline." + name; the event store's is LayerFamily("streams")), creating it when
// the database has none. Such a family belongs to the layer, not to the application:
// ColumnFamily, ColumnFamilies, CreateColumnFamily and DropColumnFamily do not see it,
// it is never dropped (so reads of it are never claimed), and its creation is not a
// log entry: Replay and Rebuild create it in their target at the first write the log
// routes to it. It gets Config.FamilyDefaults, at creation and at every reopen, as any
// family not named in Config.Families does. Its handle is used with the ordinary
// transaction calls. name follows the rules of family names; "log" and "system" are
// rockline's own and refused (*ArgumentError).
func (db *DB) LayerFamily(name string) (*ColumnFamily, error) {
	const op = "LayerFamily"
	full := reservedPrefix + name
	if name == "" || name == "log" || name == "system" {
		return nil, &ArgumentError{Op: op, Arg: "name", Reason: fmt.Sprintf("%q is not a layer's family name (not empty, not \"log\" or \"system\")", name)}
	}
	if err := storage.ValidateFamilyName(full); err != nil {
		return nil, &ArgumentError{Op: op, Arg: "name", Reason: fmt.Sprintf("%q does not make a valid family name", name), Err: err}
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	f, err := db.eng.LayerFamily(context.Background(), full)
	if err != nil {
		return nil, err
	}
	return db.wrap(f), nil
}

func checkFamilyName(op, name string) error {
	if err := storage.ValidateFamilyName(name); err != nil {
		reason := "must be 1 to 255 bytes long, without \"#\""
		var ce *ConfigError
		if errors.As(err, &ce) {
			reason = fmt.Sprintf("%q: expected %s", name, ce.Expected)
		}
		return &ArgumentError{Op: op, Arg: "name", Reason: reason, Err: err}
	}
	if isReserved(name) {
		return &ArgumentError{Op: op, Arg: "name", Reason: fmt.Sprintf("%q: names starting with %q are reserved", name, reservedPrefix)}
	}
	return nil
}
