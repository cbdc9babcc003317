package eventstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/tracing"
)

// Projection defaults and bounds.
const (
	DefaultMaxBatchEvents = 256
	DefaultMaxBatchBytes  = 1 << 20
	MaxProjectionNameLen  = 255
	// idleCheckpoint is how many entries without a matching event a projection scans
	// before it stores its position anyway: a restart then does not rescan them, and
	// the projection's own position commits stay one in idleCheckpoint entries.
	idleCheckpoint = 1024
)

// ProjectionConfig describes a projection: a named, durable read model that the store
// keeps up to date from the log, exactly once. Zero values mean the default.
type ProjectionConfig struct {
	// Name identifies the projection's stored position (1..255 bytes of UTF-8 without
	// NUL). A projection started again under the same name resumes after it.
	Name string
	// Filter selects the events handed to Handle.
	Filter Filter
	// Handle applies events, in log order, to the read model through tx: its writes and
	// the projection's new position commit together in tx, so after a crash the
	// projection resumes after the last batch committed and no event is applied twice
	// or skipped. It may run again for the same batch in a fresh transaction when the
	// commit conflicts (pipeline.DB.Update's retries), so it must keep its state in tx,
	// not in memory. An error stops the projection with that error. Families the
	// projection owns (Owns) are re-created by Reset: look them up by name
	// (pipeline.DB.ColumnFamily) in Handle rather than keeping a handle.
	Handle func(tx *pipeline.Txn, events []RecordedEvent) error
	// MaxBatchEvents and MaxBatchBytes (data plus metadata) bound a batch; a batch
	// closes at the first commit boundary at or past either bound (the events of one
	// commit are never split). Defaults 256 and 1 MiB.
	MaxBatchEvents, MaxBatchBytes int
	// Owns names the column families the read model lives in: Reset drops and
	// re-creates them.
	Owns []string
	// TracerProvider and MeterProvider default to otel's global providers.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider

	// part, set by StartParallelProjection, keeps the events of this part's streams.
	part func(*RecordedEvent) bool
}

// Validate reports the first bad field as a *pipeline.ConfigError.
func (c ProjectionConfig) Validate() error {
	bad := func(field string, value any, expected string) error {
		return &pipeline.ConfigError{Field: field, Value: value, Expected: expected}
	}
	switch {
	case c.Name == "" || len(c.Name) > MaxProjectionNameLen || !utf8.ValidString(c.Name) || containsNUL(c.Name):
		return bad("Name", c.Name, "1 to 255 bytes of UTF-8 without NUL")
	case c.Handle == nil:
		return bad("Handle", nil, "a function")
	case c.MaxBatchEvents < 0:
		return bad("MaxBatchEvents", c.MaxBatchEvents, "at least 1, or 0 for the default")
	case c.MaxBatchBytes < 0:
		return bad("MaxBatchBytes", c.MaxBatchBytes, "at least 1, or 0 for the default")
	}
	for i, f := range c.Owns {
		if f == "" {
			return bad(fmt.Sprintf("Owns[%d]", i), f, "a family name")
		}
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// ProjectionState is what a projection is doing.
type ProjectionState string

// Projection states.
const (
	ProjectionRunning ProjectionState = "running"
	ProjectionPaused  ProjectionState = "paused"
	ProjectionFailed  ProjectionState = "failed"  // its handler (or a read) failed: Err says why
	ProjectionStopped ProjectionState = "stopped" // closed, or not running in this process
)

// ProjectionStatus is a projection's progress.
type ProjectionStatus struct {
	Name string
	// Position is the last log position the projection has applied and stored.
	Position uint64
	// Lag is how many published positions the projection has not yet read (entries
	// it has read without a matching event count as read, though Position stays).
	Lag   uint64
	State ProjectionState
	// Err is why a failed projection stopped.
	Err error
}

// ErrProjectionRunning is returned by StartProjection for a name this store already
// runs.
var ErrProjectionRunning = errors.New("rockline: projection already running")

// ErrProjectionMoved is returned (wrapped) when a projection's stored position changed
// under it: another process, or another Store, runs the same projection.
var ErrProjectionMoved = errors.New("rockline: projection position moved by another runner")

// ErrProjectionStopped is returned by Pause, Resume and Reset of a projection that has
// ended.
var ErrProjectionStopped = errors.New("rockline: projection stopped")

// Projection is a running projection. Its goroutine, owned by the Projection, reads
// the log after the stored position, folds matching events into batches and commits
// each batch with the new position; it ends on Close, the start context, the
// database's Close, or an error (the projection then reads as failed).
//
// Invariants:
//   - stored is the position committed with the last batch; the goroutine alone
//     writes it, under mu, after the commit.
//   - scan >= stored is where the goroutine reads next from; entries in between had no
//     matching event (or are the projection's own position commits).
//   - while paused, the goroutine is parked between batches (parked is closed once it
//     is) and commits nothing.
type Projection struct {
	s      *Store
	cfg    ProjectionConfig
	key    []byte
	cancel context.CancelFunc
	done   chan struct{}
	err    error // why the goroutine ended; read after done

	tracer  trace.Tracer
	handled metric.Float64Histogram
	events  metric.Int64Counter
	reg     metric.Registration

	mu      sync.Mutex
	stored  uint64
	scanned uint64        // scan, published for Status and CaughtUp
	moved   chan struct{} // closed (and replaced) when scanned grows
	paused  bool
	parked  chan struct{} // closed when the goroutine has parked for a Pause
	resume  chan struct{} // closed by Resume
	wake    context.CancelFunc
	stopped bool
	reset   bool // Reset set stored back; the goroutine rereads from it
}

// StartProjection starts the projection cfg describes, resuming after its stored
// position (0 for a new one). Errors: a *pipeline.ConfigError, ErrProjectionRunning,
// pipeline.ErrClosed, a read error.
func (s *Store) StartProjection(ctx context.Context, cfg ProjectionConfig) (*Projection, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBatchEvents == 0 {
		cfg.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	p := &Projection{s: s, cfg: cfg, key: projectionKey(cfg.Name), done: make(chan struct{})}
	if err := s.db.View(func(tx *pipeline.Txn) error {
		var err error
		p.stored, err = p.readPosition(tx, false)
		p.scanned = p.stored
		return err
	}); err != nil {
		return nil, err
	}
	if err := p.instrument(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if _, ok := s.running[cfg.Name]; ok {
		s.mu.Unlock()
		p.reg.Unregister()
		return nil, fmt.Errorf("%w: %q", ErrProjectionRunning, cfg.Name)
	}
	if s.running == nil {
		s.running = make(map[string]*Projection)
	}
	s.running[cfg.Name] = p
	s.mu.Unlock()
	ctx, p.cancel = context.WithCancel(ctx)
	go func() {
		defer close(p.done)
		p.err = p.run(ctx)
		p.mu.Lock()
		p.stopped = true
		if p.parked != nil {
			close(p.parked) // a Pause waiting for the goroutine returns
			p.parked = nil
		}
		p.mu.Unlock()
		p.reg.Unregister()
		s.mu.Lock()
		delete(s.running, cfg.Name)
		s.mu.Unlock()
	}()
	return p, nil
}

// instrument sets up the projection's spans and metrics.
func (p *Projection) instrument() error {
	tp, mp := p.cfg.TracerProvider, p.cfg.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	p.tracer = tp.Tracer(tracing.ScopeName)
	m := tracing.Meter(mp)
	var err error
	if p.handled, err = m.Float64Histogram(tracing.MetricProjectionHandlerDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a projection's handler takes per batch.")); err != nil {
		return err
	}
	if p.events, err = m.Int64Counter(tracing.MetricProjectionEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Events a projection has applied.")); err != nil {
		return err
	}
	lag, err := m.Int64ObservableGauge(tracing.MetricProjectionLag, metric.WithUnit("{position}"),
		metric.WithDescription("Log positions published beyond a projection's stored position."))
	if err != nil {
		return err
	}
	attrs := metric.WithAttributes(tracing.AttrProjection.String(p.cfg.Name))
	p.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(lag, int64(p.Status().Lag), attrs)
		return nil
	}, lag)
	return err
}

// run is the projection's goroutine.
func (p *Projection) run(ctx context.Context) error {
	db := p.s.db
	scan := p.position()
	for {
		if err := p.park(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if stored, reset := p.takeReset(); reset {
			scan = stored // Reset set the position back while the goroutine was parked
		}
		if scan >= db.LastPosition() {
			err := db.WaitForPosition(p.waitContext(ctx), scan+1)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, context.Canceled):
				continue // woken by Pause or Reset
			case err != nil:
				return err
			}
			continue
		}
		entries, err := db.ReadLog(scan+1, readPage)
		if err != nil {
			return err
		}
		if scan, err = p.apply(ctx, entries); err != nil {
			if ctx.Err() != nil {
				return nil // Close (or the start context) ended a batch in flight: a clean end
			}
			return err
		}
		p.mu.Lock()
		p.advance(scan)
		p.mu.Unlock()
	}
}

// takeReset reports, and clears, whether Reset set the position back since the last
// call, with the stored position.
func (p *Projection) takeReset() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reset
	p.reset = false
	return p.stored, r
}

// apply folds entries into batches and commits them; it returns the position read up
// to.
func (p *Projection) apply(ctx context.Context, entries []pipeline.LogEntry) (uint64, error) {
	var batch []RecordedEvent
	size, end := 0, p.position()
	for _, e := range entries {
		for i := range e.Events {
			if ev := &e.Events[i]; p.cfg.Filter.Match(ev) && (p.cfg.part == nil || p.cfg.part(ev)) {
				batch = append(batch, *ev)
				size += len(ev.Data) + len(ev.Metadata)
			}
		}
		end = e.Position
		if len(batch) >= p.cfg.MaxBatchEvents || size >= p.cfg.MaxBatchBytes {
			if err := p.commit(ctx, batch, end); err != nil {
				return 0, err
			}
			batch, size = nil, 0
			if p.pausing() || ctx.Err() != nil {
				return end, nil // park between batches; the rest of the page is read again
			}
		}
	}
	switch {
	case len(batch) > 0:
		return end, p.commit(ctx, batch, end)
	case end-p.position() >= idleCheckpoint:
		return end, p.commit(ctx, nil, end)
	}
	return end, nil
}

// commit applies one batch and stores end as the projection's position, in one
// transaction.
func (p *Projection) commit(ctx context.Context, batch []RecordedEvent, end uint64) error {
	ctx, span := p.tracer.Start(ctx, tracing.SpanProjectionBatch, trace.WithAttributes(
		tracing.AttrProjection.String(p.cfg.Name), tracing.AttrEvents.Int(len(batch)), tracing.AttrPosition.Int64(int64(end))))
	defer span.End()
	expect := p.position()
	err := p.s.db.Update(ctx, func(tx *pipeline.Txn) error {
		cur, err := p.readPosition(tx, true)
		if err != nil {
			return err
		}
		if cur != expect {
			return fmt.Errorf("%w: %q is at %d, this runner at %d", ErrProjectionMoved, p.cfg.Name, cur, expect)
		}
		if len(batch) > 0 {
			start := time.Now()
			err := p.cfg.Handle(tx, batch)
			p.handled.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(tracing.AttrProjection.String(p.cfg.Name)))
			if err != nil {
				return &ProjectionError{Name: p.cfg.Name, Position: batch[0].Position, Err: err}
			}
		}
		return tx.Put(p.s.cf, p.key, binary.AppendUvarint(nil, end))
	})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	p.events.Add(ctx, int64(len(batch)), metric.WithAttributes(tracing.AttrProjection.String(p.cfg.Name)))
	p.mu.Lock()
	p.stored = end
	p.advance(end)
	p.mu.Unlock()
	return nil
}

// advance records that the goroutine has read up to scan, waking CaughtUp calls. The
// caller holds mu.
func (p *Projection) advance(scan uint64) {
	if scan > p.scanned {
		p.scanned = scan
		if p.moved != nil {
			close(p.moved)
			p.moved = nil
		}
	}
}

// CaughtUp returns once the projection has applied every matching event at or below
// log position pos (for instance the position an Append returned: the read model then
// reflects it). It returns ctx's error when ctx ends first and ErrProjectionStopped,
// with why, when the projection ends first.
func (p *Projection) CaughtUp(ctx context.Context, pos uint64) error {
	for {
		p.mu.Lock()
		if p.scanned >= pos {
			p.mu.Unlock()
			return nil
		}
		if p.moved == nil {
			p.moved = make(chan struct{})
		}
		moved := p.moved
		p.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			if err := p.Wait(); err != nil {
				return fmt.Errorf("%w: %w", ErrProjectionStopped, err)
			}
			return ErrProjectionStopped
		}
	}
}

// ProjectionError reports the handler error that stopped a projection, and the log
// position of the first event of the batch it failed on.
type ProjectionError struct {
	Name     string
	Position uint64
	Err      error
}

// Error names the projection, the position and the handler's error.
func (e *ProjectionError) Error() string {
	return fmt.Sprintf("rockline: projection %q at log position %d: %v", e.Name, e.Position, e.Err)
}

// Unwrap returns the handler's error.
func (e *ProjectionError) Unwrap() error { return e.Err }

// readPosition reads the projection's stored position in tx.
func (p *Projection) readPosition(tx *pipeline.Txn, tracked bool) (uint64, error) {
	get := tx.GetUntracked
	if tracked {
		get = tx.Get
	}
	v, err := get(p.s.cf, p.key)
	if errors.Is(err, pipeline.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pos, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, fmt.Errorf("%w: position of projection %q holds %x", pipeline.ErrCorrupt, p.cfg.Name, v)
	}
	return pos, nil
}

func (p *Projection) pausing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *Projection) position() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stored
}

// park blocks while the projection is paused, telling a waiting Pause that it has
// parked.
func (p *Projection) park(ctx context.Context) error {
	p.mu.Lock()
	for p.paused {
		if p.parked != nil {
			close(p.parked)
			p.parked = nil
		}
		resume := p.resume
		p.mu.Unlock()
		select {
		case <-resume:
		case <-ctx.Done():
			return nil
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// waitContext returns ctx with a cancel that Pause and Reset call to wake the
// goroutine from its wait for new entries.
func (p *Projection) waitContext(ctx context.Context) context.Context {
	wctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	if p.wake != nil {
		p.wake()
	}
	p.wake = cancel
	if p.paused {
		cancel()
	}
	p.mu.Unlock()
	return wctx
}

// Pause stops the projection between batches and returns once it has: no batch is in
// flight until Resume. Pausing a paused projection does nothing; a projection that has
// ended returns ErrProjectionStopped.
func (p *Projection) Pause() error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return ErrProjectionStopped
	}
	if p.paused {
		p.mu.Unlock()
		return nil
	}
	p.paused = true
	p.resume = make(chan struct{})
	parked := make(chan struct{})
	p.parked = parked
	if p.wake != nil {
		p.wake()
	}
	p.mu.Unlock()
	<-parked
	return nil
}

// Resume lets a paused projection go on. It does nothing on a running one.
func (p *Projection) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return ErrProjectionStopped
	}
	if p.paused {
		p.paused = false
		close(p.resume)
	}
	return nil
}

// Reset rebuilds the read model from the start of the log: it pauses the projection,
// drops and re-creates every family in Owns, sets the stored position back to 0 and
// resumes it (a paused projection stays paused). Events the log no longer holds
// (pipeline.DB.TruncateLog) cannot be applied again: the projection then fails with
// pipeline.ErrLogTruncated.
func (p *Projection) Reset(ctx context.Context) error {
	p.mu.Lock()
	wasPaused := p.paused
	p.mu.Unlock()
	if err := p.Pause(); err != nil {
		return err
	}
	if err := recreate(p.s.db, p.cfg.Name, p.cfg.Owns); err != nil {
		return err
	}
	if err := p.rewind(ctx); err != nil {
		return err
	}
	if wasPaused {
		return nil
	}
	return p.Resume()
}

// recreate drops and re-creates the families owns names (Reset's read model).
func recreate(db *pipeline.DB, name string, owns []string) error {
	for _, f := range owns {
		if err := db.DropColumnFamily(f); err != nil && !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
			return fmt.Errorf("rockline: reset projection %q: %w", name, err)
		}
		if _, err := db.EnsureColumnFamily(f); err != nil {
			return fmt.Errorf("rockline: reset projection %q: %w", name, err)
		}
	}
	return nil
}

// rewind deletes the paused projection's stored position and sets it back to 0.
func (p *Projection) rewind(ctx context.Context) error {
	if err := p.s.db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Delete(p.s.cf, p.key) }); err != nil {
		return fmt.Errorf("rockline: reset projection %q: %w", p.cfg.Name, err)
	}
	p.mu.Lock()
	p.stored, p.scanned, p.reset = 0, 0, true
	p.mu.Unlock()
	return nil
}

// Status returns the projection's position, lag and state.
func (p *Projection) Status() ProjectionStatus {
	p.mu.Lock()
	st := ProjectionStatus{Name: p.cfg.Name, Position: p.stored, State: ProjectionRunning}
	scanned := max(p.scanned, p.stored)
	switch {
	case p.stopped:
		st.State = ProjectionStopped
	case p.paused:
		st.State = ProjectionPaused
	}
	p.mu.Unlock()
	if st.State == ProjectionStopped {
		select {
		case <-p.done:
			if p.err != nil {
				st.State, st.Err = ProjectionFailed, p.err
			}
		default:
		}
	}
	if last := p.s.db.LastPosition(); last > scanned {
		st.Lag = last - scanned
	}
	return st
}

// Done is closed when the projection's goroutine has ended.
func (p *Projection) Done() <-chan struct{} { return p.done }

// Wait blocks until the projection ends and returns why: nil after Close or the start
// context's end, the *ProjectionError of a failed handler, ErrProjectionMoved,
// pipeline.ErrClosed, or a read error.
func (p *Projection) Wait() error {
	<-p.done
	return p.err
}

// Close stops the projection and waits for its goroutine (a batch in flight commits
// or fails first). It returns what Wait does.
func (p *Projection) Close() error {
	p.cancel()
	return p.Wait()
}

// projectionKey is the store-family key of a projection's position.
func projectionKey(name string) []byte { return append([]byte{'p'}, name...) }

// Projections lists every projection that has stored a position in this database,
// sorted by name, with its position and lag; those running through this Store report
// their state, the others read as stopped.
func (s *Store) Projections() ([]ProjectionStatus, error) {
	var out []ProjectionStatus
	err := s.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'p'}, Upper: []byte{'q'}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			pos, n := binary.Uvarint(it.Value())
			if n <= 0 {
				return fmt.Errorf("%w: position of projection %q holds %x", pipeline.ErrCorrupt, it.Key()[1:], it.Value())
			}
			out = append(out, ProjectionStatus{Name: string(it.Key()[1:]), Position: pos, State: ProjectionStopped})
		}
		return it.Err()
	})
	if err != nil {
		return nil, err
	}
	last := s.db.LastPosition()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out {
		if p, ok := s.running[out[i].Name]; ok {
			out[i] = p.Status()
			continue
		}
		if last > out[i].Position {
			out[i].Lag = last - out[i].Position
		}
	}
	return out, nil
}
