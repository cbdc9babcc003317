package validators

import "errors"

var (
	// ErrConflict is returned when a key the transaction read or wrote was written by
	// another commit after the transaction's read position. Nothing was written.
	ErrConflict = errors.New("rockline: transaction conflict")
	// ErrTxnTooOld is returned when a transaction's read position is older than the
	// conflict state kept (see MaxTableKeys). Nothing was written; retry the work in a
	// new transaction.
	ErrTxnTooOld = errors.New("rockline: transaction too old to validate")
	// ErrStopped is returned once a write and the filler for its position both failed:
	// the log cannot stay dense, so the database accepts no more commits. Reopening it
	// repairs the gap.
	ErrStopped = errors.New("rockline: database stopped after a failed write")
	// ErrInvalidPolicy is returned by New for an unknown policy name.
	ErrInvalidPolicy = errors.New("rockline: invalid validation policy")
	// ErrInvalidEnv is matched by the error New returns for an Env that lacks a
	// required field; the error names it.
	ErrInvalidEnv = errors.New("rockline: invalid validator environment")
)
