package history

import (
	"context"
	"errors"

	"github.com/rockline/rockline/pipeline"
)

// ClassifyLocal is the local engine's Classifier, from Txn.Commit's documented
// errors: a conflict, a transaction too old, a dropped family, a closed database and
// an ended ctx (the commit waited for a lane and nothing was written) definitely did
// not commit; ErrStopped (a write whose fsync failed) may have; anything else is
// untyped.
func ClassifyLocal(err error) (Outcome, string) {
	switch {
	case err == nil:
		return OK, ""
	case errors.Is(err, pipeline.ErrConflict):
		return Failed, "conflict"
	case errors.Is(err, pipeline.ErrTxnTooOld):
		return Failed, "txn-too-old"
	case errors.Is(err, pipeline.ErrColumnFamilyDropped):
		return Failed, "cf-dropped"
	case errors.Is(err, pipeline.ErrClosed):
		return Failed, "closed"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Failed, "ctx"
	case errors.Is(err, pipeline.ErrStopped):
		return Unknown, "stopped"
	}
	return Unknown, UntypedError
}
