package crash

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// epochCycles is how many cycles share one database before the harness starts a fresh
// one: it bounds the log (and the families) each cycle's replay check rebuilds, so the
// long form stays linear in its cycles.
const epochCycles = 25

// TestCrash is the crash-recovery harness. Each cycle starts the child (TestCrashChild)
// on the database, kills it with SIGKILL after a random 50-400 ms or a random number of
// acknowledged lines, reopens the database and checks:
//   - every acknowledged commit is in the log at its position with the same writes or
//     events, and the state holds what the log's last write of each key wrote;
//   - the log is dense from 1 to LastPosition;
//   - the state equals a replay of the log (Rebuild into a fresh folder, every family,
//     the log and the streams compared);
//   - the bank total is conserved, and streams are dense;
//   - no family whose drop was acknowledged is back; a created family whose drop never
//     started is still there;
//
// and then runs a short workload on the reopened database. The variant (WAL and sync,
// WAL without sync, WAL off) goes round-robin, the validation policy alternates, the
// lane count is random. With the WAL off only the consistency checks apply: a kill may
// lose acknowledged commits, but never makes state and log disagree; the child also
// provokes facebook/rocksdb#11148 (atomicflush_test.go) over and over, and a log entry
// whose data is missing after reopen is reported as that loss, family and positions
// named.
func TestCrash(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child process")
	}
	cycles := envInt(t, "ROCKLINE_CRASH_CYCLES", 10)
	seed := rand.Uint64()
	if s := os.Getenv("ROCKLINE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ROCKLINE_CRASH_SEED=%q: %v", s, err)
		}
	}
	t.Logf("crash: seed=%d cycles=%d (replay with ROCKLINE_CRASH_SEED=%d)", seed, cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	root := t.TempDir()
	var dir string
	var total struct{ kills, checked, lost int }
	start := time.Now()
	for i := 1; i <= cycles; i++ {
		if (i-1)%epochCycles == 0 {
			if dir != "" {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			dir = filepath.Join(root, fmt.Sprintf("epoch-%d", (i-1)/epochCycles))
			initDB(t, dir)
		}
		c := cycle{
			n:       i,
			dir:     dir,
			variant: variants[(i-1)%len(variants)],
			policy:  []string{pipeline.Parallel, pipeline.Serial}[(i-1)%2],
			lanes:   []int{1, 2, 4, 8}[rng.IntN(4)],
			famBase: i * 10000,
			seed:    rng.Uint64(),
		}
		if rng.IntN(2) == 0 {
			c.killAfter = time.Duration(50+rng.IntN(351)) * time.Millisecond
		} else {
			c.killAtAcks = 1 + rng.IntN(600)
		}
		cycleStart := time.Now()
		res := c.run(t)
		total.kills++
		checked, lost := c.verify(t, res, filepath.Join(root, fmt.Sprintf("rebuild-%d", i)))
		total.checked += checked
		total.lost += lost
		t.Logf("cycle %d/%d: %s %s lanes=%d killed %s: %d lines acknowledged (%d commits), %d commits checked, lost %d; checks passed=%v (%v)",
			i, cycles, c.variant.name, c.policy, c.lanes, res.trigger, len(res.acks), res.commits(), checked, lost, !t.Failed(), time.Since(cycleStart).Round(time.Millisecond))
		if t.Failed() {
			break
		}
	}
	t.Logf("crash: cycles=%d kills=%d commits_checked=%d lost=%d (%v)", total.kills, total.kills, total.checked, total.lost, time.Since(start).Round(time.Millisecond))
}

// initDB creates a database with a funded bank.
func initDB(t *testing.T, dir string) {
	t.Helper()
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	if err := initBank(context.Background(), db); err != nil {
		t.Fatalf("init bank: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

type cycle struct {
	n          int
	dir        string
	variant    variant
	policy     string
	lanes      int
	famBase    int
	seed       uint64
	killAfter  time.Duration // kill this long after READY, or
	killAtAcks int           // kill once this many lines are acknowledged
}

type childResult struct {
	acks    []ack
	trigger string
}

func (r childResult) commits() int {
	n := 0
	for _, a := range r.acks {
		if a.Pos != 0 {
			n++
		}
	}
	return n
}

// run starts the child, reads its lines, kills it and returns every acknowledged line.
func (c cycle) run(t *testing.T) childResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(),
		childEnv+"="+c.dir,
		childPolicyEnv+"="+c.policy,
		childLanesEnv+"="+strconv.Itoa(c.lanes),
		childWALEnv+"="+c.variant.name,
		childFamBaseEnv+"="+strconv.Itoa(c.famBase),
		childSeedEnv+"="+strconv.FormatUint(c.seed, 10),
	)
	return runAndKill(t, cmd, killPlan{after: c.killAfter, atAcks: c.killAtAcks})
}

// killPlan says when runAndKill kills the child: after is measured from its READY
// line; atAcks counts ACK lines; onKind kills at the first ACK of that kind.
type killPlan struct {
	after  time.Duration
	atAcks int
	onKind string
}

// runAndKill runs cmd, collects its ACK lines and kills it with SIGKILL as plan says,
// then reads what the pipe still holds: every line written before the kill.
func runAndKill(t *testing.T, cmd *exec.Cmd, plan killPlan) childResult {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	lines := make(chan string, 4096)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var res childResult
	var other []string
	take := func(l string, final bool) {
		js, ok := strings.CutPrefix(l, ackPrefix)
		if !ok {
			if l != readyLine {
				other = append(other, l)
			}
			return
		}
		var a ack
		if err := json.Unmarshal([]byte(js), &a); err != nil {
			if !final { // only the very last line may be cut short by the kill
				t.Errorf("child line %q: %v", l, err)
			}
			return
		}
		res.acks = append(res.acks, a)
	}
	var timer <-chan time.Time
	safety := time.NewTimer(deadline)
	defer safety.Stop()
	kill := func(why string) {
		res.trigger = why
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill child: %v", err)
		}
	}
	for res.trigger == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				t.Fatalf("child exited before it was killed: %v\nstdout:\n%s\nstderr:\n%s", err, tail(strings.Join(other, "\n"), 4000), tail(stderr.String(), 4000))
			}
			if l == readyLine && plan.after > 0 {
				timer = time.After(plan.after)
			}
			n := len(res.acks)
			take(l, false)
			switch {
			case plan.atAcks > 0 && len(res.acks) >= plan.atAcks:
				kill(fmt.Sprintf("on reading ack %d", plan.atAcks))
			case plan.onKind != "" && len(res.acks) > n && res.acks[n].Kind == plan.onKind:
				kill(fmt.Sprintf("on %q", plan.onKind))
			}
		case <-timer:
			kill(fmt.Sprintf("after %v", plan.after))
		case <-safety.C:
			// The plan's kill never came: the child stopped acknowledging, which is a
			// deadlock (or a livelock), not a crash to recover from. SIGQUIT makes the Go
			// runtime print every goroutine's stack before it exits.
			if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
				t.Errorf("SIGQUIT child: %v", err)
			}
			hard := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
			for range lines {
			}
			_ = cmd.Wait()
			hard.Stop()
			t.Fatalf("child made no progress before the safety deadline (%v; %d lines acknowledged, plan %+v): a stuck child fails the run\nstderr:\n%s",
				deadline, len(res.acks), plan, tail(stderr.String(), 16000))
		}
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	for i, l := range rest {
		take(l, i == len(rest)-1)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exit: %v, want killed\nstderr:\n%s", err, tail(stderr.String(), 4000))
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exit: %v, want SIGKILL\nstdout:\n%s\nstderr:\n%s", err, tail(strings.Join(other, "\n"), 4000), tail(stderr.String(), 4000))
	}
	if s := stderr.String(); strings.Contains(s, "DATA RACE") || strings.Contains(s, "panic:") {
		t.Fatalf("child reported a problem before the kill:\n%s", tail(s, 8000))
	}
	return res
}

// logKey names a key of a family in maps.
type logKey struct{ family, key string }

// verify reopens the database after the kill and runs every check, then the short
// workload. It returns how many acknowledged commits it checked and how many were lost.
func (c cycle) verify(t *testing.T, res childResult, rebuildDir string) (checked, lost int) {
	t.Helper()
	ctx := context.Background()
	db, err := pipeline.Open(c.dir, childConfig(c.variant, c.policy, c.lanes))
	if err != nil {
		t.Fatalf("cycle %d: reopen after kill: %v", c.n, err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Errorf("cycle %d: Close: %v", c.n, err)
		}
	}()
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("cycle %d: eventstore.New after reopen: %v", c.n, err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("cycle %d (%s, %s, lanes %d, seed %d): %s", c.n, c.variant.name, c.policy, c.lanes, c.seed, fmt.Sprintf(format, args...))
	}

	log, err := readLog(db)
	if err != nil {
		fail("%v", err)
		return 0, 0
	}
	// The last write of each key, as the log has it.
	lastWrite := make(map[logKey]pipeline.LogWrite)
	lastPos := make(map[logKey]uint64)
	for _, e := range log {
		for _, w := range e.Writes {
			k := logKey{w.Family, string(w.Key)}
			lastWrite[k], lastPos[k] = w, e.Position
		}
	}
	live, err := db.ColumnFamilies()
	if err != nil {
		fail("ColumnFamilies: %v", err)
		return 0, 0
	}

	// Families: an acknowledged drop stays dropped; a create whose drop never started
	// stays created.
	dropping := make(map[string]bool)
	for _, a := range res.acks {
		if a.Kind == "dropping" {
			dropping[a.Family] = true
		}
	}
	for _, a := range res.acks {
		switch a.Kind {
		case "drop":
			if slices.Contains(live, a.Family) {
				fail("family %q is back after its drop was acknowledged", a.Family)
			}
			if _, err := db.ColumnFamily(a.Family); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
				fail("ColumnFamily(%q) after an acknowledged drop: %v, want ErrColumnFamilyNotFound", a.Family, err)
			}
		case "create":
			if !dropping[a.Family] && !slices.Contains(live, a.Family) {
				fail("family %q was created (acknowledged) and never dropped, but is gone", a.Family)
			}
		}
	}

	// Acknowledged commits: in the log at their position, same writes and events, and
	// the state holds the log's last write of each key they wrote. With the WAL off a
	// kill may lose them; how many survived is only reported.
	survived := 0
	for _, a := range res.acks {
		if a.Pos == 0 {
			continue
		}
		problem := c.checkAck(ctx, es, a, log, lastWrite, lastPos, live)
		if problem == "" {
			survived++
		}
		if c.variant.durable() {
			checked++
			if problem != "" {
				lost++
				fail("acknowledged commit lost: %s (ack %+v)", problem, a)
			}
		}
	}
	if !c.variant.durable() {
		t.Logf("cycle %d: WAL off: %d of %d acknowledged commits survived the kill (losing them is allowed)", c.n, survived, res.commits())
		// Losing a commit is allowed; keeping its log entry but not its data is not,
		// and is what facebook/rocksdb#11148 does (the child provokes it).
		acked := make(map[uint64]bool)
		flushes, raced := 0, 0
		for _, a := range res.acks {
			acked[a.Pos] = a.Pos != 0
			if a.Kind == "atomic-flush" {
				flushes++
				if len(a.Positions) > 1 {
					raced++
				}
			}
		}
		losses, err := lostToAtomicFlush(db, log, acked)
		if err != nil {
			fail("%v", err)
		}
		for _, l := range losses {
			fail("%s (the child ran %d CompactRange flushes, %d with cold commits during them)", l, flushes, raced)
		}
		t.Logf("cycle %d: WAL off: %d CompactRange flushes raced by cold commits (of %d); writes lost to #11148: %d families", c.n, raced, flushes, len(losses))
	}

	if err := checkBank(db); err != nil {
		fail("%v", err)
	}
	for _, s := range allStreams() {
		if err := checkStreamDense(ctx, es, s, log); err != nil {
			fail("%v", err)
		}
	}
	if err := checkReplay(ctx, db, rebuildDir, allStreams()); err != nil {
		fail("%v", err)
	}
	if err := os.RemoveAll(rebuildDir); err != nil {
		fail("%v", err)
	}
	if t.Failed() {
		return checked, lost
	}
	if err := shortWorkload(ctx, es, c.n); err != nil {
		fail("short workload after reopen: %v", err)
	}
	return checked, lost
}

// checkAck returns what is wrong with acknowledged commit a after reopen ("" if it is
// all there).
func (c cycle) checkAck(ctx context.Context, es *eventstore.Store, a ack, log []pipeline.LogEntry, lastWrite map[logKey]pipeline.LogWrite, lastPos map[logKey]uint64, live []string) string {
	db := es.DB()
	if a.Pos > uint64(len(log)) {
		return fmt.Sprintf("position %d is past LastPosition %d", a.Pos, len(log))
	}
	e := log[a.Pos-1]
	if e.Filler {
		return fmt.Sprintf("position %d holds a filler", a.Pos)
	}
	switch a.Kind {
	case "transfer", "put":
		var got []write
		for _, w := range e.Writes {
			got = append(got, write{F: w.Family, K: string(w.Key), V: string(w.Value), Del: w.Delete})
		}
		if d := cmp.Diff(a.Writes, got); d != "" {
			return fmt.Sprintf("log entry %d has other writes (-acknowledged +log):\n%s", a.Pos, d)
		}
		for _, w := range a.Writes {
			k := logKey{w.F, w.K}
			if lastPos[k] < a.Pos {
				return fmt.Sprintf("key %s/%s: last written at %d, before the acknowledged %d", w.F, w.K, lastPos[k], a.Pos)
			}
			if !slices.Contains(live, w.F) {
				continue // dropped since: its data is gone with it
			}
			cf, err := db.ColumnFamily(w.F)
			if err != nil {
				return fmt.Sprintf("family %s: %v", w.F, err)
			}
			want := lastWrite[k]
			var got []byte
			var present bool
			err = db.View(func(tx *pipeline.Txn) error {
				v, err := tx.Get(cf, []byte(w.K))
				if errors.Is(err, pipeline.ErrNotFound) {
					return nil
				}
				got, present = v, err == nil
				return err
			})
			if err != nil {
				return fmt.Sprintf("read %s/%s: %v", w.F, w.K, err)
			}
			if present == want.Delete || string(got) != string(want.Value) {
				return fmt.Sprintf("state %s/%s = %q (present %v), but the log's last write (position %d) is %q (delete %v)", w.F, w.K, got, present, lastPos[k], want.Value, want.Delete)
			}
		}
	case "append":
		var ids []string
		for _, ev := range e.Events {
			ids = append(ids, ev.ID)
		}
		if d := cmp.Diff(a.IDs, ids); d != "" {
			return fmt.Sprintf("log entry %d has other events (-acknowledged +log):\n%s", a.Pos, d)
		}
		evs, err := es.ReadStream(ctx, a.Stream, a.Rev, len(a.IDs))
		if err != nil {
			return fmt.Sprintf("ReadStream(%q, %d): %v", a.Stream, a.Rev, err)
		}
		if len(evs) != len(a.IDs) {
			return fmt.Sprintf("stream %q from revision %d: %d events, want %d", a.Stream, a.Rev, len(evs), len(a.IDs))
		}
		for i, ev := range evs {
			if ev.ID != a.IDs[i] || ev.Position != a.Pos || ev.Revision != a.Rev+uint64(i) {
				return fmt.Sprintf("stream %q revision %d: event %q at position %d, want %q at %d", a.Stream, ev.Revision, ev.ID, ev.Position, a.IDs[i], a.Pos)
			}
		}
	default:
		return "unknown kind " + a.Kind
	}
	return ""
}

// shortWorkload runs a little of everything on the reopened database (es's) and checks
// that each step commits at the next position and the log stays dense.
func shortWorkload(ctx context.Context, es *eventstore.Store, n int) error {
	db := es.DB()
	acc, err := db.ColumnFamily(accountsFamily)
	if err != nil {
		return err
	}
	before := db.LastPosition()
	for i := range 5 {
		a, b := accountKey(i), accountKey((i+7)%numAccounts)
		pos, err := db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
			va, err := tx.Get(acc, []byte(a))
			if err != nil {
				return err
			}
			vb, err := tx.Get(acc, []byte(b))
			if err != nil {
				return err
			}
			ba, _ := strconv.Atoi(string(va))
			bb, _ := strconv.Atoi(string(vb))
			move := min(ba, 1)
			if err := tx.Put(acc, []byte(a), []byte(strconv.Itoa(ba-move))); err != nil {
				return err
			}
			return tx.Put(acc, []byte(b), []byte(strconv.Itoa(bb+move)))
		})
		if err != nil {
			return fmt.Errorf("transfer: %w", err)
		}
		if want := before + uint64(i) + 1; pos != want {
			return fmt.Errorf("transfer committed at %d, want %d", pos, want)
		}
	}
	for _, s := range allStreams() {
		expect := eventstore.NoStream
		last, err := es.ReadStreamBackward(ctx, s, math.MaxUint64, 1)
		if err != nil {
			return err
		}
		if len(last) == 1 {
			expect = eventstore.Revision(last[0].Revision)
		}
		if _, err := es.Append(ctx, s, expect, pipeline.Event{ID: fmt.Sprintf("after-%d-%s", n, s), Type: "checked"}); err != nil {
			return fmt.Errorf("append to %q: %w", s, err)
		}
	}
	name := fmt.Sprintf("after-%d", n)
	cf, err := db.CreateColumnFamily(name)
	if err != nil {
		return err
	}
	if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(cf, []byte("k"), []byte("v")) }); err != nil {
		return err
	}
	if err := db.DropColumnFamily(name); err != nil {
		return err
	}
	if err := checkBank(db); err != nil {
		return err
	}
	log, err := readLog(db)
	if err != nil {
		return err
	}
	// 5 transfers, an append per stream, the family's creation, its put and its drop.
	if want := before + 5 + numStreams + 3; uint64(len(log)) != want {
		return fmt.Errorf("LastPosition %d after the short workload, want %d", len(log), want)
	}
	return nil
}
