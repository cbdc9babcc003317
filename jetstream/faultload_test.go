package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rockline/rockline/jetstream"
)

// The harness of the failover tests: writers that commit until stopped and record
// every outcome, a subscriber that runs throughout, and the checks of the log read
// back afterwards.

// longFailover is set (ROCKLINE_FAILOVER_LONG=1) for the long form: more commits in
// every phase.
var longFailover = os.Getenv("ROCKLINE_FAILOVER_LONG") != ""

// phaseAcks is how many acknowledged commits each writer makes in a phase (before the
// fault, after it, after the restart).
func phaseAcks() int64 {
	if longFailover {
		return 400
	}
	return 40
}

type outcome struct {
	writer     string
	id         string
	pos        uint64
	err        error
	start, end time.Time
}

// faultLoad runs writers, each committing a versioned write of its own key and one
// event with an ID on its own stream, until stop.
type faultLoad struct {
	t    *testing.T
	ctx  context.Context
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	outcomes []outcome
	acks     map[string]*atomic.Int64
	// gate is closed while writers may commit; pause replaces it with an open one
	// that resume closes. live counts running writers, atGate those waiting at a
	// shut gate.
	gate         chan struct{}
	live, atGate int
	// paused holds the [pause, resume] intervals, which pauses leaves out.
	paused [][2]time.Time
}

func newFaultLoad(t *testing.T, ctx context.Context) *faultLoad {
	open := make(chan struct{})
	close(open)
	l := &faultLoad{t: t, ctx: ctx, stop: make(chan struct{}), acks: map[string]*atomic.Int64{}, gate: open}
	t.Cleanup(l.halt)
	return l
}

func (l *faultLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *faultLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// pause shuts the gate and returns once every running writer has finished its
// commit in flight and waits at it, or fails at the deadline.
func (l *faultLoad) pause(deadline time.Duration) {
	l.t.Helper()
	l.mu.Lock()
	l.gate = make(chan struct{})
	l.paused = append(l.paused, [2]time.Time{time.Now()})
	l.mu.Unlock()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		live, at := l.live, l.atGate
		l.mu.Unlock()
		if at == live {
			return
		}
		if time.Since(start) > deadline {
			l.t.Fatalf("pausing the load: %d of %d writers at the gate after %v", at, live, deadline)
		}
		<-tick.C
	}
}

// resume opens the gate a pause shut.
func (l *faultLoad) resume() {
	l.mu.Lock()
	close(l.gate)
	l.paused[len(l.paused)-1][1] = time.Now()
	l.mu.Unlock()
}

// pass is where a writer waits while the load is paused; it reports false once the
// load is stopped.
func (l *faultLoad) pass() bool {
	l.mu.Lock()
	gate := l.gate
	select {
	case <-gate:
		l.mu.Unlock()
		return true
	default:
	}
	l.atGate++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.atGate--
		l.mu.Unlock()
	}()
	select {
	case <-gate:
		return true
	case <-l.stop:
		return false
	}
}

// add starts writer name on p.
func (l *faultLoad) add(name string, p *jetstream.Partition) { l.addWriter(name, p, false) }

// addReading adds a writer that reads its key (a snapshot read at the leader's latest
// position) before every commit, as a transaction does.
func (l *faultLoad) addReading(name string, p *jetstream.Partition) { l.addWriter(name, p, true) }

func (l *faultLoad) addWriter(name string, p *jetstream.Partition, readEach bool) {
	n := &atomic.Int64{}
	l.mu.Lock()
	l.acks[name] = n
	l.mu.Unlock()
	key := []byte(name)
	l.mu.Lock()
	l.live++
	l.mu.Unlock()
	l.wg.Go(func() {
		var version uint64
		reread := true
		defer func() {
			l.mu.Lock()
			l.live--
			l.mu.Unlock()
		}()
		for i := 0; !l.stopped() && l.ctx.Err() == nil && l.pass(); i++ {
			if reread {
				rctx, cancel := context.WithTimeout(l.ctx, 2*time.Second)
				pos, err := p.Position(rctx)
				var it jetstream.Item
				if err == nil {
					it, _, err = p.Get(rctx, "f", key, pos)
				}
				cancel()
				if err != nil {
					// The node this writer talks to has no leader to ask: wait a
					// little (bounded by stop), as a client backs off.
					select {
					case <-l.stop:
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				version, reread = it.Version, false
			}
			id := fmt.Sprintf("%s-%d", name, i)
			start := time.Now()
			pos, err := p.Commit(l.ctx, &jetstream.Commit{
				Writes: []jetstream.Write{{Family: "f", Key: key, Value: []byte(id), Version: version}},
				Events: []jetstream.Event{ev(name, id, "E", "")},
			})
			o := outcome{writer: name, id: id, pos: pos, err: err, start: start, end: time.Now()}
			l.mu.Lock()
			l.outcomes = append(l.outcomes, o)
			l.mu.Unlock()
			if err == nil {
				n.Add(1)
				version = pos - 1 // the write is the message before the commit marker
			}
			reread = err != nil || readEach
		}
	})
}

// waitAcks waits until every writer named has made want more acknowledged commits
// than it had at the call, or fails at the deadline.
func (l *faultLoad) waitAcks(what string, want int64, deadline time.Duration, names ...string) time.Duration {
	l.t.Helper()
	start := time.Now()
	base := map[string]int64{}
	for _, n := range names {
		base[n] = l.acks[n].Load()
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for _, n := range names {
			if l.acks[n].Load()-base[n] < want {
				done = false
			}
		}
		if done {
			return time.Since(start)
		}
		if time.Since(start) > deadline {
			var got []string
			for _, n := range names {
				got = append(got, fmt.Sprintf("%s %d", n, l.acks[n].Load()-base[n]))
			}
			l.t.Fatalf("%s: writers short of %d acknowledged commits after %v: %s; errors %s", what, want, deadline, strings.Join(got, ", "), l.errorSummary())
		}
		<-tick.C
	}
}

// errClass names an outcome's error for the figures.
func errClass(err error) string {
	var se *jetstream.ServerError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, jetstream.ErrTimeout):
		return "ErrTimeout"
	case errors.Is(err, jetstream.ErrOutcomeUnknown):
		return "ErrOutcomeUnknown"
	case errors.Is(err, jetstream.ErrConflict):
		return "ErrConflict"
	case errors.As(err, &se):
		return fmt.Sprintf("ServerError %d", se.ErrCode)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "context"
	default:
		return "untyped"
	}
}

// typedFailure reports whether err is one a commit may end with when the cluster is
// failing: proved not written (ErrTimeout), unknown (ErrOutcomeUnknown), a server
// refusal, or a conflict after an unknown outcome that had landed.
func typedFailure(err error) bool {
	c := errClass(err)
	return c != "untyped" && c != "ok"
}

func (l *faultLoad) errorSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	counts := map[string]int{}
	samples := map[string]string{}
	for _, o := range l.outcomes {
		if o.err == nil {
			continue
		}
		c := errClass(o.err)
		counts[c]++
		if _, ok := samples[c]; !ok {
			samples[c] = o.err.Error()
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	var out []string
	for c, n := range counts {
		out = append(out, fmt.Sprintf("%s ×%d (%s)", c, n, samples[c]))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// pausedBetween reports whether the load was paused at some point in [from, to].
// The caller holds mu.
func (l *faultLoad) pausedBetween(from, to time.Time) bool {
	for _, p := range l.paused {
		if p[0].Before(to) && (p[1].IsZero() || p[1].After(from)) {
			return true
		}
	}
	return false
}

// pauses returns the longest commit and the longest interval without any
// acknowledgement, from the first ack to the last, leaving out gaps that span a
// pause of the load.
func (l *faultLoad) pauses() (longestCommit, longestGap time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var acks []time.Time
	for _, o := range l.outcomes {
		longestCommit = max(longestCommit, o.end.Sub(o.start))
		if o.err == nil {
			acks = append(acks, o.end)
		}
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i].Before(acks[j]) })
	for i := 1; i < len(acks); i++ {
		if !l.pausedBetween(acks[i-1], acks[i]) {
			longestGap = max(longestGap, acks[i].Sub(acks[i-1]))
		}
	}
	return longestCommit, longestGap
}

// acksBetween counts the acknowledgements of writers' commits that ended in [from, to).
func (l *faultLoad) acksBetween(from, to time.Time, writers ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.outcomes {
		if o.err == nil && slices.Contains(writers, o.writer) && !o.end.Before(from) && o.end.Before(to) {
			n++
		}
	}
	return n
}

// firstAckAfter returns how long after t the first commit that started after t was
// acknowledged (0 if none was): commits in flight at t do not count.
func (l *faultLoad) firstAckAfter(t time.Time, writers ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	want := map[string]bool{}
	for _, w := range writers {
		want[w] = true
	}
	var first time.Time
	for _, o := range l.outcomes {
		if o.err == nil && (len(want) == 0 || want[o.writer]) && o.start.After(t) && (first.IsZero() || o.end.Before(first)) {
			first = o.end
		}
	}
	if first.IsZero() {
		return 0
	}
	return first.Sub(t)
}

// follower subscribes from 0 and checks, entry by entry, that positions are dense:
// each entry's first message comes right after the previous entry's position.
type follower struct {
	mu      sync.Mutex
	entries []jetstream.Entry
	errs    []string
	sub     *jetstream.Subscription
}

func follow(t *testing.T, p *jetstream.Partition) *follower {
	t.Helper()
	f := &follower{}
	var last uint64
	s, err := p.Subscribe(context.Background(), 0, func(e jetstream.Entry) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if first := firstSeq(e); first != last+1 {
			f.errs = append(f.errs, fmt.Sprintf("entry at %d starts at %d, after %d", e.Position, first, last))
		}
		last = e.Position
		f.entries = append(f.entries, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.sub = s
	t.Cleanup(func() { _ = s.Close() })
	return f
}

// waitFor waits until the follower has delivered pos, or fails at the deadline.
func (f *follower) waitFor(t *testing.T, pos uint64, deadline time.Duration) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for f.sub.Position() < pos {
		select {
		case <-f.sub.Done():
			t.Fatalf("the subscription running throughout ended at %d: %v", f.sub.Position(), f.sub.Wait())
		case <-tick.C:
		}
		if time.Since(start) > deadline {
			t.Fatalf("the subscription running throughout is at %d after %v, want %d", f.sub.Position(), deadline, pos)
		}
	}
}

func firstSeq(e jetstream.Entry) uint64 {
	first := e.Position
	for _, w := range e.Writes {
		first = min(first, w.Version)
	}
	for _, v := range e.Events {
		first = min(first, v.Sequence)
	}
	return first
}

// faultFigures is what a failover test reports.
type faultFigures struct {
	acked, aborted, unknown, unknownLanded int
}

// verify reads the whole log back through a new subscription on p and checks it
// against the outcomes: every acknowledged commit once at its position with its
// event and write, nothing else but abort markers and commits whose outcome was
// unknown, each event ID once, positions dense (each entry's messages right after the
// previous position, its marker last); and the follower saw the same entries.
func (l *faultLoad) verify(t *testing.T, p *jetstream.Partition, f *follower) faultFigures {
	t.Helper()
	var end uint64
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pos, err := p.Position(ctx)
		cancel()
		if err == nil {
			end = pos
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("final position: %v", err)
		}
		tm := time.NewTimer(50 * time.Millisecond) // between leaders: ask again shortly
		<-tm.C
	}
	l.mu.Lock()
	outcomes := append([]outcome(nil), l.outcomes...)
	l.mu.Unlock()
	acked := map[uint64]outcome{}
	unknown := map[string]bool{}
	var fig faultFigures
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			if prev, dup := acked[o.pos]; dup {
				t.Errorf("position %d acknowledged twice: %s and %s", o.pos, prev.id, o.id)
			}
			acked[o.pos] = o
			fig.acked++
		case !errors.Is(o.err, jetstream.ErrTimeout) && !errors.Is(o.err, jetstream.ErrConflict) && errClass(o.err) != "ServerError 10176":
			// Not proved unwritten: it may be in the log.
			unknown[o.id] = true
			fig.unknown++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var log []jetstream.Entry
	var mu sync.Mutex
	s, err := p.Subscribe(ctx, 0, func(e jetstream.Entry) error {
		mu.Lock()
		log = append(log, e)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	for s.Position() < end {
		select {
		case <-s.Done():
			t.Fatalf("reading the log back ended at %d of %d: %v", s.Position(), end, s.Wait())
		case <-ctx.Done():
			t.Fatalf("reading the log back: at %d of %d by the deadline", s.Position(), end)
		case <-tick.C:
		}
	}
	tick.Stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	var last uint64
	for _, e := range log {
		if e.Position > end {
			break
		}
		if first := firstSeq(e); first != last+1 || e.Position != last+1+uint64(len(e.Writes)+len(e.Events)) {
			t.Errorf("entry at %d (first message %d, %d messages) after %d: positions not dense", e.Position, first, len(e.Writes)+len(e.Events)+1, last)
		}
		last = e.Position
		if e.Aborted {
			fig.aborted++
			if len(e.Writes)+len(e.Events) != 0 {
				t.Errorf("abort marker at %d carries writes or events", e.Position)
			}
			continue
		}
		if len(e.Events) != 1 || len(e.Writes) != 1 {
			t.Errorf("entry at %d: %d events, %d writes, want 1 and 1", e.Position, len(e.Events), len(e.Writes))
			continue
		}
		id := e.Events[0].ID
		if at, dup := seen[id]; dup {
			t.Errorf("commit %s in the log twice, at %d and %d", id, at, e.Position)
		}
		seen[id] = e.Position
		if string(e.Writes[0].Value) != id {
			t.Errorf("entry at %d: event %s with write %q", e.Position, id, e.Writes[0].Value)
		}
		o, ok := acked[e.Position]
		switch {
		case ok && o.id != id:
			t.Errorf("position %d acknowledged for %s holds %s", e.Position, o.id, id)
		case !ok && unknown[id]:
			fig.unknownLanded++
		case !ok:
			var what []string
			refused := false
			for _, o := range outcomes {
				if o.id == id {
					what = append(what, fmt.Sprintf("pos %d err %v, %v..%v", o.pos, o.err, o.start.Format("15:04:05.000"), o.end.Format("15:04:05.000")))
					refused = errors.Is(o.err, jetstream.ErrConflict)
				}
			}
			msg := fmt.Sprintf("entry %s at %d (stored %v) was neither acknowledged nor of unknown outcome (refused as a conflict: %v): %v", id, e.Position, e.Time.Format("15:04:05.000"), refused, what)
			t.Error(msg)
		}
	}
	for pos, o := range acked {
		if at, ok := seen[o.id]; !ok || at != pos {
			t.Errorf("acknowledged commit %s at %d is not in the log (found at %d)", o.id, pos, at)
		}
	}
	// The subscription that ran throughout saw the same log.
	f.waitFor(t, end, 30*time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.errs {
		t.Errorf("subscriber running throughout: %s", e)
	}
	n := 0
	for i, e := range f.entries {
		if e.Position > end {
			break
		}
		n++
		if i >= len(log) || log[i].Position != e.Position {
			t.Errorf("subscriber running throughout: entry %d at %d, the log read back has another", i, e.Position)
			break
		}
	}
	if want := countUpTo(log, end); n != want {
		t.Errorf("subscriber running throughout saw %d entries up to %d, the log holds %d", n, end, want)
	}
	return fig
}

func countUpTo(log []jetstream.Entry, end uint64) int {
	n := 0
	for _, e := range log {
		if e.Position <= end {
			n++
		}
	}
	return n
}

// streamInfo asks the stream's leader, through nc, for the stream's cluster state.
func streamInfo(ctx context.Context, nc *nats.Conn, stream string) (*natsjs.StreamInfo, error) {
	js, err := natsjs.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.CachedInfo(), nil
}

// pollInfo polls the stream's info through nc (each request bounded by 250 ms, as a
// leaderless stream does not answer), every 20 ms, until ok accepts it, and
// returns how long that took; it fails the test at the deadline.
func pollInfo(t *testing.T, nc *nats.Conn, stream, what string, deadline time.Duration, ok func(*natsjs.StreamInfo) bool) time.Duration {
	t.Helper()
	took, last, reached := pollInfoUntil(nc, stream, deadline, 0, ok)
	if !reached {
		t.Fatalf("%s: not reached after %v (last: %s)", what, deadline, last)
	}
	return took
}

// pollInfoUntil asks for the stream's info every 20 ms until ok holds of it, the
// deadline passes, or (stall > 0) the summed lag of the replicas not current has
// reached no new low for stall. It returns how long it took, the last state seen and
// whether ok held.
func pollInfoUntil(nc *nats.Conn, stream string, deadline, stall time.Duration, ok func(*natsjs.StreamInfo) bool) (time.Duration, string, bool) {
	start := time.Now()
	var last string
	low, lowAt := uint64(math.MaxUint64), start
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		info, err := streamInfo(ctx, nc, stream)
		cancel()
		if err == nil && ok(info) {
			return time.Since(start), last, true
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("leader %q, replicas %s", info.Cluster.Leader, replicaState(info))
			if lag := behind(info); lag < low {
				low, lowAt = lag, time.Now()
			}
		}
		if time.Since(start) > deadline || (stall > 0 && time.Since(lowAt) > stall) {
			return time.Since(start), last, false
		}
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
}

// behind sums the lag of the replicas that are not current.
func behind(info *natsjs.StreamInfo) uint64 {
	var lag uint64
	if info.Cluster != nil {
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				lag += r.Lag
			}
		}
	}
	return lag
}

// awaitCaughtUp waits, as pollInfo does, until ok (a replica, or every replica,
// current) holds, and returns how long it took. A nats-server replica can stall while
// catching up: CI once saw a healed old leader at a lag of 3,331 messages, active and
// answering, make no progress for 90 s with the load paused (nats-server has open
// reports of the kind, nats-io/nats-server#8319). Catching up is the server's work,
// not the engine's promise; so when the lag reaches no new low for 20 s, this does
// what an operator does, asks the stream leader to step down (which restarts the
// catch-up from a new leader), says so in the log, and waits once more.
func awaitCaughtUp(t *testing.T, nc *nats.Conn, stream, what string, ok func(*natsjs.StreamInfo) bool) time.Duration {
	t.Helper()
	start := time.Now()
	if _, last, reached := pollInfoUntil(nc, stream, 90*time.Second, 20*time.Second, ok); !reached {
		t.Logf("%s: no progress in 20 s, %v after it was asked for (last: %s); asking the stream leader to step down", what, time.Since(start).Round(time.Millisecond), last)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
		cancel()
		if err != nil {
			t.Logf("%s: step-down request: %v", what, err)
		}
		pollInfo(t, nc, stream, what+" after a leader step-down", 60*time.Second, ok)
	}
	return time.Since(start)
}

func replicaState(info *natsjs.StreamInfo) string {
	if info.Cluster == nil {
		return "none"
	}
	var out []string
	for _, r := range info.Cluster.Replicas {
		out = append(out, fmt.Sprintf("%s current=%v offline=%v lag=%d active=%v", r.Name, r.Current, r.Offline, r.Lag, r.Active.Round(time.Millisecond)))
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// leaderIs returns a check that the stream has a leader satisfying ok.
func leaderIs(ok func(string) bool) func(*natsjs.StreamInfo) bool {
	return func(info *natsjs.StreamInfo) bool {
		return info.Cluster != nil && info.Cluster.Leader != "" && ok(info.Cluster.Leader)
	}
}

// replicaCurrent returns a check that the replica named is current with no lag.
func replicaCurrent(name string) func(*natsjs.StreamInfo) bool {
	return func(info *natsjs.StreamInfo) bool {
		if info.Cluster == nil {
			return false
		}
		if info.Cluster.Leader == name {
			return true
		}
		for _, r := range info.Cluster.Replicas {
			if r.Name == name {
				return r.Current && !r.Offline && r.Lag == 0
			}
		}
		return false
	}
}

// openRetry opens a partition through nc, retrying until the deadline while the
// cluster cannot place the stream yet.
func openRetry(t *testing.T, nc *nats.Conn, cfg jetstream.Config, deadline time.Duration) *jetstream.Partition {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p, err := jetstream.Open(ctx, nc, cfg)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = p.Close() })
			return p
		}
		if time.Since(start) > deadline {
			t.Fatalf("opening %s: %v", cfg.Stream, err)
		}
		tm := time.NewTimer(100 * time.Millisecond)
		<-tm.C
	}
}
