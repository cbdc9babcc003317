package pipeline

import (
	"fmt"
	"testing"
)

// TestOwnWriteCollisions: the own-write index is keyed by fingerprint, so a fingerprint
// shared by several keys must still resolve to the right op (or to none). The test
// forces every write of a large transaction onto one fingerprint.
func TestOwnWriteCollisions(t *testing.T) {
	db, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cf := db.Default()
	f := storageFamily(cf.f)
	tx0 := db.Begin()
	tx := tx0.local()
	defer tx0.Discard()
	const n, shared = 20, 42
	for i := range n {
		if err := tx0.Put(cf, fmt.Appendf(nil, "k%02d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tx.writes {
		tx.writes[i] = shared
	}
	for i := range n {
		got, ok := tx.ownWrite(f, fmt.Appendf(nil, "k%02d", i), shared)
		if !ok || got != i {
			t.Errorf("ownWrite(k%02d) = %d, %v; want %d, true", i, got, ok, i)
		}
	}
	if i, ok := tx.ownWrite(f, []byte("absent"), shared); ok {
		t.Errorf("ownWrite(absent) with a colliding fingerprint = %d, true; want false", i)
	}
	if i, ok := tx.ownWrite(f, []byte("k03"), shared+1); ok {
		t.Errorf("ownWrite(k03) under a fingerprint no write has = %d, true; want false", i)
	}
	// A later write of a key must win over its earlier one, indexed or not.
	if err := tx0.Put(cf, []byte("k05"), []byte("again")); err != nil {
		t.Fatal(err)
	}
	tx.writes[len(tx.writes)-1] = shared
	if i, ok := tx.ownWrite(f, []byte("k05"), shared); !ok || i != n {
		t.Errorf("ownWrite(k05) after a re-put = %d, %v; want %d, true", i, ok, n)
	}
}

// TestOwnWriteIndexPooled: a transaction reusing pooled buffers starts with an empty
// own-write index, so keys written by an earlier transaction are read from storage.
func TestOwnWriteIndexPooled(t *testing.T) {
	db, err := Open(t.TempDir(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cf := db.Default()
	for round := range 3 {
		tx := db.Begin()
		for i := range 20 {
			k := fmt.Appendf(nil, "k%02d", i)
			if round == 0 || i%2 == 0 {
				if err := tx.Put(cf, k, fmt.Appendf(nil, "r%d", round)); err != nil {
					t.Fatal(err)
				}
			}
			want := fmt.Sprintf("r%d", round)
			if round > 0 && i%2 == 1 {
				want = "r0"
			}
			if v, err := tx.Get(cf, k); err != nil || string(v) != want {
				t.Fatalf("round %d: Get(%s) = %q, %v; want %q", round, k, v, err, want)
			}
		}
		if err := tx.CommitInline(); err != nil {
			t.Fatal(err)
		}
	}
}
