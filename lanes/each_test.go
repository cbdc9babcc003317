package lanes

// newEach is NewBatched for tests whose runner takes one task at a time.
func newEach[T any](lanes, depth int, run func(lane int, task T)) (*Lanes[T], error) {
	if run == nil {
		return NewBatched[T](lanes, depth, 1, nil)
	}
	return NewBatched(lanes, depth, 1, func(lane int, tasks []T) {
		for _, t := range tasks {
			run(lane, t)
		}
	})
}
