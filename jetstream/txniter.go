package jetstream

import (
	"bytes"
	"context"

	"github.com/rockline/rockline/pipeline"
)

// NewIterator opens an iterator over family as the transaction sees it: the
// partition at the transaction's position (in the family's generation there) merged
// with the transaction's own Puts and Deletes within o's bounds (a buffered delete
// hides the key; PutAtCommit writes are not seen, as Get does not see them). Every
// key it yields from the snapshot is tracked as a read, like Get, so a commit fails
// if one changed; keys absent at the position are not (as on the local engine, a key
// created in the range later does not conflict). o.Generation is ignored: the
// transaction's generation is used. Writes buffered after it was opened are not seen.
// Errors: ErrTxnDone, a *pipeline.DroppedError for a family dropped at the position,
// and Partition.NewIterator's.
func (t *Txn) NewIterator(ctx context.Context, family string, o IterOptions) (*Iterator, error) {
	if t.done {
		return nil, ErrTxnDone
	}
	fs, err := t.family(ctx, family)
	if err != nil {
		return nil, err
	}
	if fs.Dropped {
		return nil, &pipeline.DroppedError{Family: family}
	}
	o.Generation = fs.Generation
	own := map[string]Write{}
	for _, k := range t.order {
		if w := t.writes[k]; w.Family == family {
			own[string(w.Key)] = Write{Key: w.Key, Value: bytes.Clone(w.Value), Delete: w.Delete}
		}
	}
	p := t.p
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if tr := p.truncated.Load(); t.at < tr {
		return nil, &TruncatedError{Position: t.at, First: tr}
	}
	it := &Iterator{p: p, ctx: ctx, op: "Txn.NewIterator", family: family, gen: fs.Generation, at: t.at, origin: leaderPos, chunk: firstWindow}
	it.onYield = func(item Item) {
		k := txnKey(family, item.Key)
		if _, seen := t.reads[k]; !seen {
			t.reads[k] = Read{Family: family, Key: bytes.Clone(item.Key), Version: item.Version, Generation: item.Generation}
		}
	}
	if err := it.list(o, own); err != nil {
		return nil, err
	}
	return it, nil
}
