package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// TestConfigInvalid: every out-of-range field makes Open return a *ConfigError that
// names the field and the value and matches ErrInvalidConfig, before anything is
// created on disk.
func TestConfigInvalid(t *testing.T) {
	cases := []struct {
		name  string
		cfg   pipeline.Config
		field string
		value any
	}{
		{"lanes negative", pipeline.Config{Lanes: -1}, "Lanes", -1},
		{"lanes too many", pipeline.Config{Lanes: 65}, "Lanes", 65},
		{"queue depth negative", pipeline.Config{LaneQueueDepth: -1}, "LaneQueueDepth", -1},
		{"queue depth too deep", pipeline.Config{LaneQueueDepth: 1<<20 + 1}, "LaneQueueDepth", 1<<20 + 1},
		{"unknown policy", pipeline.Config{Validation: "fast"}, "Validation", "fast"},
		{"buckets too few", pipeline.Config{Buckets: 15}, "Buckets", 15},
		{"buckets too many", pipeline.Config{Buckets: 16777217}, "Buckets", 16777217},
		{"buckets too few under serial", pipeline.Config{Validation: pipeline.Serial, Buckets: 15}, "Buckets", 15},
		{"max attempts negative", pipeline.Config{MaxAttempts: -1}, "MaxAttempts", -1},
		{"max attempts too many", pipeline.Config{MaxAttempts: 1001}, "MaxAttempts", 1001},
		{"backoff negative", pipeline.Config{RetryBackoff: -1}, "RetryBackoff", time.Duration(-1)},
		{"backoff too long", pipeline.Config{RetryBackoff: 2 * time.Second}, "RetryBackoff", 2 * time.Second},
		{"family write buffer", pipeline.Config{Families: map[string]storage.FamilyOptions{"x": {WriteBufferSize: 5}}}, "Families[x].WriteBufferSize", int64(5)},
		{"family write buffer count", pipeline.Config{Families: map[string]storage.FamilyOptions{"x": {MaxWriteBufferNumber: 65}}}, "Families[x].MaxWriteBufferNumber", 65},
		{"reserved family", pipeline.Config{Families: map[string]storage.FamilyOptions{"rockline.log": {}}}, "Families[rockline.log]", "rockline.log"},
		{"family defaults", pipeline.Config{FamilyDefaults: storage.FamilyOptions{WriteBufferSize: 5}}, "FamilyDefaults.WriteBufferSize", int64(5)},
		{"block cache", pipeline.Config{BlockCacheSize: -1}, "BlockCacheSize", int64(-1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			db, err := pipeline.Open(dir, tc.cfg)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			var ce *pipeline.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Open: %v (%T), want a *ConfigError", err, err)
			}
			if !errors.Is(err, pipeline.ErrInvalidConfig) {
				t.Errorf("Open: %v does not match ErrInvalidConfig", err)
			}
			if diff := cmp.Diff(struct {
				Field string
				Value any
			}{tc.field, tc.value}, struct {
				Field string
				Value any
			}{ce.Field, ce.Value}); diff != "" {
				t.Errorf("ConfigError (-want +got):\n%s", diff)
			}
			if ce.Expected == "" || !strings.HasPrefix(err.Error(), "rockline: "+tc.field+" = ") || !strings.Contains(err.Error(), "expected "+ce.Expected) {
				t.Errorf("message %q does not read \"rockline: %s = <value>: expected <what>\"", err, tc.field)
			}
			if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v, want the error Open returned (%v)", verr, err)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("Open left %s behind (stat: %v)", dir, serr)
			}
		})
	}
}

// TestConfigValid: zero values mean defaults, and the range bounds are accepted.
func TestConfigValid(t *testing.T) {
	cases := []pipeline.Config{
		{},
		pipeline.DefaultConfig(),
		{Lanes: 1, LaneQueueDepth: 1, Buckets: 16, MaxAttempts: 1},
		{Lanes: 64, LaneQueueDepth: 1 << 20, Buckets: 16 << 20, MaxAttempts: 1000, RetryBackoff: time.Second},
		{Validation: pipeline.Serial, Families: map[string]storage.FamilyOptions{"x": {WriteBufferSize: 1 << 20, MaxWriteBufferNumber: 2}}},
	}
	for i, cfg := range cases {
		if err := cfg.Validate(); err != nil {
			t.Errorf("case %d: Validate: %v", i, err)
		}
	}
	d := pipeline.DefaultConfig()
	if d.Validation != pipeline.Parallel || d.Buckets != 65536 || d.LaneQueueDepth != 1024 || d.MaxAttempts != 10 || d.RetryBackoff != time.Millisecond || d.Lanes < 1 || d.Lanes > 4 {
		t.Errorf("DefaultConfig = %+v", d)
	}
	db, _ := openDB(t, pipeline.Config{Validation: pipeline.Serial, Families: map[string]storage.FamilyOptions{"x": {WriteBufferSize: 1 << 20}}})
	if db.Policy() != pipeline.Serial {
		t.Errorf("Policy = %q", db.Policy())
	}
	fams, err := db.ColumnFamilies()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default", "x"}, fams); diff != "" {
		t.Errorf("ColumnFamilies (-want +got):\n%s", diff)
	}
}

// TestConfigErrorFromStorage: a setting the storage layer refuses reaches Open's caller
// as the same type and sentinel as the ones pipeline refuses, under either package's
// name.
func TestConfigErrorFromStorage(t *testing.T) {
	_, err := pipeline.Open("", pipeline.Config{})
	var ce *pipeline.ConfigError
	if !errors.As(err, &ce) || ce.Field != "dir" || !errors.Is(err, pipeline.ErrInvalidConfig) {
		t.Fatalf("Open(\"\") = %v (%T); want a *pipeline.ConfigError naming dir", err, err)
	}
	var se *storage.ConfigError = ce
	if !errors.Is(err, storage.ErrInvalidConfig) || se.Expected == "" {
		t.Errorf("Open(\"\") = %v; want it to match storage.ErrInvalidConfig and say what was expected", err)
	}
	if want := `rockline: dir = "": expected a folder name`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// TestConfigValidator: a validator plugged in through Config.Validator replaces the
// built-in policy (Validation must stay empty), a factory's error fails Open naming
// the field, and a factory that returns no validator is refused.
func TestConfigValidator(t *testing.T) {
	failing := errors.New("no validator today")
	tests := []struct {
		name string
		cfg  pipeline.Config
		want string // in the error
		is   error
	}{
		{"with Validation", pipeline.Config{Validation: pipeline.Serial, Validator: builtIn(pipeline.Serial)}, "Validation", pipeline.ErrInvalidConfig},
		{"failing factory", pipeline.Config{Validator: func(validators.Env, validators.Options) (validators.Validator, error) { return nil, failing }}, "Config.Validator", failing},
		{"nil validator", pipeline.Config{Validator: func(validators.Env, validators.Options) (validators.Validator, error) { return nil, nil }}, "Validator", pipeline.ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			db, err := pipeline.Open(dir, tc.cfg)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v; want an error matching %v that names %q", err, tc.is, tc.want)
			}
		})
	}
	t.Run("in use", func(t *testing.T) {
		db, err := pipeline.Open(t.TempDir(), pipeline.Config{Validator: builtIn(pipeline.Serial)})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if got := db.Policy(); got != pipeline.Serial {
			t.Errorf("Policy() = %q, want the plugged validator's %q", got, pipeline.Serial)
		}
		if err := db.Update(context.Background(), func(tx *pipeline.Txn) error { return tx.Put(db.Default(), []byte("k"), []byte("v")) }); err != nil {
			t.Fatal(err)
		}
	})
}

// builtIn is a factory for a built-in policy, as an outside validator's would be.
func builtIn(policy string) validators.Factory {
	return func(env validators.Env, o validators.Options) (validators.Validator, error) {
		return validators.New(policy, env, o)
	}
}
