package esmodel_test

import (
	"context"
	"errors"
	"fmt"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// readModelAlias is the alias readers resolve the projection's read model through.
const readModelAlias = "counts"

// projRebuild: a blue/green Rebuild of the running single-handler projection into a
// new generation (its own name and family). The alias first names the running one
// (SwapAlias from whatever it named). On a log truncated since its start the new
// version cannot read the log: Rebuild fails with ErrLogTruncated, the alias and
// the old version stay as they were. Otherwise the alias names the new version, the
// old one's family is dropped and its position forgotten, and the new one runs (the
// check compares its read model with the model).
func (m *machine) projRebuild(t *rapid.T) {
	pr := m.running(t)
	old, ok := pr.p.(*eventstore.Projection)
	if !ok || pr.doomed || pr.paused {
		t.Skip("Rebuild replaces a running single-handler projection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if m.aliasGen != pr.gen {
		from := ""
		if m.aliasGen > 0 {
			from = projName(m.aliasGen)
		}
		if err := m.es.SwapAlias(ctx, readModelAlias, from, projName(pr.gen)); err != nil {
			fatalf(t, "SwapAlias(%s, %q, %s): %v", readModelAlias, from, projName(pr.gen), err)
		}
		m.aliasGen = pr.gen
	}
	m.gens++
	next := m.gens
	p, err := m.es.Rebuild(ctx, readModelAlias, old, projConfig(m.db, next, pr.filter))
	if m.model.first > 1 {
		expectIs(t, fmt.Sprintf("Rebuild into %s on a log truncated below %d", projName(next), m.model.first), err, pipeline.ErrLogTruncated)
		m.checkAlias(t)
		return
	}
	if err != nil {
		fatalf(t, "Rebuild(%s -> %s): %v", projName(pr.gen), projName(next), err)
	}
	if _, err := m.db.ColumnFamily(projFamily(pr.gen)); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		fatalf(t, "the replaced version's family %s after Rebuild: %v, want ErrColumnFamilyNotFound", projFamily(pr.gen), err)
	}
	for _, pos := range m.storedPositions(t, pr) {
		if pos != 0 {
			fatalf(t, "the replaced version %s still has a stored position %d", projName(pr.gen), pos)
		}
	}
	pr.gen, pr.p, m.aliasGen = next, p, next
	m.checkAlias(t)
}

// checkAlias fails t unless the alias names the generation the model says.
func (m *machine) checkAlias(t *rapid.T) {
	if m.aliasGen == 0 {
		return
	}
	var got string
	err := m.db.View(func(tx *pipeline.Txn) error {
		var err error
		got, err = m.es.Alias(tx, readModelAlias)
		return err
	})
	if err != nil {
		fatalf(t, "Alias(%s): %v", readModelAlias, err)
	}
	if want := projName(m.aliasGen); got != want {
		fatalf(t, "Alias(%s) = %q, want %q", readModelAlias, got, want)
	}
}
