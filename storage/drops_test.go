package storage_test

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rockline/rockline/internal/storagefaults"
	"github.com/rockline/rockline/storage"
)

// A drop while a claim is held returns at once, lets the claimed write land, and
// drops physically exactly once when the claim is released.
func TestDropWaitsForClaims(t *testing.T) {
	db := openDB(t, storage.Options{})
	f, err := db.CreateFamily("orders", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, f, "before", "1")
	if err := f.Claim(); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	b := storage.NewBatch()
	mustPut(t, b, f, "admitted", "2")

	var dropped atomic.Int32
	if err := db.DropFamily("orders", func(err error) {
		if err != nil {
			t.Errorf("drop callback: %v", err)
		}
		dropped.Add(1)
	}); err != nil {
		t.Fatalf("DropFamily: %v", err)
	}
	if st, _ := db.Stats(); st.PendingDrops != 1 || dropped.Load() != 0 {
		t.Fatalf("pending %d, dropped %d while claimed; want 1, 0", st.PendingDrops, dropped.Load())
	}
	if err := f.Claim(); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Fatalf("Claim after drop = %v; want ErrFamilyRetired", err)
	}
	if err := storage.NewBatch().Put(f, []byte("k"), []byte("v")); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Fatalf("Put after drop = %v; want ErrFamilyRetired", err)
	}
	if _, err := db.Family("orders"); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Fatalf("Family(orders) after drop = %v", err)
	}
	mustWrite(t, db, b) // admitted before the drop: completes normally
	wantValue(t, db, f, nil, "admitted", "2")

	again, err := db.CreateFamily("orders", storage.FamilyOptions{})
	if err != nil {
		t.Fatalf("re-create while the drop is pending: %v", err)
	}
	if again.Generation() != 2 {
		t.Fatalf("generation %d; want 2", again.Generation())
	}
	wantMissing(t, db, again, nil, "before")
	put(t, db, again, "fresh", "3")

	f.Release()
	if dropped.Load() != 1 {
		t.Fatalf("drop callback ran %d times after the last release; want 1", dropped.Load())
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingDrops != 0 || st.CompletedDrops != 1 {
		t.Fatalf("pending %d, completed %d; want 0, 1", st.PendingDrops, st.CompletedDrops)
	}
	// Dropped physically and pinned by no snapshot: the old handle is freed.
	if _, err := db.Get(f, []byte("before"), nil); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Fatalf("Get through the dropped family = %v; want ErrFamilyRetired", err)
	}
	if st.HeldDropped != 0 || st.FreedDropped != 1 {
		t.Fatalf("held %d, freed %d dropped handles; want 0, 1", st.HeldDropped, st.FreedDropped)
	}
	wantValue(t, db, again, nil, "fresh", "3")
}

// A physical drop that fails is retried at Open and then succeeds; the family does not
// come back.
func TestFailedDropRetriedAtOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	fail := &atomic.Bool{}
	fail.Store(true)
	faults := &storagefaults.Faults{Drop: func(string) error {
		if fail.Load() {
			return errors.New("injected drop failure")
		}
		return nil
	}}
	db, err := storage.Open(dir, storagefaults.With(storage.Options{}, faults))
	if err != nil {
		t.Fatal(err)
	}
	f, err := db.CreateFamily("doomed", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, f, "k", "v")
	if err := db.DropFamily("doomed"); err != nil {
		t.Fatalf("DropFamily: %v", err)
	}
	st, _ := db.Stats()
	if st.PendingDrops != 1 || st.FailedDrops < 1 || st.LastDropError == "" {
		t.Fatalf("after a failed drop: pending %d, failed %d, last %q", st.PendingDrops, st.FailedDrops, st.LastDropError)
	}
	if err := db.Close(); err == nil {
		t.Fatal("Close with a drop that cannot run returned nil; want the pending-drop error")
	}

	fail.Store(false)
	db = openAt(t, dir, storagefaults.With(storage.Options{}, faults))
	names, err := db.Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "doomed" {
			t.Fatalf("dropped family is back after reopen: %v", names)
		}
	}
	st, _ = db.Stats()
	if st.PendingDrops != 0 || st.CompletedDrops != 1 {
		t.Fatalf("after reopen: pending %d, completed %d; want 0, 1", st.PendingDrops, st.CompletedDrops)
	}
	g, err := db.CreateFamily("doomed", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantMissing(t, db, g, nil, "k")
}

// Close with a claim released just before performs the pending drop.
func TestCloseCompletesPendingDrop(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	fail := &atomic.Bool{}
	fail.Store(true)
	db, err := storage.Open(dir, storagefaults.With(storage.Options{}, &storagefaults.Faults{Drop: func(string) error {
		if fail.Load() {
			return errors.New("injected")
		}
		return nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateFamily("x", storage.FamilyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.DropFamily("x"); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db = openAt(t, dir, storage.Options{})
	if st, _ := db.Stats(); st.CompletedDrops != 0 || st.PendingDrops != 0 {
		t.Fatalf("reopen found work left: completed %d, pending %d", st.CompletedDrops, st.PendingDrops)
	}
	if _, err := db.Family("x"); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Fatalf("Family(x) after reopen = %v", err)
	}
}

func TestFamilyNameRejectsGenerationSeparator(t *testing.T) {
	db := openDB(t, storage.Options{})
	var ce *storage.ConfigError
	if _, err := db.CreateFamily("a#2", storage.FamilyOptions{}); !errors.As(err, &ce) {
		t.Fatalf("CreateFamily(a#2) = %v; want *ConfigError", err)
	}
	if err := db.DropFamily(storage.MetaFamily); !errors.As(err, &ce) {
		t.Fatalf("DropFamily(meta) = %v; want *ConfigError", err)
	}
}

// Generations only grow, across reopens too: a name whose drop completed (its intent
// gone) and that is re-created after a reopen gets the next generation, and a
// generation at or below the highest one is refused.
func TestGenerationsAreDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		f, err := db.CreateFamily("x", storage.FamilyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Generation() != want {
			t.Fatalf("generation %d, want %d", f.Generation(), want)
		}
		if err := db.DropFamily("x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.MaxGeneration("x"); got != 2 {
		t.Fatalf("MaxGeneration after reopen = %d, want 2", got)
	}
	if _, err := db.CreateFamilyGeneration("x", 2, storage.FamilyOptions{}); !errors.Is(err, storage.ErrInvalidConfig) {
		t.Fatalf("CreateFamilyGeneration at the highest generation = %v, want a *ConfigError", err)
	}
	f, err := db.CreateFamily("x", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Generation() != 3 || f.QualifiedName() != "x#3" {
		t.Fatalf("re-created after reopen: generation %d (%s), want 3", f.Generation(), f.QualifiedName())
	}
	if _, err := db.CreateFamilyGeneration("y", 5, storage.FamilyOptions{}); err != nil {
		t.Fatalf("CreateFamilyGeneration(y, 5): %v", err)
	}
	if got := db.MaxGeneration("y"); got != 5 {
		t.Fatalf("MaxGeneration(y) = %d, want 5", got)
	}
}

// A drop that a claim keeps from running before Close is reported by Close as a typed
// *DropPendingError naming the family.
func TestClosePendingDropIsTyped(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := db.CreateFamily("held", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Claim(); err != nil {
		t.Fatal(err)
	}
	if err := db.DropFamily("held"); err != nil {
		t.Fatal(err)
	}
	err = db.Close()
	var pe *storage.DropPendingError
	if !errors.As(err, &pe) || pe.Family != "held" || pe.Claims != 1 || !errors.Is(err, storage.ErrDropPending) {
		t.Fatalf("Close = %v, want a *DropPendingError for held with 1 claim", err)
	}
	f.Release() // after Close: the drop stays for the next Open
}
