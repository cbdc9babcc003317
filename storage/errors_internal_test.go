package storage

import (
	"errors"
	"strings"
	"testing"
)

func TestMapError(t *testing.T) {
	other := errors.New("IO error: No space left on device")
	cases := []struct {
		name string
		in   error
		want error // sentinel the result must match; nil: result must be nil
	}{
		{"nil", nil, nil},
		{"busy", errors.New("Resource busy: x"), ErrBusy},
		{"try again", errors.New("Operation failed. Try again.: x"), ErrTryAgain},
		{"family not found", errors.New("Invalid argument: Column family not found: x"), ErrColumnFamilyNotFound},
		{"invalid family in batch", errors.New("Invalid argument: Invalid column family specified in write batch"), ErrColumnFamilyNotFound},
		{"family exists", errors.New("Invalid argument: Column family already exists"), ErrColumnFamilyExists},
		{"other", other, other},
	}
	sentinels := []error{ErrBusy, ErrTryAgain, ErrColumnFamilyNotFound, ErrColumnFamilyExists, ErrClosed, ErrNotFound}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mapError("the op", tc.in)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("mapError(nil) = %v, want nil", got)
				}
				return
			}
			if !errors.Is(got, tc.want) {
				t.Errorf("mapError(%q) = %v, does not match %v", tc.in, got, tc.want)
			}
			for _, s := range sentinels {
				if s != tc.want && errors.Is(got, s) {
					t.Errorf("mapError(%q) = %v also matches %v", tc.in, got, s)
				}
			}
			msg := got.Error()
			if !strings.HasPrefix(msg, "rockline: the op: ") {
				t.Errorf("message %q does not name the op", msg)
			}
			if !strings.Contains(msg, tc.in.Error()) {
				t.Errorf("message %q drops the RocksDB status %q", msg, tc.in)
			}
		})
	}
}

func TestParseTickers(t *testing.T) {
	dump := "rocksdb.block.cache.miss COUNT : 12\n" +
		"rocksdb.flush.write.bytes COUNT : 1048576\n" +
		"rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 P99 : 3.0 P100 : 4.0 COUNT : 5 SUM : 6\n" +
		"garbage\n"
	got := parseTickers(dump)
	if got["rocksdb.block.cache.miss"] != 12 || got["rocksdb.flush.write.bytes"] != 1<<20 {
		t.Errorf("parseTickers = %v", got)
	}
	if _, ok := got["rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 P99 : 3.0 P100 : 4.0"]; ok {
		t.Errorf("histogram line parsed as a ticker: %v", got)
	}
}
