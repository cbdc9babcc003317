package main

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Two anchors of the appends scenario, which say what the figures of the real engines
// are made of rather than compete with them:
//
//   - null keeps each stream's events in a map under one mutex. Its CPU per append is
//     the harness's own (the workers' loop, payloads, latency histograms, the clock)
//     plus a map append, the floor under every engine's figure. It runs in the cells at
//     default durability only: it has nothing to sync.
//   - disk is the disk's bare rate: each append writes one record (the stream, the
//     events' bytes) to a log file with one write(2) and, in the cells with an fsync per
//     append, an fdatasync(2) of its own, with no gathering. Appends from several workers
//     write and sync side by side, as the kernel lets them. It runs in the cells with an
//     fsync per append only: an engine with one fsync per append cannot beat it, and one
//     that shares fsyncs among workers can.
//
// Both keep the events in memory for the read-back check, so they check as the engines do.

const (
	kindNullAppends = "null"
	kindDiskAppends = "disk"
)

// anchorRuns reports whether the anchor engine name runs in cell (every other engine
// runs in every cell).
func anchorRuns(name string, cell appendsCell) bool {
	switch name {
	case kindNullAppends:
		return !cell.sync
	case kindDiskAppends:
		return cell.sync
	}
	return true
}

// memAppender is the streams of an anchor: what was appended, under one mutex, and an
// optional log file each append is written to first.
type memAppender struct {
	mu      sync.Mutex
	streams map[string][][]byte
	log     *os.File // nil for null
	fsync   bool     // an fdatasync after each write
	syncs   atomic.Int64
	dir     string
}

func openNullAppender(*config, bool) (appender, error) {
	return &memAppender{streams: map[string][][]byte{}}, nil
}

func openDiskAppender(cfg *config, sync bool) (appender, error) {
	dir, err := os.MkdirTemp(cfg.dir, "disk-appends-")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dir+"/log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &memAppender{streams: map[string][][]byte{}, log: f, fsync: sync, dir: dir}, nil
}

func (m *memAppender) appendEvents(_ context.Context, stream string, expected int64, events [][]byte) (int64, bool, error) {
	m.mu.Lock()
	evs := m.streams[stream]
	if int64(len(evs))-1 != expected {
		m.mu.Unlock()
		return 0, true, nil
	}
	m.streams[stream] = append(evs, events...)
	m.mu.Unlock()
	if m.log != nil { // the append is acknowledged once its record is written (and synced)
		if err := m.write(stream, events); err != nil {
			return 0, false, err
		}
	}
	return int64(len(evs) + len(events) - 1), false, nil
}

// write appends one record to the log file with a single write(2), then fdatasyncs
// it when the cell asks for an fsync per append.
func (m *memAppender) write(stream string, events [][]byte) error {
	rec := binary.AppendUvarint(nil, uint64(len(stream)))
	rec = append(rec, stream...)
	for _, e := range events {
		rec = binary.AppendUvarint(rec, uint64(len(e)))
		rec = append(rec, e...)
	}
	if _, err := m.log.Write(rec); err != nil {
		return err
	}
	if !m.fsync {
		return nil
	}
	m.syncs.Add(1)
	return syscall.Fdatasync(int(m.log.Fd()))
}

func (m *memAppender) head(_ context.Context, stream string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.streams[stream])) - 1, nil
}

func (m *memAppender) events(_ context.Context, stream string) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.streams[stream], nil
}

func (m *memAppender) fsyncs() int64 {
	if m.log == nil {
		return -1
	}
	return m.syncs.Load()
}

func (m *memAppender) serverCPU() time.Duration { return 0 }

func (m *memAppender) close() error {
	if m.log == nil {
		return nil
	}
	return errors.Join(m.log.Close(), os.RemoveAll(m.dir))
}
