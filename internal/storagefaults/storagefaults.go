// Package storagefaults is the seam through which rockline's own tests inject failures
// into the storage layer. It is internal, so applications cannot reach it, and
// storage.Options carries no test seam: a test attaches Faults to an Options with
// With, and storage.Open picks them up.
package storagefaults

// Faults are the failures to inject. Each hook, when set, runs before the operation it
// names; a non-nil error fails that operation as RocksDB would.
type Faults struct {
	// Write runs before every batch write.
	Write func() error
	// Sync runs before every WAL sync (storage.DB.SyncWAL).
	Sync func() error
	// Drop runs before every physical drop of a family, with the family's name.
	Drop func(name string) error
}

// attach is set by package storage at init: it returns a copy of a storage.Options
// (passed as any, since this package cannot import storage) carrying f.
var attach func(opts any, f *Faults) any

// Register is called once by package storage to provide attach.
func Register(fn func(opts any, f *Faults) any) { attach = fn }

// With returns a copy of opts, a storage.Options, that carries f.
func With[O any](opts O, f *Faults) O { return attach(opts, f).(O) }
