package pipeline

import (
	"runtime"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/internal/storagefaults"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/lanes"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// Validation policies for Config.Validation.
const (
	Parallel = validators.Parallel
	Serial   = validators.Serial
)

// Config configures Open. Zero values mean the default; DefaultConfig shows them.
type Config struct {
	// Lanes is the number of commit lanes (1..64; default min(4, GOMAXPROCS)).
	Lanes int
	// LaneQueueDepth is each lane's queue bound (1..1<<20; default 1024). A full lane
	// blocks Commit until its context ends.
	LaneQueueDepth int
	// Validation is "parallel" (default) or "serial": the built-in validator.
	Validation string
	// Validator, when set, makes the commit validator in place of a built-in one
	// (Validation must then be empty): a validators.Validator written outside this
	// module, given the local engine's validators.Env and the validators.Options made
	// from Buckets and Checks. It must keep validators.Validator's contract (a commit
	// lands whole or not at all, at the next dense position, and conflicts with every
	// tracked key written after its read position); validators.Writer does the
	// writing part of it. The database's Policy is the validator's.
	Validator validators.Factory
	// Buckets is the parallel validator's lock pool size (16..16,777,216; default
	// 65,536, 512 KiB). Ignored, and not allocated, under "serial".
	Buckets int
	// DisableWAL turns RocksDB's write-ahead log off: a process kill may lose
	// acknowledged commits, but data and log still agree after reopen.
	DisableWAL bool
	// Sync makes every commit wait for its WAL write to reach the device.
	Sync bool
	// Families configures column families by name (write buffer size and count).
	// Families created later with CreateColumnFamily use FamilyDefaults unless named here.
	Families map[string]storage.FamilyOptions
	// FamilyDefaults are the options of families not named in Families.
	FamilyDefaults storage.FamilyOptions
	// BlockCacheSize is the RocksDB block cache size in bytes (0: 8 MiB).
	BlockCacheSize int64
	// BloomBitsPerKey sizes every SST file's bloom filter (0: 10 bits, about 1% false
	// positives; negative: none; see storage.Options). Per family: Compression,
	// BottommostCompression and StaticLevelBytes in Families and FamilyDefaults.
	BloomBitsPerKey float64
	// BackgroundJobs bounds RocksDB's flush and compaction threads (1..64; 0: 2).
	BackgroundJobs int
	// MaxAttempts is how many times Update runs its function on ErrConflict
	// (1..1000; default 10).
	MaxAttempts int
	// RetryBackoff is the base of Update's jittered exponential backoff (default 1ms,
	// at most 1s).
	RetryBackoff time.Duration
	// Checks are application rules run inside the validation step of every commit
	// (see Check), in order; the first error rejects the commit.
	Checks []Check
	// TracerProvider receives rockline's spans; nil means otel's global provider at
	// Open. rockline never sets a global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider receives rockline's metrics (commits, conflicts, per-stage
	// latency, lane depth, pool bytes, pending drops, RocksDB statistics); nil means
	// otel's global provider at Open.
	MeterProvider metric.MeterProvider
	// hooks are the test seams (internal/testhooks); nil outside rockline's tests.
	hooks *testhooks.Hooks
}

func init() {
	testhooks.Register(func(cfg any, h *testhooks.Hooks) any {
		c := cfg.(Config)
		c.hooks = h
		return c
	})
}

// Defaults, in one place.
const (
	DefaultLaneQueueDepth = 1024
	DefaultMaxAttempts    = 10
	DefaultRetryBackoff   = time.Millisecond
	maxLanes              = lanes.MaxLanes
	maxQueueDepth         = lanes.MaxDepth
)

// DefaultConfig returns the configuration Open uses for zero fields.
func DefaultConfig() Config {
	return Config{
		Lanes:          min(4, runtime.GOMAXPROCS(0)),
		LaneQueueDepth: DefaultLaneQueueDepth,
		Validation:     Parallel,
		Buckets:        validators.DefaultBuckets,
		MaxAttempts:    DefaultMaxAttempts,
		RetryBackoff:   DefaultRetryBackoff,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Lanes == 0 {
		c.Lanes = d.Lanes
	}
	if c.LaneQueueDepth == 0 {
		c.LaneQueueDepth = d.LaneQueueDepth
	}
	if c.Validation == "" && c.Validator == nil {
		c.Validation = d.Validation
	}
	if c.Buckets == 0 {
		c.Buckets = d.Buckets
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = d.RetryBackoff
	}
	return c
}

// Validate checks every field, in declaration order, and returns the first problem as
// a *ConfigError naming the field, the value and the valid range. It applies nothing.
func (c Config) Validate() error {
	if c.Validator != nil && c.Validation != "" {
		return &ConfigError{Field: "Validation", Value: c.Validation, Expected: `empty when Validator is set`}
	}
	c = c.withDefaults()
	switch {
	case c.Lanes < 1 || c.Lanes > maxLanes:
		return &ConfigError{Field: "Lanes", Value: c.Lanes, Expected: "between 1 and 64"}
	case c.LaneQueueDepth < 1 || c.LaneQueueDepth > maxQueueDepth:
		return &ConfigError{Field: "LaneQueueDepth", Value: c.LaneQueueDepth, Expected: "between 1 and 1048576"}
	case c.Validator == nil && c.Validation != Parallel && c.Validation != Serial:
		return &ConfigError{Field: "Validation", Value: c.Validation, Expected: `"parallel" or "serial"`}
	case c.Buckets < validators.MinBuckets || c.Buckets > validators.MaxBuckets:
		return &ConfigError{Field: "Buckets", Value: c.Buckets, Expected: "between 16 and 16777216"}
	case c.MaxAttempts < 1 || c.MaxAttempts > 1000:
		return &ConfigError{Field: "MaxAttempts", Value: c.MaxAttempts, Expected: "between 1 and 1000"}
	case c.RetryBackoff < 0 || c.RetryBackoff > time.Second:
		return &ConfigError{Field: "RetryBackoff", Value: c.RetryBackoff, Expected: "between 0 and 1s"}
	}
	if err := c.FamilyDefaults.Validate(); err != nil {
		return prefixField("FamilyDefaults.", err)
	}
	if err := c.storageOptions().Validate(); err != nil {
		return err
	}
	for name := range c.Families {
		if isReserved(name) {
			return &ConfigError{Field: "Families[" + name + "]", Value: name, Expected: "a name not starting with \"rockline.\", which is reserved"}
		}
	}
	return nil
}

// prefixField returns err with prefix before the field it names, when err is a
// *ConfigError: FamilyOptions.Validate names "WriteBufferSize", the Config field is
// "FamilyDefaults.WriteBufferSize".
func prefixField(prefix string, err error) error {
	if ce, ok := err.(*ConfigError); ok {
		named := *ce
		named.Field = prefix + ce.Field
		return &named
	}
	return err
}

// storageOptions maps the config onto the storage layer's options.
func (c Config) storageOptions() storage.Options {
	fams := make(map[string]storage.FamilyOptions, len(c.Families)+1)
	for n, f := range c.Families {
		fams[n] = f
	}
	fams[logFamily] = storage.FamilyOptions{}
	fams[systemFamily] = storage.FamilyOptions{}
	o := storage.Options{
		Families:        fams,
		FamilyDefaults:  c.FamilyDefaults,
		DisableWAL:      c.DisableWAL,
		Sync:            c.Sync,
		BlockCacheSize:  c.BlockCacheSize,
		BloomBitsPerKey: c.BloomBitsPerKey,
		BackgroundJobs:  c.BackgroundJobs,
	}
	if c.hooks != nil && c.hooks.StorageFaults != nil {
		o = storagefaults.With(o, c.hooks.StorageFaults)
	}
	return o
}
