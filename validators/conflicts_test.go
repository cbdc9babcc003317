package validators

import (
	"errors"
	"testing"
)

func TestTableConflicts(t *testing.T) {
	tb := newTable(0)
	tb.record([]uint64{1, 2}, 5)
	tests := []struct {
		name    string
		fps     []uint64
		readPos uint64
		want    error
	}{
		{"written after read", []uint64{2}, 4, ErrConflict},
		{"written at read", []uint64{2}, 5, nil},
		{"written before read", []uint64{1}, 7, nil},
		{"never written", []uint64{3}, 0, nil},
		{"one of many", []uint64{3, 9, 1}, 4, ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tb.check(tc.fps, tc.readPos); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("check(%v, %d) = %v; want %v", tc.fps, tc.readPos, err, tc.want)
			}
		})
	}
}

func TestTablePruneKeepsWhatOpenTransactionsNeed(t *testing.T) {
	s := newFakePositions(t)
	old := s.acquire() // a transaction at read position 0 stays open
	tb := newTable(0)
	for p := uint64(1); p <= 5000; p++ {
		if _, err := s.Assign(1); err != nil {
			t.Fatal(err)
		}
		tb.record([]uint64{p}, p)
		if err := s.Publish(p, p); err != nil {
			t.Fatal(err)
		}
	}
	tb.maybePrune(s)
	if tb.len() != 5000 {
		t.Fatalf("pruned to %d entries while a transaction at 0 is open; want 5000", tb.len())
	}
	if err := tb.check([]uint64{1}, old); !errors.Is(err, ErrConflict) {
		t.Fatalf("old transaction check = %v; want ErrConflict", err)
	}
	s.release(old)
	young := s.acquire() // read position 5000
	tb.records.Store(1 << 20)
	tb.maybePrune(s)
	if tb.len() != 0 {
		t.Fatalf("%d entries left after pruning below 5000; want 0", tb.len())
	}
	if err := tb.check([]uint64{4999}, young); err != nil {
		t.Fatalf("young transaction check = %v; want nil", err)
	}
	if err := tb.check([]uint64{42}, 100); !errors.Is(err, ErrTxnTooOld) {
		t.Fatalf("check below the floor = %v; want ErrTxnTooOld", err)
	}
	s.release(young)
}

func TestFingerprintsSeparateFamilies(t *testing.T) {
	f := NewFingerprinter()
	if f.Of(1, []byte("k")) == f.Of(2, []byte("k")) {
		t.Fatal("same key in two families has one fingerprint")
	}
	if f.Of(1, []byte("k")) != f.Of(1, []byte("k")) {
		t.Fatal("fingerprint not deterministic")
	}
	if NewFingerprinter().Of(1, []byte("k")) == f.Of(1, []byte("k")) {
		t.Fatal("two databases share fingerprints")
	}
}
