package partitioned

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/rockline/rockline/pipeline"
)

// MaxPartitions bounds Config.Partitions.
const MaxPartitions = 1024

// Config configures a partitioned store.
type Config struct {
	// Partitions is the number of partitions, fixed when the store is created
	// (1..MaxPartitions). Required.
	Partitions int
	// Partition maps a stream name to its partition, in [0, Partitions). It must be a
	// pure function of the name, the same in every process and across restarts.
	// Default: ByCategory.
	Partition func(stream string, partitions int) int
	// DB configures each partition's database (Open only).
	DB pipeline.Config
}

// ByCategory is the default partition function: a hash of the stream's category, the
// part of its name before the first '-' (Message DB's convention: "order-42" and
// "order-43" are both of category "order"), so a category's streams share a
// partition. A name without '-' is its own category.
func ByCategory(stream string, partitions int) int {
	cat, _, _ := strings.Cut(stream, "-")
	return ByName(cat, partitions)
}

// ByName hashes the whole stream name (FNV-1a), spreading streams evenly, for
// applications whose transactions never span streams.
func ByName(stream string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(stream))
	return int(h.Sum32() % uint32(partitions))
}

// Validate checks the configuration whole; it returns a *pipeline.ConfigError naming
// the first field that is wrong.
func (c *Config) Validate() error {
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return &pipeline.ConfigError{Field: "Partitions", Value: c.Partitions, Expected: fmt.Sprintf("1..%d", MaxPartitions)}
	}
	return c.DB.Validate()
}

func (c *Config) partition() func(string, int) int {
	if c.Partition == nil {
		return ByCategory
	}
	return c.Partition
}
