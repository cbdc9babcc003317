package jetstream

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Config describes one partition: the JetStream stream that holds it and how the
// engine talks to it. Zero durations and counts take the defaults shown.
type Config struct {
	// Stream is the JetStream stream's name: 1..64 of A-Z a-z 0-9 _ - (for example
	// "RL_orders_3"). Required.
	Stream string
	// Subject is the prefix of every subject of the partition: dot-separated tokens of
	// A-Z a-z 0-9 _ - (for example "rl.orders.3"), at most MaxPrefixLen bytes, not
	// overlapping another stream's subjects. Required.
	Subject string
	// Replicas is the stream's replication factor: 1 or 3 (default 3). Note that R1 is
	// the slower one for commits: nats-server stages each atomic batch of an R1 file
	// stream in its own on-disk store synced on flush (newBatchStore in
	// jetstream_batching.go), about 4 ms a commit here, while R3 stages in memory and
	// relies on replication.
	Replicas int
	// DedupeWindow is how long JetStream remembers message IDs (event IDs and the
	// engine's own commit IDs): default 2 minutes, valid 1s..24h. Idempotent retries
	// of events work within it; a commit's timeout is resolved within it.
	DedupeWindow time.Duration
	// PublishTimeout bounds one batch publish when the caller's context has no earlier
	// deadline (default 5s, valid 10ms..5m).
	PublishTimeout time.Duration
	// ResolveTimeout bounds the resolution of a timed-out commit (default 15s, valid
	// 100ms..10m). It runs after the caller's context ended, if that is what timed out:
	// Commit never returns a timed-out commit's outcome as unknown while it can still
	// prove it.
	ResolveTimeout time.Duration
	// ReadTimeout bounds how long a snapshot read waits for the replica answering it to
	// apply the position asked for, when the context has no earlier deadline (default
	// 5s, valid 10ms..5m).
	ReadTimeout time.Duration
	// InFlightRetries is how many times Commit re-sends after "subject in flight"
	// (10164) when a re-read shows every expected version unchanged (default 16, valid
	// 0..1000).
	InFlightRetries int
	// MaxBatch is the most messages one commit may take (default and maximum 1000,
	// JetStream's atomic batch limit). A commit takes one message per write, per event
	// and per tracked read or stream check without events, plus one commit marker.
	MaxBatch int
	// PositionedValues are the codecs of positioned writes (Write.AtCommit names one
	// by its Name): each makes a value from a write's payload and its commit's
	// position whenever the write is read (positioned.go). Every client of the
	// partition must configure the same codecs (the same names for the same
	// encodings). Names: 1..32 of A-Z a-z 0-9 _ . -, each once. OpenDB adds the event
	// store's.
	PositionedValues []PositionedValue
}

// Defaults and bounds.
const (
	DefaultReplicas        = 3
	DefaultDedupeWindow    = 2 * time.Minute
	DefaultPublishTimeout  = 5 * time.Second
	DefaultResolveTimeout  = 15 * time.Second
	DefaultReadTimeout     = 5 * time.Second
	DefaultInFlightRetries = 16
	// MaxBatchMessages is JetStream's limit on the messages of one atomic batch.
	MaxBatchMessages = 1000
	// MaxSubjectLen bounds every subject the engine publishes: a subject travels in
	// protocol control lines (PUB, and MSG lines with a long reply subject), which
	// nats-server and nats.go cap at 4 KiB, so the engine keeps well below it.
	MaxSubjectLen = 2560
	// MaxPrefixLen bounds Config.Subject.
	MaxPrefixLen = 128
	// MaxMultiGet is the most messages one Direct Get multi_last answer may hold
	// (nats-server's maxAllowedResponses); one of them is the commit marker fence.
	MaxMultiGet = 1024
	// metaTruncated is the stream metadata key holding the truncation point.
	metaTruncated = "rockline.truncated"
)

var (
	streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixRE     = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.Replicas == 0 {
		out.Replicas = DefaultReplicas
	}
	if out.DedupeWindow == 0 {
		out.DedupeWindow = DefaultDedupeWindow
	}
	if out.PublishTimeout == 0 {
		out.PublishTimeout = DefaultPublishTimeout
	}
	if out.ResolveTimeout == 0 {
		out.ResolveTimeout = DefaultResolveTimeout
	}
	if out.ReadTimeout == 0 {
		out.ReadTimeout = DefaultReadTimeout
	}
	if out.InFlightRetries == 0 {
		out.InFlightRetries = DefaultInFlightRetries
	}
	if out.MaxBatch == 0 {
		out.MaxBatch = MaxBatchMessages
	}
	bad := func(field string, v any, want string) error {
		return &ConfigError{Field: field, Value: fmt.Sprint(v), Expected: want}
	}
	switch {
	case !streamNameRE.MatchString(out.Stream):
		return out, bad("Stream", strconv.Quote(out.Stream), "1..64 of A-Z a-z 0-9 _ -")
	case len(out.Subject) > MaxPrefixLen || !prefixRE.MatchString(out.Subject):
		return out, bad("Subject", strconv.Quote(out.Subject), fmt.Sprintf("dot-separated tokens of A-Z a-z 0-9 _ -, at most %d bytes", MaxPrefixLen))
	case out.Replicas != 1 && out.Replicas != 3:
		return out, bad("Replicas", out.Replicas, "1 or 3")
	case out.DedupeWindow < time.Second || out.DedupeWindow > 24*time.Hour:
		return out, bad("DedupeWindow", out.DedupeWindow, "1s..24h")
	case out.PublishTimeout < 10*time.Millisecond || out.PublishTimeout > 5*time.Minute:
		return out, bad("PublishTimeout", out.PublishTimeout, "10ms..5m")
	case out.ResolveTimeout < 100*time.Millisecond || out.ResolveTimeout > 10*time.Minute:
		return out, bad("ResolveTimeout", out.ResolveTimeout, "100ms..10m")
	case out.ReadTimeout < 10*time.Millisecond || out.ReadTimeout > 5*time.Minute:
		return out, bad("ReadTimeout", out.ReadTimeout, "10ms..5m")
	case out.InFlightRetries < 0 || out.InFlightRetries > 1000:
		return out, bad("InFlightRetries", out.InFlightRetries, "0..1000")
	case out.MaxBatch < 2 || out.MaxBatch > MaxBatchMessages:
		return out, bad("MaxBatch", out.MaxBatch, fmt.Sprintf("2..%d", MaxBatchMessages))
	}
	if _, err := positionedCodecs(out.PositionedValues); err != nil {
		return out, err
	}
	return out, nil
}

// Partition is one partition of a rockline database stored in one JetStream stream:
// optimistic commits over column families with tracked reads, event streams, snapshot
// reads at commit positions, a subscription to its commits, and truncation. It is safe
// for concurrent use. It does not own the NATS connection it was opened with.
type Partition struct {
	cfg        Config
	codecs     map[string]PositionedValue // Config.PositionedValues by name
	nc         *nats.Conn
	js         natsjs.JetStream
	subj       subjects
	maxPayload int

	truncated atomic.Uint64 // positions below this are gone (0: none)
	gens      sync.Map      // family -> uint64: the generation last seen current (families.go)
	stats     struct{ commits, conflicts, inFlight, retried, duplicates, timeouts, fenceWaits, staleRefusals, landedBelow, readRetries atomic.Uint64 }

	closed atomic.Bool
	mu     sync.Mutex
	subs   map[*Subscription]struct{} // running subscriptions; under mu
	wg     sync.WaitGroup
}

// Open creates the partition's stream, or updates it to cfg when it exists (file
// storage, cfg.Replicas, atomic publish and direct get allowed, the dedupe window, no
// limits, so every key's history is kept), and returns the Partition. It fails with a
// *ConfigError for a bad cfg, before talking to the server.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Partition, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, &ArgumentError{Op: "Open", Arg: "nc", Reason: "must not be nil"}
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, fmt.Errorf("rockline/jetstream: Open: %w", err)
	}
	codecs, err := positionedCodecs(c.PositionedValues)
	if err != nil {
		return nil, err
	}
	p := &Partition{
		cfg:        c,
		codecs:     codecs,
		nc:         nc,
		js:         js,
		subj:       subjects{prefix: c.Subject + "."},
		maxPayload: int(nc.MaxPayload()),
		subs:       map[*Subscription]struct{}{},
	}
	sc := natsjs.StreamConfig{
		Name:               c.Stream,
		Subjects:           []string{c.Subject + ".>"},
		Storage:            natsjs.FileStorage,
		Replicas:           c.Replicas,
		Retention:          natsjs.LimitsPolicy,
		Discard:            natsjs.DiscardOld,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  -1,
		MaxMsgSize:         -1,
		Duplicates:         c.DedupeWindow,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
	var info *natsjs.StreamInfo
	s, err := js.Stream(ctx, c.Stream)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound):
		s, err = js.CreateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("rockline/jetstream: Open: creating stream %q: %w", c.Stream, err)
		}
		info = s.CachedInfo()
	case err != nil:
		return nil, fmt.Errorf("rockline/jetstream: Open: looking up stream %q: %w", c.Stream, err)
	default:
		old := s.CachedInfo().Config
		sc.Metadata = old.Metadata
		s, err = js.UpdateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("rockline/jetstream: Open: updating stream %q: %w", c.Stream, err)
		}
		info = s.CachedInfo()
	}
	if v, ok := info.Config.Metadata[metaTruncated]; ok {
		t, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("rockline/jetstream: Open: stream %q metadata %s = %q: %w", c.Stream, metaTruncated, v, err)
		}
		p.truncated.Store(t)
	}
	if err := p.awaitServing(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// awaitServing returns once the stream answers both kinds of read: its leader
// (Position) and Direct Get. A stream just created answers "no responders" to both
// until its leader is elected and its replicas subscribe to direct gets; waited out
// here, backing off, until ctx ends, so the first call on the Partition does not
// meet it.
func (p *Partition) awaitServing(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		_, err := p.Position(ctx)
		if err == nil {
			_, err = p.multiGet(ctx, "Open", multiGetRequest{MultiLast: []string{p.subj.commit()}})
		}
		if err == nil || !errors.Is(err, nats.ErrNoResponders) {
			return err
		}
		if berr := backoff(ctx, attempt); berr != nil {
			return fmt.Errorf("rockline/jetstream: Open: stream %q not serving reads: %w", p.cfg.Stream, err)
		}
	}
}

// Config returns the partition's settings, defaults filled in.
func (p *Partition) Config() Config { return p.cfg }

// MaxPayload is the largest message (headers and data) the server accepts: its
// max_payload, as the connection learned it. Every message of a commit must fit.
func (p *Partition) MaxPayload() int { return p.maxPayload }

// Stats counts what the partition's calls met since Open.
type Stats struct {
	Commits    uint64 // commits written
	Conflicts  uint64 // commits refused with a *ConflictError
	InFlight   uint64 // "subject in flight" (10164) answers that were re-read and sent again
	Retried    uint64 // batches the server lost (10176, 10210) and that were sent again
	Duplicates uint64 // commits recognised as a retry of a stored one by their event IDs
	Timeouts   uint64 // publishes that timed out and were resolved by an abort marker
	FenceWaits uint64 // snapshot reads retried because the replica had not applied the position
	// StaleRefusals counts refused batches that the abort marker showed had landed
	// (a refusal from a leader cut off from the others; see Commit).
	StaleRefusals uint64
	// LandedBelow counts fenced batches found stored just below their abort marker:
	// the batch was being proposed when the marker passed the dedupe check (fence.go).
	// Each is reported as committed.
	LandedBelow uint64
	// ReadRetries counts Direct Get requests sent again because no replica answered
	// within 250 ms, or none was there (a replica cut off or gone; see directBatch).
	ReadRetries uint64
}

// Stats returns the partition's counters.
func (p *Partition) Stats() Stats {
	s := &p.stats
	return Stats{Commits: s.commits.Load(), Conflicts: s.conflicts.Load(), InFlight: s.inFlight.Load(), Retried: s.retried.Load(),
		Duplicates: s.duplicates.Load(), Timeouts: s.timeouts.Load(), FenceWaits: s.fenceWaits.Load(), StaleRefusals: s.staleRefusals.Load(),
		LandedBelow: s.landedBelow.Load(), ReadRetries: s.readRetries.Load()}
}

// Close ends every running subscription and waits for their goroutines; later calls
// fail with ErrClosed. Commits in flight finish (their outcome is the server's). It
// does not close the NATS connection. Close is idempotent.
func (p *Partition) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.mu.Lock()
	for s := range p.subs {
		s.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// apiError is JetStream's error object in API and publish answers.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) serverError(op string) *ServerError {
	return &ServerError{Op: op, Code: e.Code, ErrCode: e.ErrCode, Description: e.Description}
}

// deadline returns ctx bounded by d when ctx has no earlier deadline.
func deadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// backoff waits before retry attempt n (0-based): 0.5ms doubling up to 32ms, or until
// ctx ends. It returns ctx's error.
func backoff(ctx context.Context, n int) error {
	d := 500 * time.Microsecond << min(n, 6)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isTimeout reports whether a request error means "no answer in time" (the request
// may have been acted on).
func isTimeout(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}

// hdrLen is the encoded size of h as nats.go sends it.
func hdrLen(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

func validHeaderValue(s string) bool {
	return !strings.ContainsAny(s, "\r\n") && strings.TrimSpace(s) == s
}
