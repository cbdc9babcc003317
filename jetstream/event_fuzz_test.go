package jetstream

import (
	"slices"
	"testing"

	"github.com/rockline/rockline/pipeline"
)

// FuzzDecodeEvent: decodeEvent never panics on any payload, and every event
// encodeEvent frames (with tags or without) decodes to itself.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(nil), "placed", "", []byte("meta"), []byte("data"))
	f.Add([]byte{0, 1, 't', 1, 1, 'a', 0}, "enrolled", "course:7\x00student:ada", []byte{}, []byte("{}"))
	f.Add([]byte{5, 'a'}, "注文", "ünï", []byte(nil), []byte(nil))
	f.Fuzz(func(t *testing.T, raw []byte, typ, tagList string, meta, data []byte) {
		decodeEvent(raw) // must not panic
		var tags []string
		for _, tag := range splitTags(tagList) {
			if tag != "" {
				tags = append(tags, tag)
			}
		}
		ev := pipeline.Event{Type: typ, Tags: tags, Metadata: meta, Data: data}
		if pipeline.CheckEvents("fuzz", []pipeline.Event{ev}) != nil {
			return
		}
		gt, gtags, gm, gd, ok := decodeEvent(encodeEvent(ev))
		if !ok || gt != typ || !slices.Equal(gtags, tags) || string(gm) != string(meta) || string(gd) != string(data) {
			t.Fatalf("round trip of %q %q %q %q: %v %q %q %q %q", typ, tags, meta, data, ok, gt, gtags, gm, gd)
		}
	})
}

// splitTags splits s at NUL bytes.
func splitTags(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
