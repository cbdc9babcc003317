package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRemaining(t *testing.T) {
	for _, c := range []struct {
		planned, done, elapsed, want time.Duration
	}{
		{planned: 100 * time.Second, done: 0, elapsed: 0, want: 100 * time.Second},               // nothing done: the plan
		{planned: 100 * time.Second, done: 0, elapsed: 30 * time.Second, want: 70 * time.Second}, // the plan less the time gone
		{planned: 100 * time.Second, done: 0, elapsed: 150 * time.Second, want: 0},               // overdue: never negative
		{planned: 100 * time.Second, done: 50 * time.Second, elapsed: 50 * time.Second, want: 50 * time.Second},
		{planned: 100 * time.Second, done: 50 * time.Second, elapsed: 100 * time.Second, want: 100 * time.Second}, // twice as slow as planned
		{planned: 100 * time.Second, done: 25 * time.Second, elapsed: 10 * time.Second, want: 30 * time.Second},   // faster than planned
		{planned: 100 * time.Second, done: 100 * time.Second, elapsed: 90 * time.Second, want: 0},
	} {
		if got := remaining(c.planned, c.done, c.elapsed); got != c.want {
			t.Errorf("remaining(%s, %s, %s) = %s, want %s", c.planned, c.done, c.elapsed, got, c.want)
		}
	}
}

func TestFmtETA(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                       "0m00s",
		-time.Second:                            "0m00s",
		842 * time.Second:                       "14m02s",
		59*time.Minute + 59500*time.Millisecond: "1h00m00s",
		3723 * time.Second:                      "1h02m03s",
	} {
		if got := fmtETA(d); got != want {
			t.Errorf("fmtETA(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestETATrackerLines runs a tracker on a fake clock: a plan of four 10 s runs that
// actually take 20 s each.
func TestETATrackerLines(t *testing.T) {
	var buf bytes.Buffer
	tr := newETATracker(&buf, 0)
	now := tr.start
	tr.now = func() time.Time { return now }
	tr.plan(40 * time.Second)
	step := tr.each(10 * time.Second)
	tr.line("plan")
	now = now.Add(20 * time.Second)
	step("run 1")
	now = now.Add(20 * time.Second)
	step("run 2")
	tr.advance(time.Hour) // capped at the plan
	tr.line("done")
	want := []string{
		"[    0.0s, ETA 0m40s] plan",
		"[   20.0s, ETA 1m00s] run 1",
		"[   40.0s, ETA 0m40s] run 2",
		"[   40.0s, ETA 0m00s] done",
	}
	if got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
