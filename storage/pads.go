package storage

import (
	"fmt"
	"strconv"
	"strings"
)

// Padding families. RocksDB 7.8 writes the options of a family it creates to its info
// LOG, as "header" lines, while the database has fewer than ten column families; the
// size-capped LOG that Options.MaxLogFileSize selects (RocksDB's AutoRollLogger) keeps
// every header line in memory for the life of the database, to repeat it at the top
// of each new LOG file. That is about 11 KiB per family created, never given back
// before Close: a database that drops families and creates new ones (per-tenant
// families, projection resets, rebuilds that swap families) would grow by that much
// for each one. Once a family is dropped, the storage layer therefore keeps at least
// minLiveFamilies column families open, creating empty padding families named
// PadFamilyPrefix plus a number (at most eight: the default family and MetaFamily
// always exist). Each costs about 50 KiB while the database is open, once, instead of
// 11 KiB for every family created after a drop. Padding families are never listed by
// Families, cannot be dropped, and stay on disk, so a reopened database keeps them.
const (
	// PadFamilyPrefix starts the names of the storage layer's padding families.
	PadFamilyPrefix = "rockline.pad."
	// minLiveFamilies is the family count from which RocksDB 7.8 stops logging (and
	// its capped LOG stops keeping) a created family's options.
	minLiveFamilies = 10
)

// isInternal reports whether name is one of the storage layer's own families, which
// Families does not list and DropFamily refuses.
func isInternal(name string) bool {
	return name == MetaFamily || strings.HasPrefix(name, PadFamilyPrefix)
}

// padFamilies creates padding families until minLiveFamilies families are live. The
// caller holds db.ddl and is between enter and leave. A failure is recorded as the
// last drop error (it costs memory, not correctness: the next drop tries again).
func (db *DB) padFamilies() {
	for n := 1; ; n++ {
		r := &db.families
		r.mu.RLock()
		live := len(r.byName)
		_, taken := r.byName[PadFamilyPrefix+strconv.Itoa(n)]
		r.mu.RUnlock()
		if live >= minLiveFamilies {
			return
		}
		if taken {
			continue
		}
		name := PadFamilyPrefix + strconv.Itoa(n)
		no := db.familyOptions(FamilyOptions{WriteBufferSize: MinWriteBufferSize})
		h, err := db.native.CreateColumnFamily(no, name)
		no.Destroy()
		if err != nil {
			db.drops.lastErr.Store(mapError(fmt.Sprintf("create padding family %q", name), err).Error())
			return
		}
		db.families.add(&Family{db: db, name: name, physical: name, gen: 1, id: h.ID(), handle: h,
			opts: FamilyOptions{WriteBufferSize: MinWriteBufferSize}.withDefaults()})
	}
}
