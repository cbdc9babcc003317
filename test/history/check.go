package history

import (
	"fmt"
	"slices"
)

// Options tunes Check.
type Options struct {
	// Realtime adds real-time edges (T1 completed before T2 was invoked), checking
	// strict serializability; without it, serializability.
	Realtime bool
}

// elem is where an appended element came from.
type elem struct {
	txn *Txn
	key int
	// last: this is the writer's last append to key.
	last bool
}

// analysis is what Check derives from a history.
type analysis struct {
	h         History
	writer    map[int64]elem
	committed map[int]bool        // OK, or unknown and seen by an OK read
	order     map[int][]int64     // key -> its longest OK read (the version order)
	final     map[int][]int64     // key -> what the last final read returned
	appends   map[int]map[int]int // txn -> key -> how many appends
	out       []Anomaly
}

func (a *analysis) flag(kind string, key int, detail string, txns ...int) {
	a.out = append(a.out, Anomaly{Kind: kind, Txns: txns, Key: key, Detail: detail})
}

// okReads calls fn for every read of an OK transaction.
func (a *analysis) okReads(fn func(t *Txn, i int, o Op)) {
	for _, t := range a.h {
		if t.Outcome != OK {
			continue
		}
		for i, o := range t.Ops {
			if o.F == FRead {
				fn(t, i, o)
			}
		}
	}
}

// Check judges a list-append history: the direct anomalies (aborted, intermediate,
// garbage and duplicate reads, incompatible orders, lost appends, reads not showing
// the transaction's own appends, untyped errors) and the dependency cycles among the
// committed transactions. Only OK transactions' reads count as observations; an
// unknown transaction counts as committed once an OK read saw one of its elements.
func Check(h History, o Options) Result {
	a := &analysis{h: h, writer: map[int64]elem{}, committed: map[int]bool{}, order: map[int][]int64{}, final: map[int][]int64{}, appends: map[int]map[int]int{}}
	a.index()
	a.reads()
	a.orders()
	a.lost()
	g := a.graph(o)
	a.out = append(a.out, Cycles(g)...)
	return Result{Anomalies: a.out, Counts: h.Counts()}
}

// index maps every element to its writer and notes untyped errors.
func (a *analysis) index() {
	lastOf := map[[2]int]int64{} // (txn, key) -> last element appended
	for _, t := range a.h {
		if t.ErrClass == UntypedError || t.ErrClass == GarbageRead {
			a.flag(t.ErrClass, -1, t.Err, t.ID)
		}
		if t.Outcome == OK {
			a.committed[t.ID] = true
		}
		for _, o := range t.Ops {
			if o.F != FAppend {
				continue
			}
			if prev, dup := a.writer[o.V]; dup {
				a.flag(GarbageRead, o.K, fmt.Sprintf("element %d appended twice (a workload error)", o.V), prev.txn.ID, t.ID)
				continue
			}
			a.writer[o.V] = elem{txn: t, key: o.K}
			lastOf[[2]int{t.ID, o.K}] = o.V
			if a.appends[t.ID] == nil {
				a.appends[t.ID] = map[int]int{}
			}
			a.appends[t.ID][o.K]++
		}
	}
	for _, v := range lastOf {
		e := a.writer[v]
		e.last = true
		a.writer[v] = e
	}
}

// reads checks each OK read on its own: duplicates, garbage, aborted and
// intermediate reads, the transaction's own appends; and marks unknown writers seen.
func (a *analysis) reads() {
	a.okReads(func(t *Txn, i int, o Op) {
		seen := map[int64]bool{}
		for _, v := range o.Read {
			if seen[v] {
				a.flag(DuplicateElements, o.K, fmt.Sprintf("T%d read %v: %d twice", t.ID, o.Read, v), t.ID)
			}
			seen[v] = true
			w, ok := a.writer[v]
			switch {
			case !ok || w.key != o.K:
				a.flag(GarbageRead, o.K, fmt.Sprintf("T%d read %v: no transaction appended %d to key %d", t.ID, o.Read, v, o.K), t.ID)
			case w.txn.Outcome == Failed:
				a.flag(G1a, o.K, fmt.Sprintf("T%d read %v: %d was appended by T%d, which failed (%s)", t.ID, o.Read, v, w.txn.ID, w.txn.ErrClass), w.txn.ID, t.ID)
			case w.txn.Outcome == Unknown:
				a.committed[w.txn.ID] = true
			}
		}
		if n := len(o.Read); n > 0 {
			if w, ok := a.writer[o.Read[n-1]]; ok && w.txn != t && !w.last && w.txn.Outcome != Failed {
				a.flag(G1b, o.K, fmt.Sprintf("T%d read %v, ending at %d, an intermediate append of T%d", t.ID, o.Read, o.Read[n-1], w.txn.ID), w.txn.ID, t.ID)
			}
		}
		// Own appends before this read must end the list, in order.
		var own []int64
		for _, p := range t.Ops[:i] {
			if p.F == FAppend && p.K == o.K {
				own = append(own, p.V)
			}
		}
		if len(own) > 0 && (len(o.Read) < len(own) || !slices.Equal(o.Read[len(o.Read)-len(own):], own)) {
			a.flag(Internal, o.K, fmt.Sprintf("T%d read %v after appending %v", t.ID, o.Read, own), t.ID)
		}
	})
}

// orders takes each key's longest OK read as its version order and checks that every
// other read is a prefix of it.
func (a *analysis) orders() {
	reader := map[int]int{} // key -> the transaction whose read is the order
	a.okReads(func(t *Txn, _ int, o Op) {
		if _, ok := reader[o.K]; !ok || len(o.Read) > len(a.order[o.K]) {
			a.order[o.K], reader[o.K] = o.Read, t.ID
		}
		if t.Final {
			a.final[o.K] = o.Read
		}
	})
	a.okReads(func(t *Txn, _ int, o Op) {
		long := a.order[o.K]
		if len(o.Read) > len(long) || !slices.Equal(long[:len(o.Read)], o.Read) {
			a.flag(IncompatibleOrder, o.K, fmt.Sprintf("T%d read %v, T%d read %v", t.ID, o.Read, reader[o.K], long), t.ID, reader[o.K])
		}
	})
}

// lost flags every append of a committed transaction missing from the final read of
// its key (when the history has one).
func (a *analysis) lost() {
	for _, t := range a.h {
		if !a.committed[t.ID] {
			continue
		}
		for _, o := range t.Ops {
			if o.F != FAppend {
				continue
			}
			fin, ok := a.final[o.K]
			if ok && !slices.Contains(fin, o.V) {
				a.flag(LostAppend, o.K, fmt.Sprintf("T%d (%s) appended %d; the final read of key %d is %v", t.ID, t.Outcome, o.V, o.K, fin), t.ID)
			}
		}
	}
}

// graph builds the dependency graph of the committed transactions.
func (a *analysis) graph(o Options) *Graph {
	g := NewGraph()
	for id := range a.committed {
		g.AddNode(id)
	}
	useful := func(v int64) (*Txn, bool) {
		w, ok := a.writer[v]
		if !ok || !a.committed[w.txn.ID] {
			return nil, false
		}
		return w.txn, true
	}
	for k, ord := range a.order {
		for i := 1; i < len(ord); i++ {
			t1, ok1 := useful(ord[i-1])
			t2, ok2 := useful(ord[i])
			if ok1 && ok2 {
				g.AddEdge(t1.ID, t2.ID, WW, k)
			}
		}
	}
	a.okReads(func(t *Txn, _ int, o Op) {
		ord := a.order[o.K]
		if n := len(o.Read); n > 0 {
			if w, ok := useful(o.Read[n-1]); ok {
				g.AddEdge(w.ID, t.ID, WR, o.K)
			}
		}
		if len(o.Read) > len(ord) || !slices.Equal(ord[:len(o.Read)], o.Read) {
			return // an incompatible read, flagged already
		}
		// The next version is the first element after the read that another
		// transaction than the last one read appended (a writer's appends to a key
		// are one version; reading part of them is G1b).
		i := len(o.Read)
		if i > 0 {
			lw := a.writer[o.Read[i-1]].txn
			for i < len(ord) && lw != nil && a.writer[ord[i]].txn == lw {
				i++
			}
		}
		if i < len(ord) {
			if w, ok := useful(ord[i]); ok {
				g.AddEdge(t.ID, w.ID, RW, o.K)
			}
		}
	})
	if o.Realtime {
		a.realtime(g)
	}
	return g
}

// realtime adds T1 -> T2 for T1 OK and completed before committed T2 was invoked,
// transitively reduced: each invocation links only from the frontier of completed
// transactions no later completion has covered.
func (a *analysis) realtime(g *Graph) {
	type event struct {
		at     int64
		invoke bool
		t      *Txn
	}
	var evs []event
	for _, t := range a.h {
		if !a.committed[t.ID] {
			continue
		}
		evs = append(evs, event{at: t.Invoke, invoke: true, t: t})
		if t.Outcome == OK && t.Complete != 0 {
			evs = append(evs, event{at: t.Complete, t: t})
		}
	}
	slices.SortStableFunc(evs, func(x, y event) int {
		if c := compareInt(x.at, y.at); c != 0 {
			return c
		}
		switch { // at equal times an invocation is not after the completion
		case x.invoke && !y.invoke:
			return -1
		case !x.invoke && y.invoke:
			return 1
		}
		return 0
	})
	frontier := map[int]bool{}
	preds := map[int][]int{}
	for _, e := range evs {
		if e.invoke {
			for p := range frontier {
				preds[e.t.ID] = append(preds[e.t.ID], p)
				g.AddEdge(p, e.t.ID, RT, -1)
			}
			continue
		}
		for _, p := range preds[e.t.ID] {
			delete(frontier, p)
		}
		frontier[e.t.ID] = true
	}
}
