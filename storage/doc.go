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
// # Families
//
// The family registry lives in one place (families.go). A family dropped with
// DropFamily is dropped in RocksDB at once, but its native handle stays alive until
// Close, so reads through a *Family obtained earlier keep working; they see the data
// as it was at the drop. Families found on disk but not named in Options.Families are
// reopened with default options.
//
// # Options
//
// Options are validated whole before anything touches the disk: a bad value yields an
// *OptionsError naming the field, the value and the valid range, and no file is
// created. Per-family write buffer size and count default to RocksDB's own (64 MiB and
// 2), so they cost nothing until a deployment sets them; they are per family so the
// memory is paid only where the writes are.
package storage
