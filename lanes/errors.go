package lanes

import (
	"errors"

	"github.com/rockline/rockline/internal/settings"
)

// ErrClosed is returned by Submit once Close has begun. A task for which
// Submit returned ErrClosed was not queued and will never be run.
var ErrClosed = errors.New("lanes: closed")

// ErrInvalidConfig is the sentinel matched (via errors.Is) by every
// *ConfigError returned from NewBatched. It is the sentinel of every rockline package
// (pipeline.ErrInvalidConfig, storage.ErrInvalidConfig) too.
var ErrInvalidConfig = settings.ErrInvalid

// ConfigError reports a rejected argument to NewBatched. Field names the parameter
// ("Lanes", "Depth" or "Run"), Value is the value that was passed and Expected
// states the valid range; Err is nil. Its message reads, for example,
// "rockline: Lanes = 0: expected in [1, 64]". errors.Is(err, ErrInvalidConfig)
// reports true for any *ConfigError.
//
// It is one type shared by every rockline package: pipeline.ConfigError,
// storage.ConfigError and otelsetup.ConfigError are the same type.
type ConfigError = settings.Error
