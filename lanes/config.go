package lanes

import "fmt"

// Bounds accepted by NewBatched.
const (
	// MinLanes and MaxLanes bound the number of lanes.
	MinLanes = 1
	MaxLanes = 64
	// MinDepth and MaxDepth bound the queue depth of each lane.
	MinDepth = 1
	MaxDepth = 1 << 20
)

// validate checks the arguments to NewBatched and returns a *ConfigError for the
// first one that is out of range, or nil.
func validate(lanes, depth int, runNil bool) error {
	if lanes < MinLanes || lanes > MaxLanes {
		return &ConfigError{Field: "Lanes", Value: lanes,
			Expected: fmt.Sprintf("in [%d, %d]", MinLanes, MaxLanes)}
	}
	if depth < MinDepth || depth > MaxDepth {
		return &ConfigError{Field: "Depth", Value: depth,
			Expected: fmt.Sprintf("in [%d, %d]", MinDepth, MaxDepth)}
	}
	if runNil {
		return &ConfigError{Field: "Run", Value: nil, Expected: "a non-nil function"}
	}
	return nil
}
