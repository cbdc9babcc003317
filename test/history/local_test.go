package history

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// The local engine's history test: list-append clients on a real RocksDB folder
// (pipeline.Open), with no fault ("none") and with SIGKILLs of the process that has
// the database open ("kill": each child runs the workload until it is killed after a
// drawn number of transactions, the next one reopens the folder and continues the
// history). Every run ends with an in-process reopen, a final read of every key, the
// log read back and a subscriber from 0, and is judged by Judge with real-time edges
// (commits are published before Commit returns, and Begin reads the latest published
// position, so the engine claims strict serializability).

const localClients = 4

func TestLocalHistory(t *testing.T) {
	runs := Runs(t, 1)
	for _, sched := range []struct {
		name string
		run  func(t *testing.T, seed uint64) (History, Result)
	}{
		{"none", localNone},
		{"kill", localKill},
	} {
		t.Run(sched.name, func(t *testing.T) {
			for run := range runs {
				seed := Seed(t) + uint64(run)
				h, res := sched.run(t, seed)
				t.Logf("run %d, seed %d: %s", run+1, seed, res.Summary())
				Report(t, "local-"+sched.name, seed, h, res)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// localNone runs the workload in process for a second and a half.
func localNone(t *testing.T, seed uint64) (History, Result) {
	dir := t.TempDir()
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := NewRecorder(nil)
	defer DumpIfFailed(t, "local-none", seed, rec)
	f := Follow(db, 0, nil)
	defer f.Close()
	stop := make(chan struct{})
	time.AfterFunc(1500*time.Millisecond, func() { close(stop) })
	Run(stop, Workload{Clients: localClients, Seed: seed, Classify: ClassifyLocal}, rec, func(int) *pipeline.DB { return db })
	return finish(t, db, rec, f)
}

// localKill runs killCycles children on one folder, each SIGKILLed after 20..200
// completed transactions, then reopens the folder in process.
func localKill(t *testing.T, seed uint64) (History, Result) {
	const killCycles = 4
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 1))
	rec := NewRecorder(nil)
	defer DumpIfFailed(t, "local-kill", seed, rec)
	var subs []Delivered
	for cycle := range killCycles {
		id, value, key := rec.History().Next()
		c := childConfig{Dir: dir, Sub: cycle + 1, Seed: seed + uint64(cycle), Clients: localClients, FirstID: id, FirstValue: value, FirstKey: max(0, key-4), ActiveKeys: 4}
		ch := startChild(t, c, rec)
		ch.killAfter(t, int64(20+rng.IntN(181)), time.Minute)
		subs = append(subs, Delivered{Name: fmt.Sprintf("child %d's subscriber", cycle+1), Seen: ch.seen})
	}
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := Follow(db, 0, nil)
	defer f.Close()
	return finish(t, db, rec, f, subs...)
}

// finish ends a history on db: the final read, the log read back, the subscriber f
// brought up to the last position, and every check.
func finish(t *testing.T, db *pipeline.DB, rec *Recorder, f *Follower, subs ...Delivered) (History, Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _, _ := rec.History().Next()
	if err := FinalRead(ctx, db, rec, rec.History().Keys(), id); err != nil {
		t.Fatal(err)
	}
	last := db.LastPosition()
	log, err := ReadAll(ctx, db, last)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	subs = append(subs, Delivered{Name: "the subscriber of the final open", Seen: f.Seen(), Complete: true})
	res, err := Judge(h, Options{Realtime: true}, log, db.Entry, subs...)
	if err != nil {
		t.Fatal(err)
	}
	return h, res
}
