package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rockline/rockline/pipeline"
)

// Family generations: dropping a family and creating it again starts it empty, as the
// local engine does with RocksDB families, without racing commits that still write
// the old one.
//
// Subjects. Generation g of a family keeps its keys under P.k.<family>~<g> (g >= 2;
// generation 1 under the bare family token, so a family never dropped has the
// subjects it always had). A re-created family therefore shares no subject with the
// generation before it: no purge has to finish first, and nothing written to the old
// generation can appear in the new one.
//
// The catalog. The current generation of each family, and whether it is dropped, is a
// record in the partition's own stream, ordered with the commits: every client reads
// it at the position it reads at and so agrees on the generation there. A family with
// no record is generation 1 and live (every family used before CreateFamily and
// DropFamily existed). The record is kept in FamilyShards identical copies, on
// P.f.<family>.0 .. P.f.<family>.<FamilyShards-1>, written together by one atomic
// commit (CreateFamily, DropFamily).
//
// Racing commits. A transaction that read or wrote a family carries a FamilyCheck: a
// read marker expecting the version, as of its position, of one copy of the record.
// A drop or re-creation writes every copy, so every commit that read the family
// before it fails whole with a *ConflictError of Kind "family"; Txn then reports a
// *pipeline.DroppedError when its re-read finds the family dropped. The copies exist
// because JetStream allows one commit in flight per checked subject (10164): commits
// of one family check copies chosen at random, so they collide only when two pick the
// same copy at once, and such a collision is re-read and re-sent, not a conflict.
//
// Reserved families. A family whose name starts with reservedPrefix is rockline's own:
// a layer's family (pipeline.DB.LayerFamily, the event store's "rockline.streams").
// The public API never creates or drops one (pipeline refuses such names in
// CreateColumnFamily and DropColumnFamily), and neither does this engine:
// CreateFamily and DropFamily (through changeFamily, the only writer of catalog
// records) refuse them with an *ArgumentError. So a reserved family's catalog record
// never changes, a FamilyCheck on it could never fail, and Txn adds none. That spares
// every event store append a read marker on a catalog copy, and the "subject in
// flight" refusals, re-reads and re-sends that marker caused between concurrent
// appends. A Txn still reads the record (with the family's first key, in the same
// request), so a catalog that records a reserved family dropped (written by an
// earlier version of the engine, which allowed it) still fails reads and writes of it.
// Such a version must not share a partition with this one: a drop it made would not
// fail this version's commits of the family.
//
// What is left to the caller: purging a dropped generation (PurgeGeneration) once no
// reader needs it at an older position (the engine seam does not purge: a DB on
// JetStream keeps dropped generations' keys until the application purges them), and
// deciding whether a raw Partition.Commit (not a Txn) carries FamilyChecks.

// FamilyShards is how many copies of each family's catalog record the stream holds.
const FamilyShards = 16

// reservedPrefix starts the names of the families rockline keeps for itself, as in
// package pipeline: pipeline.DB.LayerFamily(name) is the family reservedPrefix+name.
// CreateFamily and DropFamily refuse such names, and Txn does not check their
// catalog record at Commit (see the comment above).
const reservedPrefix = "rockline."

// reserved reports whether family is a reserved family (reservedPrefix).
func reserved(family string) bool { return strings.HasPrefix(family, reservedPrefix) }

// FamilyCheck makes a commit conditional on a family's catalog record: Version is the
// version (sequence), as read, of the record's copy Shard (0 when the family has no
// record). FamilyState.Check builds one.
type FamilyCheck struct {
	Family  string
	Shard   int
	Version uint64
}

func (f FamilyCheck) shard() int {
	if f.Shard < 0 || f.Shard >= FamilyShards {
		return 0
	}
	return f.Shard
}

// FamilyState is a family as the catalog records it at a position.
type FamilyState struct {
	Family string
	// Generation is the family's generation: 1 for a family never dropped.
	Generation uint64
	// Dropped: the generation is dropped and no later one was created.
	Dropped bool
	// Recorded: the catalog holds a record (false: a family never created nor dropped,
	// which is generation 1 and live).
	Recorded bool
	// Shard and Version identify the record's copy read and its version, for Check.
	Shard   int
	Version uint64
}

// Check returns the FamilyCheck for s.
func (s FamilyState) Check() FamilyCheck {
	return FamilyCheck{Family: s.Family, Shard: s.Shard, Version: s.Version}
}

// familyRecord is a catalog record's payload.
type familyRecord struct {
	Generation uint64 `json:"generation"`
	Dropped    bool   `json:"dropped,omitempty"`
}

// FamilyChange is a catalog record in a commit (Entry.Families): the creation, or with
// Dropped the drop, of Generation of Family.
type FamilyChange struct {
	Family     string
	Generation uint64
	Dropped    bool
}

func decodeFamilyRecord(family string, data []byte) (familyRecord, error) {
	var r familyRecord
	if err := json.Unmarshal(data, &r); err != nil || r.Generation == 0 {
		return r, fmt.Errorf("rockline/jetstream: %w: catalog record of family %q holds %q", pipeline.ErrCorrupt, family, data)
	}
	return r, nil
}

// Family returns family's catalog state at the commit position at (0: the empty
// partition, where every family is generation 1 and live), reading one copy of its
// record chosen at random. Errors as for Get.
func (p *Partition) Family(ctx context.Context, family string, at uint64) (FamilyState, error) {
	return p.familyAt(ctx, family, at, callerPos)
}

// familyAt is Family at a position of the given origin.
func (p *Partition) familyAt(ctx context.Context, family string, at uint64, origin posOrigin) (FamilyState, error) {
	if p.closed.Load() {
		return FamilyState{}, ErrClosed
	}
	st := FamilyState{Family: family, Generation: 1, Shard: rand.IntN(FamilyShards)}
	if at == 0 {
		return st, nil
	}
	msgs, err := p.snapshot(ctx, "Family", []string{p.subj.catalog(family, st.Shard)}, at, origin)
	if err != nil {
		return st, err
	}
	return st, st.apply(msgs)
}

// apply sets s from the record's copy among msgs, if any.
func (s *FamilyState) apply(msgs []*nats.Msg) error {
	for _, m := range msgs {
		r, err := decodeFamilyRecord(s.Family, m.Data)
		if err != nil {
			return err
		}
		s.Generation, s.Dropped, s.Recorded, s.Version = r.Generation, r.Dropped, true, msgSeq(m)
	}
	return nil
}

// latestFamily reads every copy of family's record as the answering replica holds it
// now (no position): the versions a catalog change expects. A replica behind can only
// make the change conflict, and it is then read again.
func (p *Partition) latestFamily(ctx context.Context, op, family string) (FamilyState, []uint64, error) {
	st := FamilyState{Family: family, Generation: 1}
	vers := make([]uint64, FamilyShards)
	req := multiGetRequest{}
	for i := range FamilyShards {
		req.MultiLast = append(req.MultiLast, p.subj.catalog(family, i))
	}
	rctx, cancel := deadline(ctx, p.cfg.ReadTimeout)
	defer cancel()
	msgs, err := p.multiGet(rctx, op, req)
	if err != nil {
		return st, nil, err
	}
	for _, m := range msgs {
		_, _, _, shard, ok := p.subj.parseGen(m.Subject)
		if !ok {
			return st, nil, fmt.Errorf("rockline/jetstream: %s: unexpected subject %q", op, m.Subject)
		}
		r, err := decodeFamilyRecord(family, m.Data)
		if err != nil {
			return st, nil, err
		}
		vers[shard] = msgSeq(m)
		if r.Generation > st.Generation || (r.Generation == st.Generation && r.Dropped) || !st.Recorded {
			st.Generation, st.Dropped = r.Generation, r.Dropped
		}
		st.Recorded = true
	}
	return st, vers, nil
}

// CreateFamily records family as live and returns its generation and the commit's
// position: generation 1 for a family never recorded, the dropped generation plus one
// after a drop (a new, empty family: its subjects are new). It fails with
// pipeline.ErrColumnFamilyExists when the catalog records the family as live, and
// with an *ArgumentError for a family name whose subjects do not fit or that is
// reserved (reservedPrefix: a layer's family, live from its first write).
func (p *Partition) CreateFamily(ctx context.Context, family string) (gen, pos uint64, err error) {
	return p.changeFamily(ctx, "CreateFamily", family, func(st FamilyState) (familyRecord, error) {
		switch {
		case !st.Recorded:
			return familyRecord{Generation: 1}, nil
		case !st.Dropped:
			return familyRecord{}, fmt.Errorf("rockline/jetstream: CreateFamily %q (generation %d): %w", family, st.Generation, pipeline.ErrColumnFamilyExists)
		}
		return familyRecord{Generation: st.Generation + 1}, nil
	})
}

// DropFamily records family's current generation as dropped and returns it and the
// commit's position. From that position on, Txn reads and writes of the family fail
// with a *pipeline.DroppedError, and every commit that read or wrote it at an earlier
// position with a FamilyCheck fails (see families.go); CreateFamily may follow at
// once. The keys of the dropped generation stay readable at earlier positions until
// PurgeGeneration removes them. A family already dropped fails with a
// *pipeline.DroppedError. A family never recorded (generation 1) can be dropped. A
// reserved family (reservedPrefix) is refused with an *ArgumentError: it is never
// dropped, which is what lets Txn commit it without a FamilyCheck.
func (p *Partition) DropFamily(ctx context.Context, family string) (gen, pos uint64, err error) {
	return p.changeFamily(ctx, "DropFamily", family, func(st FamilyState) (familyRecord, error) {
		if st.Recorded && st.Dropped {
			return familyRecord{}, &pipeline.DroppedError{Family: family}
		}
		return familyRecord{Generation: st.Generation, Dropped: true}, nil
	})
}

// changeFamily writes the record next makes of the family's latest state to every
// copy, each expecting the version read, as one commit; a racing change conflicts and
// is decided again on a new read (up to InFlightRetries times). It refuses a
// reserved family: this is the only writer of catalog records, so no record of one
// is ever written.
func (p *Partition) changeFamily(ctx context.Context, op, family string, next func(FamilyState) (familyRecord, error)) (uint64, uint64, error) {
	if p.closed.Load() {
		return 0, 0, ErrClosed
	}
	if reserved(family) {
		return 0, 0, &ArgumentError{Op: op, Arg: "family", Reason: fmt.Sprintf("%q is reserved by rockline (names starting with %q are layers' families, never created or dropped)", family, reservedPrefix)}
	}
	if n := p.subj.keyGenLen(family, 1<<62, []byte{0}); n > MaxSubjectLen {
		return 0, 0, &LimitError{Op: op, Field: "family", Limit: "encoded subject length", Got: n, Max: MaxSubjectLen}
	}
	for attempt := 0; ; attempt++ {
		st, vers, err := p.latestFamily(ctx, op, family)
		if err != nil {
			return 0, 0, err
		}
		rec, err := next(st)
		if err != nil {
			return 0, 0, err
		}
		data, _ := json.Marshal(rec)
		msgs := make([]*nats.Msg, 0, FamilyShards+1)
		var checks []check
		for i := range FamilyShards {
			subject := p.subj.catalog(family, i)
			m := nats.NewMsg(subject)
			m.Data = data
			m.Header.Set(hdrExpSeq, strconv.FormatUint(vers[i], 10))
			msgs = append(msgs, m)
			checks = append(checks, check{kind: "family", family: family, subject: subject, version: vers[i]})
		}
		msgs = append(msgs, nats.NewMsg(p.subj.commit()))
		pos, err := p.commit(ctx, &Commit{}, msgs, checks)
		switch {
		case err == nil:
			p.stats.commits.Add(1)
			return rec.Generation, pos, nil
		case errors.Is(err, ErrConflict) && attempt < p.cfg.InFlightRetries:
			if err := backoff(ctx, attempt); err != nil {
				return 0, 0, fmt.Errorf("rockline/jetstream: %s: %w", op, err)
			}
		default:
			return 0, 0, err
		}
	}
}

// Families returns every family the catalog records at the commit position at, live
// and dropped, from one listing of the catalog subjects (STREAM.INFO) and multi-gets
// of one copy each.
func (p *Partition) Families(ctx context.Context, at uint64) ([]FamilyState, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if at == 0 {
		return nil, nil
	}
	subjects, err := p.listSubjects(ctx, "Families", p.subj.prefix+tokFamily+".*.0")
	if err != nil {
		return nil, err
	}
	var out []FamilyState
	err = p.multiLastPaged(ctx, "Families", subjects, at, callerPos, func(m *nats.Msg) error {
		_, fam, _, _, ok := p.subj.parseGen(m.Subject)
		if !ok {
			return fmt.Errorf("rockline/jetstream: Families: unexpected subject %q", m.Subject)
		}
		st := FamilyState{Family: string(fam)}
		if err := st.apply([]*nats.Msg{m}); err != nil {
			return err
		}
		out = append(out, st)
		return nil
	})
	return out, err
}

// PurgeGeneration removes every version of every key of generation gen of family, at
// every position: the physical half of a drop, for a generation no reader needs any
// more (reads at positions where it was current then find it empty). It refuses the
// family's current generation unless the catalog records it dropped.
func (p *Partition) PurgeGeneration(ctx context.Context, family string, gen uint64) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if gen == 0 {
		return &ArgumentError{Op: "PurgeGeneration", Arg: "gen", Reason: "generations start at 1"}
	}
	st, _, err := p.latestFamily(ctx, "PurgeGeneration", family)
	if err != nil {
		return err
	}
	if gen > st.Generation || (gen == st.Generation && !st.Dropped) {
		return &ArgumentError{Op: "PurgeGeneration", Arg: "gen", Reason: fmt.Sprintf("generation %d of family %q is not dropped (current %d, dropped %v)", gen, family, st.Generation, st.Dropped)}
	}
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		return fmt.Errorf("rockline/jetstream: PurgeGeneration: %w", err)
	}
	if err := s.Purge(ctx, natsjs.WithPurgeSubject(p.subj.familyGen(family, gen))); err != nil {
		return fmt.Errorf("rockline/jetstream: PurgeGeneration %q/%d: %w", family, gen, err)
	}
	return nil
}

// genHint returns the generation of family the partition last saw current (1 when
// none): the guess a transaction's first read of the family uses.
func (p *Partition) genHint(family string) uint64 {
	if g, ok := p.gens.Load(family); ok {
		return g.(uint64)
	}
	return 1
}

func (p *Partition) setGenHint(family string, gen uint64) {
	if gen <= 1 {
		if _, ok := p.gens.Load(family); !ok {
			return
		}
	}
	p.gens.Store(family, gen)
}
