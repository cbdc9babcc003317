package main

import (
	"os"
	"testing"
)

// TestClusterEngines runs the cluster scenario's transaction on each engine for a
// moment, on an embedded 3-node cluster: commits are made and none conflicts (every
// worker has its own key and stream).
func TestClusterEngines(t *testing.T) {
	cfg := smokeConfig(t)
	dir, err := os.MkdirTemp(cfg.dir, "cluster-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := startClusters(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.shutdown(); err != nil {
			t.Error(err)
		}
	}()
	for i, name := range clusterEngines {
		t.Run(name, func(t *testing.T) {
			res := runClusterOnce(cfg, c, name, i+1, clusterCell{workers: 2}, 1)
			if res.Error != "" {
				t.Fatalf("run failed: %s", res.Error)
			}
			if res.Commits == 0 || res.Latency.P50 <= 0 {
				t.Errorf("no commits measured: %+v", res)
			}
			if res.Conflicts != 0 {
				t.Errorf("%d conflicts between workers with keys and streams of their own", res.Conflicts)
			}
		})
	}
}
