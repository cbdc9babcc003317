package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// etaTracker prints the harness's progress lines with the elapsed time and the
// estimated time remaining. The plan's estimate is a sum of planned costs (a run's
// duration plus its open and close, a load, a seeding); as planned work completes,
// the remaining planned cost is scaled by how long the completed work actually took
// against its plan, so the ETA follows the machine rather than the guess.
type etaTracker struct {
	mu          sync.Mutex
	w           io.Writer
	start       time.Time
	now         func() time.Time
	planned     time.Duration // the whole plan
	plannedDone time.Duration // the planned cost of the work completed so far
}

func newETATracker(w io.Writer, planned time.Duration) *etaTracker {
	return &etaTracker{w: w, start: time.Now(), now: time.Now, planned: planned}
}

// plan sets the plan's estimated cost.
func (t *etaTracker) plan(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.planned = d
}

// advance records that work planned to take d has completed.
func (t *etaTracker) advance(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.plannedDone = min(t.plannedDone+d, t.planned)
}

// remaining estimates the time left after elapsed: the planned cost not yet done,
// scaled by actual over planned time of the work done so far (the plan itself before
// anything has completed); never negative.
func remaining(planned, plannedDone, elapsed time.Duration) time.Duration {
	left := planned - plannedDone
	if left <= 0 {
		return 0
	}
	if plannedDone <= 0 {
		return max(planned-elapsed, 0)
	}
	return time.Duration(float64(left) * float64(elapsed) / float64(plannedDone))
}

// fmtETA formats a duration as 14m02s, or 1h02m03s from an hour up.
func fmtETA(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	h, m, s := int(d/time.Hour), int(d/time.Minute)%60, int(d/time.Second)%60
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	return fmt.Sprintf("%dm%02ds", m, s)
}

// line prints one progress line: "[  123.4s, ETA 14m02s] s".
func (t *etaTracker) line(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	elapsed := t.now().Sub(t.start)
	fmt.Fprintf(t.w, "[%7.1fs, ETA %s] %s\n", elapsed.Seconds(), fmtETA(remaining(t.planned, t.plannedDone, elapsed)), s)
}

// each returns a progress function for a phase whose every line reports one piece of
// work planned to take unit: it advances the plan, then prints the line.
func (t *etaTracker) each(unit time.Duration) func(string) {
	return func(s string) {
		t.advance(unit)
		t.line(s)
	}
}
