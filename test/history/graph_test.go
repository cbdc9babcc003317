package history

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tarjan finds exactly the non-trivial components, per edge mask, and a path closes
// a cycle through the component.
func TestGraphSCCs(t *testing.T) {
	g := NewGraph()
	// 1 -> 2 -> 3 -> 1 (ww, wr, rw); 3 -> 4 -> 5 -> 4 (ww); 6 alone; 7 -> 8 only.
	g.AddEdge(1, 2, WW, 0)
	g.AddEdge(2, 3, WR, 0)
	g.AddEdge(3, 1, RW, 0)
	g.AddEdge(3, 4, WW, 0)
	g.AddEdge(4, 5, WW, 0)
	g.AddEdge(5, 4, WW, 0)
	g.AddNode(6)
	g.AddEdge(7, 8, RT, -1)
	g.AddEdge(9, 9, WW, 0) // ignored
	cases := []struct {
		mask EdgeKind
		want [][]int
	}{
		{WW | WR | RW | RT, [][]int{{4, 5}, {1, 2, 3}}},
		{WW | WR, [][]int{{4, 5}}},
		{RT, nil},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, g.SCCs(c.mask, nil)); diff != "" {
			t.Errorf("SCCs(%s) (-want +got):\n%s", c.mask, diff)
		}
	}
	if got := g.path(1, 1, WW|WR|RW, nil); !cmp.Equal(got, []int{1, 2, 3}) {
		t.Errorf("cycle through 1 = %v, want [1 2 3]", got)
	}
	if got := g.path(1, 1, WW|WR, nil); got != nil {
		t.Errorf("cycle through 1 without rw = %v, want none", got)
	}
}

// A long chain does not exhaust the stack (Tarjan is iterative).
func TestGraphLongChain(t *testing.T) {
	g := NewGraph()
	const n = 50000
	for i := range n {
		g.AddEdge(i, i+1, WW, 0)
	}
	g.AddEdge(n, 0, WW, 0)
	comps := g.SCCs(WW, nil)
	if len(comps) != 1 || len(comps[0]) != n+1 {
		t.Fatalf("got %d components, want one of %d", len(comps), n+1)
	}
}
