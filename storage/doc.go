// Package storage is rockline's only door to RocksDB.
//
// It opens a database with its column families, owns every native handle, and turns
// RocksDB's C API into a small Go surface: atomic batches across families, point and
// multi-key reads at the latest state or at a snapshot, bounded iterators, and the
// statistics a write-stall diagnosis needs. Nothing above this package imports
// grocksdb.
//
// # Handle lifetime
//
// Every operation enters a read-side gate (a sync.RWMutex) and checks that the
// database is open; Close takes the write side, so it waits for in-flight calls to
// leave native code, then releases every snapshot and iterator still registered, the
// family handles, the database and its options, in that order. After Close every call
// returns ErrClosed; nothing touches a native handle after it is destroyed. Snapshots
// and iterators are registered with their database for that reason and are safe to
// release after Close (it is a no-op).
//
// # Batches
//
// A Batch is built in Go memory in RocksDB's own WriteBatch wire format (the format
// of the write-ahead log) and handed to RocksDB in one cgo call, so a commit costs the
// same three native calls (create, write, destroy) whether it writes one key or ten
// thousand. Keys are limited to MaxKeySize and values to MaxValueSize; larger ones are
// refused with a *LimitError before anything is written.
//
// # Families, generations and deferred drops
//
// Each name has generations: a re-created name is a new RocksDB family ("orders", then
// "orders#2"), so it starts empty and is independent of the old one's pending drop.
// The highest generation of every name is recorded in MetaFamily (a synced write)
// before the family is created, so generations only grow, across reopens too. A commit
// that will write to a family first takes a Claim on it and Releases it after its
// write. DropFamily records a durable drop intent in MetaFamily (a synced write, with
// the WAL on whatever the options), then retires the family (new claims and batch puts
// fail with ErrFamilyRetired) and returns; DropFamilyWith lets the caller write its own
// record of the drop in between. The physical RocksDB drop runs exactly once, when the
// last claim is released, on the goroutine that releases it. A drop pending when the
// process dies is completed by the next Open before it returns, so a dropped family
// never comes back; one still claimed at Close is reported as a *DropPendingError. A
// failed physical drop is retried on the next DropFamily, Open or Close and counted in
// Stats. A dropped family's native handle, and with it RocksDB's memory for the
// family, is destroyed exactly once: as soon as the drop is physical, no read through
// it is in native code and no snapshot taken before the drop is open (such a snapshot
// keeps the family readable through its *Family), or at Close. Later reads through the
// *Family fail with ErrFamilyRetired; iterators opened before keep working until
// closed. After the first drop, padding families keep RocksDB from retaining the
// options of every family created later in memory (pads.go). Families
// found on disk but not named in Options.Families are reopened with default options.
// Creation and drop are serialised by one mutex taken before the gate, so neither can
// wait on the gate's read side behind a Close.
//
// # Options
//
// Options are validated whole before anything touches the disk: a bad value yields an
// *ConfigError naming the field, the value and the valid range, and no file is
// created. Per-family write buffer size and count default to RocksDB's own (64 MiB and
// 2), so they cost nothing until a deployment sets them; they are per family so the
// memory is paid only where the writes are.
package storage
