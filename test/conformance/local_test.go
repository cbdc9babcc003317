package conformance_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/test/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLocalEngine runs the suite against the local engine: a pipeline.DB on RocksDB
// with its event store, under both validation policies.
func TestLocalEngine(t *testing.T) {
	for _, policy := range []string{pipeline.Parallel, pipeline.Serial} {
		t.Run(policy, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Engine {
				db, err := pipeline.Open(filepath.Join(t.TempDir(), "db"), pipeline.Config{Validation: policy})
				if err != nil {
					t.Fatal(err)
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
