package conformance_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/test/conformance"
	"github.com/rockline/rockline/test/lockvalidator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLocalEngine runs the suite against the local engine: a pipeline.DB on RocksDB
// with its event store, under both built-in validation policies and under a
// validator written outside the validators package (test/lockvalidator), plugged in
// through Config.Validator.
func TestLocalEngine(t *testing.T) {
	configs := map[string]pipeline.Config{
		pipeline.Parallel:    {Validation: pipeline.Parallel},
		pipeline.Serial:      {Validation: pipeline.Serial},
		lockvalidator.Policy: {Validator: lockvalidator.New},
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Engine {
				db, err := pipeline.Open(filepath.Join(t.TempDir(), "db"), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if got := db.Policy(); got != name {
					t.Fatalf("Policy() = %q, want %q", got, name)
				}
				t.Cleanup(func() {
					if err := db.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				e, err := conformance.DB(db)
				if err != nil {
					t.Fatal(err)
				}
				return e
			})
		})
	}
}
