package pipeline

import "github.com/rockline/rockline/storage"

// Limits of what a transaction writes, whichever engine stores it: the front's
// statement of the storage layer's limits, so that layers built on this package (the
// event store, partitioned stores) and other engines check against pipeline and never
// import storage. A key or value over them is refused with an *ArgumentError matching
// ErrTooLarge.
const (
	// MaxKeySize is the largest key a transaction writes or reads (64 KiB).
	MaxKeySize = storage.MaxKeySize
	// MaxValueSize is the largest value a transaction writes, Put's or the one a
	// PutAtCommit's PositionedValue makes (1 GiB).
	MaxValueSize = storage.MaxValueSize
)
