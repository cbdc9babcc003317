package storage

import (
	"sort"
	"strings"

	"github.com/linxGnu/grocksdb"

	"github.com/rockline/rockline/internal/storagefaults"
)

func init() {
	storagefaults.Register(func(opts any, f *storagefaults.Faults) any {
		o := opts.(Options)
		o.faults = f
		return o
	})
}

// Limits and defaults, in one place.
const (
	// DefaultWriteBufferSize is RocksDB's own memtable size, used when a family sets none.
	DefaultWriteBufferSize = 64 << 20
	// DefaultMaxWriteBufferNumber is RocksDB's own memtable count, used when a family sets none.
	DefaultMaxWriteBufferNumber = 2
	// MinWriteBufferSize and MaxWriteBufferSize bound FamilyOptions.WriteBufferSize.
	MinWriteBufferSize = 1 << 20
	MaxWriteBufferSize = 4 << 30
	// MinMaxWriteBufferNumber and MaxMaxWriteBufferNumber bound FamilyOptions.MaxWriteBufferNumber.
	MinMaxWriteBufferNumber = 2
	MaxMaxWriteBufferNumber = 64
	// MaxBlockCacheSize bounds Options.BlockCacheSize (64 GiB).
	MaxBlockCacheSize = 64 << 30
	// MaxKeySize is the largest key a Batch or a read accepts (64 KiB).
	MaxKeySize = 64 << 10
	// MaxValueSize is the largest value a Batch accepts (1 GiB). RocksDB itself takes
	// up to 4 GiB - 1, but a value that size cannot be written with its log entry in
	// one batch, so the limit is lower and documented.
	MaxValueSize = 1 << 30
	// MaxFamilyNameLen bounds family names.
	MaxFamilyNameLen = 255
	// DefaultFamily is RocksDB's default column family, which always exists.
	DefaultFamily = "default"
)

// FamilyOptions are the per-column-family settings. Zero values mean RocksDB's defaults.
type FamilyOptions struct {
	// WriteBufferSize is the memtable size in bytes (1 MiB..4 GiB; 0 means 64 MiB).
	// Larger memtables flush bigger L0 files and write fewer bytes to the device.
	WriteBufferSize int64
	// MaxWriteBufferNumber is how many memtables (active plus immutable) the family may
	// hold before writes stop (2..64; 0 means 2). Raising it removes memtable stalls.
	MaxWriteBufferNumber int
	// Compression compresses the family's SST files above the bottommost level: "none",
	// "snappy", "lz4" or "zstd" ("" means DefaultCompression, lz4: cheap enough for the
	// levels that are rewritten often).
	Compression string
	// BottommostCompression compresses the bottommost level, which holds most of the
	// data and is rewritten least: the same names ("" means DefaultBottommostCompression,
	// zstd: the smallest files for the CPU spent once).
	BottommostCompression string
	// StaticLevelBytes turns off level_compaction_dynamic_level_bytes, which rockline
	// turns on (RocksDB's recommendation: level sizes follow the data, which bounds
	// space amplification near 1.1).
	StaticLevelBytes bool
}

// Compression names accepted by FamilyOptions and their defaults.
const (
	DefaultCompression           = "lz4"
	DefaultBottommostCompression = "zstd"
)

// compressions maps the accepted names to RocksDB's types.
var compressions = map[string]grocksdb.CompressionType{
	"none":   grocksdb.NoCompression,
	"snappy": grocksdb.SnappyCompression,
	"lz4":    grocksdb.LZ4Compression,
	"zstd":   grocksdb.ZSTDCompression,
}

// Options configure Open. The zero value is valid: WAL on, no sync, RocksDB defaults.
type Options struct {
	// Families names the column families to create or open, with their options. The
	// default family is always opened; name it here to give it options. Families that
	// exist on disk but are not named are opened with FamilyDefaults.
	Families map[string]FamilyOptions
	// FamilyDefaults are the options of families found on disk but not named in
	// Families (other than the default family and MetaFamily, which get RocksDB's
	// defaults unless named), so a family created with some options keeps them when
	// the database is reopened with the same defaults.
	FamilyDefaults FamilyOptions
	// DisableWAL turns the write-ahead log off: faster, but writes not yet flushed are
	// lost by a process kill (batches stay atomic).
	DisableWAL bool
	// Sync makes every write wait for the WAL to reach the device (survives power loss).
	Sync bool
	// BlockCacheSize is the size of the database's block cache in bytes (0 means
	// RocksDB's default of 8 MiB per table factory; max 64 GiB).
	BlockCacheSize int64
	// ErrorIfExists fails Open when the database already exists.
	ErrorIfExists bool
	// ReadOnly opens an existing database for reading, without its write lock (another
	// process may hold it and keep writing): reads see the state at Open, or at the
	// last CatchUp of a secondary, and every write fails with ErrReadOnly. Nothing in
	// the folder is changed, pending drops included.
	ReadOnly bool
	// Secondary, with ReadOnly, opens the database as a RocksDB secondary whose own
	// files (its info log) go in this folder: CatchUp brings it up to the writes the
	// primary has made since. Families the primary creates later are seen after a
	// reopen only.
	Secondary string
	// BloomBitsPerKey sizes the bloom filter of every SST file (1..64 bits per key; 0
	// means DefaultBloomBitsPerKey, about a 1% false-positive rate; negative: no filter).
	// rockline reads every key a transaction tracks, most of them absent or recent, so
	// a filter saves a disk read per absent key.
	BloomBitsPerKey float64
	// BackgroundJobs bounds RocksDB's flush and compaction threads (1..64; 0 means
	// DefaultBackgroundJobs, RocksDB's 2).
	BackgroundJobs int
	// MaxLogFileSize and KeepLogFiles cap RocksDB's own LOG files (its diagnostics, not
	// the WAL): 0 means DefaultMaxLogFileSize (16 MiB) and DefaultKeepLogFiles (4).
	MaxLogFileSize int64
	KeepLogFiles   int
	// faults injects failures in rockline's own tests (internal/storagefaults); nil
	// otherwise.
	faults *storagefaults.Faults
}

// Database-wide defaults.
const (
	DefaultBloomBitsPerKey = 10
	DefaultBackgroundJobs  = 2
	DefaultMaxLogFileSize  = 16 << 20
	DefaultKeepLogFiles    = 4
)

// Validate checks every option and returns the first problem as a *ConfigError,
// checking fields in a fixed order (block cache, the database-wide settings, then
// families by name). It changes nothing.
func (o Options) Validate() error {
	if o.BlockCacheSize < 0 || o.BlockCacheSize > MaxBlockCacheSize {
		return &ConfigError{Field: "BlockCacheSize", Value: o.BlockCacheSize, Expected: "between 0 and 64 GiB (68719476736)"}
	}
	if o.BloomBitsPerKey > 64 {
		return &ConfigError{Field: "BloomBitsPerKey", Value: o.BloomBitsPerKey, Expected: "at most 64 bits per key, 0 for the default, or negative for no filter"}
	}
	if o.BackgroundJobs < 0 || o.BackgroundJobs > 64 {
		return &ConfigError{Field: "BackgroundJobs", Value: o.BackgroundJobs, Expected: "between 1 and 64, or 0 for the default"}
	}
	if o.MaxLogFileSize < 0 || (o.MaxLogFileSize > 0 && o.MaxLogFileSize < 1<<20) {
		return &ConfigError{Field: "MaxLogFileSize", Value: o.MaxLogFileSize, Expected: "at least 1 MiB (1048576), or 0 for the default"}
	}
	if o.Secondary != "" && !o.ReadOnly {
		return &ConfigError{Field: "Secondary", Value: o.Secondary, Expected: "empty unless ReadOnly is set"}
	}
	if o.KeepLogFiles < 0 || o.KeepLogFiles > 1000 {
		return &ConfigError{Field: "KeepLogFiles", Value: o.KeepLogFiles, Expected: "between 1 and 1000, or 0 for the default"}
	}
	if err := o.FamilyDefaults.validate("FamilyDefaults."); err != nil {
		return err
	}
	names := make([]string, 0, len(o.Families))
	for name := range o.Families {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := ValidateFamilyName(name); err != nil {
			return err
		}
		if err := o.Families[name].validate("Families[" + name + "]."); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the family options, naming the field in any *ConfigError.
func (f FamilyOptions) Validate() error { return f.validate("") }

func (f FamilyOptions) validate(prefix string) error {
	if f.WriteBufferSize != 0 && (f.WriteBufferSize < MinWriteBufferSize || f.WriteBufferSize > MaxWriteBufferSize) {
		return &ConfigError{Field: prefix + "WriteBufferSize", Value: f.WriteBufferSize, Expected: "between 1 MiB (1048576) and 4 GiB (4294967296), or 0 for the default"}
	}
	if f.MaxWriteBufferNumber != 0 && (f.MaxWriteBufferNumber < MinMaxWriteBufferNumber || f.MaxWriteBufferNumber > MaxMaxWriteBufferNumber) {
		return &ConfigError{Field: prefix + "MaxWriteBufferNumber", Value: f.MaxWriteBufferNumber, Expected: "between 2 and 64, or 0 for the default"}
	}
	for field, c := range map[string]string{"Compression": f.Compression, "BottommostCompression": f.BottommostCompression} {
		if _, ok := compressions[c]; c != "" && !ok {
			return &ConfigError{Field: prefix + field, Value: c, Expected: `"none", "snappy", "lz4", "zstd", or "" for the default`}
		}
	}
	return nil
}

// familyOptions returns the options of the family with that (logical) name.
func (o Options) familyOptions(name string) FamilyOptions {
	if f, ok := o.Families[name]; ok || name == DefaultFamily || name == MetaFamily {
		return f
	}
	return o.FamilyDefaults
}

// withDefaults returns f with zero fields replaced by the defaults.
func (f FamilyOptions) withDefaults() FamilyOptions {
	if f.WriteBufferSize == 0 {
		f.WriteBufferSize = DefaultWriteBufferSize
	}
	if f.MaxWriteBufferNumber == 0 {
		f.MaxWriteBufferNumber = DefaultMaxWriteBufferNumber
	}
	if f.Compression == "" {
		f.Compression = DefaultCompression
	}
	if f.BottommostCompression == "" {
		f.BottommostCompression = DefaultBottommostCompression
	}
	return f
}

// withDefaults returns o with zero database-wide settings replaced by the defaults.
func (o Options) withDefaults() Options {
	if o.BloomBitsPerKey == 0 {
		o.BloomBitsPerKey = DefaultBloomBitsPerKey
	}
	if o.BackgroundJobs == 0 {
		o.BackgroundJobs = DefaultBackgroundJobs
	}
	if o.MaxLogFileSize == 0 {
		o.MaxLogFileSize = DefaultMaxLogFileSize
	}
	if o.KeepLogFiles == 0 {
		o.KeepLogFiles = DefaultKeepLogFiles
	}
	return o
}

// ValidateFamilyName checks that name can name a column family: 1..255 bytes, without
// "#" (which separates a name from its generation in RocksDB's name for the family).
func ValidateFamilyName(name string) error {
	if name == "" || len(name) > MaxFamilyNameLen {
		return &ConfigError{Field: "family name", Value: name, Expected: "1 to 255 bytes"}
	}
	if strings.Contains(name, generationSep) {
		return &ConfigError{Field: "family name", Value: name, Expected: "a name without \"#\""}
	}
	return nil
}
