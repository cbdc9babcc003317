package history

import "slices"

// maxSingleTries bounds the anti-dependency edges tried as the one rw edge of a
// G-single cycle in one component, so a history that is wrong everywhere still checks
// in bounded time (it is reported as G2 then, still a failure).
const maxSingleTries = 500

// Cycles finds the dependency cycles of g and classifies each strongly connected
// component by the weakest cycle it holds, as Elle does: G0 (ww only), G1c (ww and
// wr), G-single (exactly one rw), G2 (any); each with "-realtime" appended when only a
// cycle through a real-time edge exists. It returns one anomaly per component.
func Cycles(g *Graph) []Anomaly {
	var out []Anomaly
	for _, comp := range g.SCCs(WW|WR|RW|RT, nil) {
		in := map[int]bool{}
		for _, id := range comp {
			in[id] = true
		}
		if c, kind, ok := classify(g, in, 0); ok {
			out = append(out, cycleAnomaly(kind, c))
		} else if c, kind, ok := classify(g, in, RT); ok {
			out = append(out, cycleAnomaly(kind+Realtime, c))
		}
	}
	return out
}

func cycleAnomaly(kind string, c Cycle) Anomaly {
	return Anomaly{Kind: kind, Txns: slices.Clone(c.Txns), Key: -1, Detail: c.String()}
}

// classify looks in the component in for the weakest cycle whose edges are data
// dependencies plus extra (0 or RT), and returns it with its kind.
func classify(g *Graph, in map[int]bool, extra EdgeKind) (Cycle, string, bool) {
	prefer := []EdgeKind{WW, WR, RT, RW}
	for _, step := range []struct {
		mask EdgeKind
		kind string
	}{{WW | extra, G0}, {WW | WR | extra, G1c}} {
		if c, ok := anyCycle(g, step.mask, in, prefer); ok {
			return c, step.kind, true
		}
	}
	if c, ok := singleRW(g, in, WW|WR|extra, prefer); ok {
		return c, GSingle, true
	}
	if c, ok := anyCycle(g, WW|WR|RW|extra, in, prefer); ok {
		return c, G2, true
	}
	return Cycle{}, "", false
}

// anyCycle returns a shortest cycle through some transaction of a component of the
// subgraph of mask within in, if there is one.
func anyCycle(g *Graph, mask EdgeKind, in map[int]bool, prefer []EdgeKind) (Cycle, bool) {
	comps := g.SCCs(mask, in)
	if len(comps) == 0 {
		return Cycle{}, false
	}
	sub := map[int]bool{}
	for _, id := range comps[0] {
		sub[id] = true
	}
	p := g.path(comps[0][0], comps[0][0], mask, sub)
	if p == nil {
		return Cycle{}, false
	}
	return g.label(p, onlyIn(prefer, mask)), true
}

// singleRW looks for a cycle of one rw edge a->b closed by a path b->...->a of edges
// in rest.
func singleRW(g *Graph, in map[int]bool, rest EdgeKind, prefer []EdgeKind) (Cycle, bool) {
	nodes := make([]int, 0, len(in))
	for id := range in {
		nodes = append(nodes, id)
	}
	slices.Sort(nodes)
	tries := 0
	for _, a := range nodes {
		for _, b := range g.succ(a, RW, in) {
			if tries++; tries > maxSingleTries {
				return Cycle{}, false
			}
			p := g.path(b, a, rest, in)
			if p == nil {
				continue
			}
			c := g.label(p, onlyIn(prefer, rest)) // b ... a, then a -rw-> b closes it
			last := len(c.Txns) - 1
			c.Kinds[last], c.Keys[last] = RW, g.out[a][b].keys[RW]
			return c, true
		}
	}
	return Cycle{}, false
}

func onlyIn(prefer []EdgeKind, mask EdgeKind) []EdgeKind {
	var out []EdgeKind
	for _, k := range prefer {
		if k&mask != 0 {
			out = append(out, k)
		}
	}
	return out
}
