// Package testhooks is the seam through which rockline's own tests stop a commit at a
// chosen point, instead of sleeping, or inject storage failures. It is internal, so
// applications cannot reach it, and pipeline.Config carries no test seams: a test
// attaches hooks to a Config with With, and pipeline.Open picks them up.
package testhooks

import "github.com/rockline/rockline/internal/storagefaults"

// Hooks are the seams. Every hook runs on the committing goroutine; nil ones do
// nothing.
type Hooks struct {
	// AfterAdmit runs once a commit holds its claims on the families it writes, before
	// it enters a lane (Commit) or the validator (CommitInline).
	AfterAdmit func()
	// AfterSubmit runs once a lane has accepted a Commit's task (with the lane's
	// index), before Commit waits for the outcome. Setting it makes every Commit
	// queue on its lane, even an idle one, so the hook sees each commit queued.
	AfterSubmit func(lane int)
	// BeforeReplayEntry runs inside Replay, holding the database alone, before each
	// entry is applied (with the entry's position).
	BeforeReplayEntry func(pos uint64)
	// StorageFaults injects failures into the storage layer (see storagefaults).
	StorageFaults *storagefaults.Faults
}

// attach is set by package pipeline at init: it returns a copy of a pipeline.Config
// (passed as any, since this package cannot import pipeline) carrying h.
var attach func(cfg any, h *Hooks) any

// Register is called once by package pipeline to provide attach.
func Register(fn func(cfg any, h *Hooks) any) { attach = fn }

// With returns a copy of cfg, a pipeline.Config, that carries h.
func With[C any](cfg C, h *Hooks) C { return attach(cfg, h).(C) }
