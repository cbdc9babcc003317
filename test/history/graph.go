package history

import (
	"fmt"
	"slices"
	"strings"
)

// EdgeKind is a set of dependency kinds between two transactions.
type EdgeKind uint8

// Dependency kinds, as Elle builds them from list-append version orders.
const (
	// WW: T2 appended the element right after T1's in a key's version order.
	WW EdgeKind = 1 << iota
	// WR: T2 read a list whose last element T1 appended.
	WR
	// RW: T1 read a list of a key, and T2 appended the element that follows it in the
	// key's version order (an anti-dependency).
	RW
	// RT: T1 completed before T2 was invoked (real time).
	RT
)

func (k EdgeKind) String() string {
	var parts []string
	for _, n := range []struct {
		k EdgeKind
		s string
	}{{WW, "ww"}, {WR, "wr"}, {RW, "rw"}, {RT, "rt"}} {
		if k&n.k != 0 {
			parts = append(parts, n.s)
		}
	}
	return strings.Join(parts, "|")
}

// edge is every dependency from one transaction to another, with a key that explains
// each data kind.
type edge struct {
	kinds EdgeKind
	keys  map[EdgeKind]int
}

// Graph is a dependency graph between transactions, by ID.
type Graph struct {
	out   map[int]map[int]*edge
	nodes []int
	has   map[int]bool
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{out: map[int]map[int]*edge{}, has: map[int]bool{}}
}

// AddNode adds a transaction with no edges (a no-op if it is there).
func (g *Graph) AddNode(id int) {
	if !g.has[id] {
		g.has[id] = true
		g.nodes = append(g.nodes, id)
	}
}

// AddEdge adds a dependency of kind k from a to b, explained by key (-1 for RT).
// Self-edges are ignored.
func (g *Graph) AddEdge(a, b int, k EdgeKind, key int) {
	if a == b {
		return
	}
	g.AddNode(a)
	g.AddNode(b)
	m := g.out[a]
	if m == nil {
		m = map[int]*edge{}
		g.out[a] = m
	}
	e := m[b]
	if e == nil {
		e = &edge{keys: map[EdgeKind]int{}}
		m[b] = e
	}
	if e.kinds&k == 0 {
		e.keys[k] = key
	}
	e.kinds |= k
}

// succ returns a's successors through edges having a kind in mask, within in (nil:
// anywhere), sorted so that results do not depend on map order.
func (g *Graph) succ(a int, mask EdgeKind, in map[int]bool) []int {
	var out []int
	for b, e := range g.out[a] {
		if e.kinds&mask != 0 && (in == nil || in[b]) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// SCCs returns the strongly connected components with more than one transaction of
// the subgraph of edges in mask within in (nil: the whole graph), by Tarjan's
// algorithm (iterative, so a long chain cannot exhaust the stack).
func (g *Graph) SCCs(mask EdgeKind, in map[int]bool) [][]int {
	index := map[int]int{}
	low := map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var out [][]int
	next := 0
	type frame struct {
		v    int
		succ []int
		i    int
	}
	nodes := slices.Clone(g.nodes)
	slices.Sort(nodes)
	for _, root := range nodes {
		if in != nil && !in[root] {
			continue
		}
		if _, seen := index[root]; seen {
			continue
		}
		call := []*frame{{v: root, succ: g.succ(root, mask, in)}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := call[len(call)-1]
			if f.i < len(f.succ) {
				w := f.succ[f.i]
				f.i++
				if _, seen := index[w]; !seen {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, &frame{v: w, succ: g.succ(w, mask, in)})
				} else if onStack[w] {
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1]
				low[p.v] = min(low[p.v], low[f.v])
			}
			if low[f.v] == index[f.v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == f.v {
						break
					}
				}
				if len(comp) > 1 {
					slices.Sort(comp)
					out = append(out, comp)
				}
			}
		}
	}
	return out
}

// path returns a shortest path from a to b (a first, b last) through edges in mask
// within in, or nil. With a == b it looks for a cycle through a.
func (g *Graph) path(a, b int, mask EdgeKind, in map[int]bool) []int {
	prev := map[int]int{}
	queue := []int{a}
	visited := map[int]bool{}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.succ(v, mask, in) {
			if w == b {
				p := []int{b, v}
				for x := v; x != a; {
					x = prev[x]
					p = append(p, x)
				}
				slices.Reverse(p)
				if a == b {
					return p[:len(p)-1] // a ... v; the edge v -> a closes it
				}
				return p
			}
			if !visited[w] && w != a {
				visited[w] = true
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return nil
}

// Cycle is a dependency cycle: Txns[i] depends on Txns[i-1], and Txns[0] on the last;
// Kinds[i] is the kind of the edge from Txns[i] to Txns[i+1] (wrapping), Keys[i] its key.
type Cycle struct {
	Txns  []int
	Kinds []EdgeKind
	Keys  []int
}

// String shows the cycle as T1 -ww(k3)-> T2 -rw(k1)-> T1.
func (c Cycle) String() string {
	var b strings.Builder
	for i, id := range c.Txns {
		fmt.Fprintf(&b, "T%d -%s", id, c.Kinds[i])
		if c.Keys[i] >= 0 {
			fmt.Fprintf(&b, "(k%d)", c.Keys[i])
		}
		b.WriteString("-> ")
	}
	fmt.Fprintf(&b, "T%d", c.Txns[0])
	return b.String()
}

// label turns the nodes of a cycle into a Cycle, naming each edge by the first kind
// of prefer it has (prefer lists kinds weakest first, so RW is named only when the
// edge has nothing else allowed).
func (g *Graph) label(nodes []int, prefer []EdgeKind) Cycle {
	c := Cycle{Txns: nodes}
	for i, a := range nodes {
		b := nodes[(i+1)%len(nodes)]
		e := g.out[a][b]
		k, key := EdgeKind(0), -1
		for _, p := range prefer {
			if e != nil && e.kinds&p != 0 {
				k, key = p, e.keys[p]
				break
			}
		}
		c.Kinds = append(c.Kinds, k)
		c.Keys = append(c.Keys, key)
	}
	return c
}
