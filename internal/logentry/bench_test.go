package logentry

import (
	"fmt"
	"testing"
)

func entry64Writes() Entry {
	e := Entry{Position: 1 << 32, Time: 1_700_000_000_000_000_000, Events: []Event{
		{ID: "0190f0a2-7c1e-7d3a-9b1e-3f6c2a9d8e71", Type: "OrderPlaced", Data: make([]byte, 256), Metadata: make([]byte, 64)},
	}}
	for i := range 64 {
		w := Write{Family: "state", Key: fmt.Appendf(nil, "orders/%08d", i), Value: make([]byte, 128)}
		if i%8 == 7 {
			w.Delete, w.Value = true, nil
		}
		e.Writes = append(e.Writes, w)
	}
	return e
}

func BenchmarkEncode64Writes(b *testing.B) {
	e := entry64Writes()
	buf := make([]byte, 0, Size(&e))
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(Size(&e)))
		for b.Loop() {
			buf = Append(buf[:0], &e)
		}
	})
	b.Run("Encoder", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(Size(&e)))
		for b.Loop() {
			enc := NewEncoder(buf[:0], e.Position, e.Time, false, len(e.Events), len(e.Writes))
			for i := range e.Events {
				ev := &e.Events[i]
				enc.Event(ev.ID, ev.Type, ev.Data, ev.Metadata)
			}
			for i := range e.Writes {
				w := &e.Writes[i]
				enc.Write(w.Family, w.Key, w.Value, w.Delete)
			}
			buf = enc.Finish()
		}
	})
	b.Run("AppendNil", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(Size(&e)))
		for b.Loop() {
			_ = Append(nil, &e)
		}
	})
}

func BenchmarkDecode64Writes(b *testing.B) {
	e := entry64Writes()
	enc := Append(nil, &e)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := Decode(e.Position, enc); err != nil {
			b.Fatal(err)
		}
	}
}
