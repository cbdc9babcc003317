package lanes

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by Submit once Close has begun. A task for which
// Submit returned ErrClosed was not queued and will never be run.
var ErrClosed = errors.New("lanes: closed")

// ErrInvalidConfig is the sentinel matched (via errors.Is) by every
// *ConfigError returned from New.
var ErrInvalidConfig = errors.New("lanes: invalid config")

// ConfigError reports a rejected argument to New. Field names the parameter
// ("Lanes", "Depth" or "Run"), Value is the value that was passed and Reason
// states the valid range. errors.Is(err, ErrInvalidConfig) reports true for
// any *ConfigError.
type ConfigError struct {
	Field  string
	Value  any
	Reason string
}

// Error returns a message naming the field, the rejected value and the valid
// range, e.g. "lanes: invalid config: Lanes = 0: must be in [1, 64]".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s = %v: %s", ErrInvalidConfig, e.Field, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool {
	return target == ErrInvalidConfig
}
