package eventstore_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// childDirEnv tells the test binary, re-executed by TestProjectionSurvivesKill, to run
// TestProjectionKillChild against that folder.
const childDirEnv = "ROCKLINE_PROJECTION_CHILD_DIR"

// TestProjectionKillChild is the child of TestProjectionSurvivesKill: it runs the
// counting projection while appending to the order streams, printing "ack N" after
// each append, until it is killed. Run on its own it does nothing.
func TestProjectionKillChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestProjectionSurvivesKill")
	}
	db, err := pipeline.Open(dir, pipeline.Config{Validation: os.Getenv("ROCKLINE_PROJECTION_CHILD_POLICY")})
	if err != nil {
		t.Fatal(err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.EnsureColumnFamily("counts"); err != nil {
		t.Fatal(err)
	}
	c := &counter{db: db}
	if _, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: c.handle, MaxBatchEvents: 8, Owns: []string{"counts"}}); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		appendLoad(t, es, fmt.Sprint(i), 1+i%3)
		fmt.Fprintf(out, "ack %d\n", i)
		out.Flush()
	}
}

// TestProjectionSurvivesKill kills (SIGKILL) a child process that runs a projection
// under an append load at a random point, several times over the same folder. After
// every kill the read model must equal a recount of exactly the events at or below
// the projection's stored position, and once the projection runs again it must catch
// up to a recount of the whole log: no event applied twice or skipped, whatever the
// point of the kill. ROCKLINE_PROJECTION_KILLS sets the number of kills per policy
// (default 4).
func TestProjectionSurvivesKill(t *testing.T) {
	kills := 4
	if v := os.Getenv("ROCKLINE_PROJECTION_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ROCKLINE_PROJECTION_KILLS=%q: want a positive count", v)
		}
		kills = n
	}
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			for k := range kills {
				acks := 20 + rng.IntN(200)
				runChildUntil(t, dir, pol, acks)
				checkAfterKill(t, dir, fmt.Sprintf("kill %d after %d acks", k+1, acks))
			}
		})
	}
}

// runChildUntil starts the child on dir and SIGKILLs it once it has acknowledged acks
// appends.
func runChildUntil(t *testing.T, dir, policy string, acks int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProjectionKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, "ROCKLINE_PROJECTION_CHILD_POLICY="+policy)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		sc, n := bufio.NewScanner(stdout), 0
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ack ") {
				if n++; n == acks {
					got <- n
				}
			}
		}
		close(got)
	}()
	select {
	case n, ok := <-got:
		if !ok || n != acks {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child ended before %d acks:\n%s", acks, stderr.String())
		}
	case <-time.After(deadline):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not acknowledge %d appends within %v:\n%s", acks, deadline, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // killed: the error says so
}

// checkAfterKill opens the folder the child was killed on and checks the read model
// against the log, before and after the projection runs again.
func checkAfterKill(t *testing.T, dir, what string) {
	t.Helper()
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer db.Close()
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	list, err := es.Projections()
	if err != nil {
		t.Fatal(err)
	}
	stored, last := uint64(0), db.LastPosition()
	if len(list) == 1 {
		stored = list[0].Position
	}
	all, err := es.ReadAll(ctx, eventstore.Start, eventstore.ToEnd, ordersOnly)
	if err != nil {
		t.Fatal(err)
	}
	upTo := map[string]uint64{}
	for _, e := range all {
		if e.Position <= stored {
			upTo[e.Stream]++
		}
	}
	if diff := cmp.Diff(upTo, counts(t, db)); diff != "" {
		t.Fatalf("%s: read model against the events up to its position %d (-log +model):\n%s", what, stored, diff)
	}
	c := &counter{db: db}
	p, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: c.handle, MaxBatchEvents: 8, Owns: []string{"counts"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	caughtUp(t, db, p)
	if diff := cmp.Diff(recount(t, es, ordersOnly), counts(t, db)); diff != "" {
		t.Fatalf("%s: read model after catching up (-recount +model):\n%s", what, diff)
	}
	t.Logf("%s: projection at %d of %d at the kill, %d order events", what, stored, last, len(all))
}
