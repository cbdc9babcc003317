package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rockline/rockline/pipeline"
)

// errRefused is what a conditional attempt of conditionRace returns when its
// condition did not hold before it could commit.
var errRefused = errors.New("conformance: condition refused before the commit")

// conditionRace runs the shape the condition races share. Two appenders call
// add(a, i) 15 times each; before each call an appender waits for a conditional
// commit attempt to end, so conditional commits race the appends rather than always
// losing to them. Two conditioners call try(c, i), which returns nil for a commit
// (try records what it needs), errRefused for a condition that failed before the
// commit, or an error matching pipeline.ErrConflict, until an attempt begun after the
// appenders finished (which nothing can disturb) commits. It returns how many
// attempts committed, were refused and conflicted; any other error fails t.
func conditionRace(t *testing.T, ctx context.Context, add func(a, i int) error, try func(c, i int) error) (wins, refused, conflicts int) {
	const appenders, appends, conditioners = 2, 15, 2
	var mu sync.Mutex
	attempted := make(chan struct{}, 1)
	stop := make(chan struct{})
	var cw, aw sync.WaitGroup
	for c := range conditioners {
		cw.Go(func() {
			for i := 0; ; i++ {
				stopped := false
				select {
				case <-stop:
					stopped = true
				default:
				}
				err := try(c, i)
				if err == nil || errors.Is(err, pipeline.ErrConflict) {
					select {
					case attempted <- struct{}{}:
					default:
					}
				}
				mu.Lock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, errRefused):
					refused++
				case errors.Is(err, pipeline.ErrConflict):
					conflicts++
				}
				mu.Unlock()
				switch {
				case err == nil && stopped:
					return
				case err == nil, errors.Is(err, errRefused), errors.Is(err, pipeline.ErrConflict):
				default:
					t.Errorf("conditioner %d: %v", c, err)
					return
				}
			}
		})
	}
	for a := range appenders {
		aw.Go(func() {
			for i := range appends {
				select {
				case <-attempted:
				case <-ctx.Done():
					t.Errorf("appender %d: no conditional commit attempt ended by the deadline", a)
					return
				}
				if err := add(a, i); err != nil {
					t.Errorf("appender %d: %v", a, err)
					return
				}
			}
		})
	}
	aw.Wait()
	close(stop)
	cw.Wait()
	return wins, refused, conflicts
}
