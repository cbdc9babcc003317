package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// rocklineAppender appends through eventstore.Store.Append on a fresh database.
type rocklineAppender struct {
	dir string
	db  *pipeline.DB
	es  *eventstore.Store
}

func openRocklineAppender(cfg *config, sync bool) (appender, error) {
	dir, err := os.MkdirTemp(cfg.dir, "rockline-appends-")
	if err != nil {
		return nil, err
	}
	db, err := pipeline.Open(dir, pipeline.Config{Sync: sync})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	es, err := eventstore.New(db)
	if err != nil {
		db.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &rocklineAppender{dir: dir, db: db, es: es}, nil
}

func (r *rocklineAppender) appendEvents(ctx context.Context, stream string, expected int64, events [][]byte) (int64, bool, error) {
	exp := eventstore.NoStream
	if expected >= 0 {
		exp = eventstore.Revision(uint64(expected))
	}
	evs := make([]eventstore.Event, len(events))
	for i, e := range events {
		evs[i] = eventstore.Event{Type: "Appended", Data: e}
	}
	res, err := r.es.Append(ctx, stream, exp, evs...)
	if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		return 0, true, nil
	}
	return int64(res.NextExpectedRevision), false, err
}

func (r *rocklineAppender) head(ctx context.Context, stream string) (int64, error) {
	evs, err := r.es.ReadStreamBackward(ctx, stream, ^uint64(0), 1)
	if err != nil || len(evs) == 0 {
		return -1, err
	}
	return int64(evs[0].Revision), nil
}

func (r *rocklineAppender) events(ctx context.Context, stream string) ([][]byte, error) {
	var out [][]byte
	for from := uint64(0); ; {
		page, err := r.es.ReadStream(ctx, stream, from, 4096)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if e.Revision != uint64(len(out)) {
				return nil, errors.New("revisions not dense")
			}
			out = append(out, e.Data)
		}
		if len(page) < 4096 {
			return out, nil
		}
		from = page[len(page)-1].Revision + 1
	}
}

func (r *rocklineAppender) fsyncs() int64 {
	st, err := r.db.StorageStats()
	if err != nil {
		return -1
	}
	return int64(st.WALSyncs)
}

func (r *rocklineAppender) serverCPU() time.Duration { return 0 }

func (r *rocklineAppender) close() error {
	return errors.Join(r.db.Close(), os.RemoveAll(r.dir))
}
