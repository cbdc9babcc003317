package history

// Builders for hand-made histories: each transaction is invoked and completed at the
// next two ticks of a clock, in the order built, so real-time order is the order of
// the list.

type builder struct {
	h     History
	clock int64
}

func (b *builder) add(id int, out Outcome, ops ...Op) *Txn {
	b.clock++
	t := &Txn{ID: id, Client: id, Invoke: b.clock, Outcome: out, Ops: ops}
	b.clock++
	if out != Unknown {
		t.Complete = b.clock
	}
	b.h = append(b.h, t)
	return t
}

// concurrent adds transactions invoked together and completed together.
func (b *builder) concurrent(ts ...*Txn) {
	b.clock++
	inv := b.clock
	b.clock++
	for _, t := range ts {
		t.Invoke = inv
		if t.Outcome != Unknown {
			t.Complete = b.clock
		}
		b.h = append(b.h, t)
	}
}

func tx(id int, out Outcome, ops ...Op) *Txn {
	return &Txn{ID: id, Client: id, Outcome: out, Ops: ops}
}

func final(id int, ops ...Op) *Txn {
	return &Txn{ID: id, Client: -1, Outcome: OK, Ops: ops, Final: true}
}

func r(k int, vs ...int64) Op {
	if vs == nil {
		vs = []int64{}
	}
	return Op{F: FRead, K: k, Read: vs}
}

func ap(k int, v int64) Op { return Op{F: FAppend, K: k, V: v} }
