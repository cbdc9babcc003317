package eventstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rockline/rockline/pipeline"
)

// Limits on indexes.
const (
	MaxIndexes       = 16   // indexes of one store
	MaxIndexNameLen  = 64   // bytes of an index name
	MaxIndexValueLen = 1024 // bytes of a value an event is indexed under
)

// IndexKind is what an index keys events by.
type IndexKind uint8

const (
	// ByType indexes an event under its type.
	ByType IndexKind = 1 + iota
	// ByCategory indexes an event under its stream's category: the stream name up to
	// its first '-' ("order" for "order-17"); an event of a stream whose name has no
	// '-' after its first byte has no category and is not in the index.
	ByCategory
	// ByTag indexes an event under each of its tags.
	ByTag
	// BySelector indexes an event under the values its index's Select returns.
	BySelector
)

// String returns the kind's name: type, category, tag or selector.
func (k IndexKind) String() string {
	switch k {
	case ByType:
		return "type"
	case ByCategory:
		return "category"
	case ByTag:
		return "tag"
	case BySelector:
		return "selector"
	}
	return fmt.Sprintf("IndexKind(%d)", uint8(k))
}

// Index is a secondary index of a store's events, kept in the commit that appends
// them: for every event an append writes, one entry per value the index keys it by,
// ordered by log position, so ReadIndex reads the events under one value in log
// order without scanning the log. Indexes are declared in Config.Indexes.
type Index struct {
	// Name names the index in ReadIndex and in the store: 1..MaxIndexNameLen bytes of
	// A-Z a-z 0-9 _ . -.
	Name string
	// Kind is what the index keys events by.
	Kind IndexKind
	// Select, for a BySelector index only, returns the values the event e of stream
	// is indexed under (none: not indexed); each 1..MaxIndexValueLen bytes, a value
	// returned twice counts once. It must depend on nothing but its arguments, and
	// every program that opens the database must declare the same function under the
	// same name: the store keeps its entries, not the function.
	Select func(stream string, e pipeline.Event) []string
}

// TypeIndex returns the index named "type", by event type.
func TypeIndex() Index { return Index{Name: "type", Kind: ByType} }

// CategoryIndex returns the index named "category", by the stream's category.
func CategoryIndex() Index { return Index{Name: "category", Kind: ByCategory} }

// TagIndex returns the index named "tag", by each tag of an event.
func TagIndex() Index { return Index{Name: "tag", Kind: ByTag} }

// SelectorIndex returns the index named name whose values select returns.
func SelectorIndex(name string, selectFn func(stream string, e pipeline.Event) []string) Index {
	return Index{Name: name, Kind: BySelector, Select: selectFn}
}

// Config configures a Store (NewWithConfig); the zero Config is New's.
type Config struct {
	// Indexes are the indexes the store keeps. Empty: those the database already
	// keeps (see NewWithConfig).
	Indexes []Index
}

// Validate checks the configuration: at most MaxIndexes indexes with distinct valid
// names, each of a known kind, with a Select exactly when BySelector. Its error is an
// *pipeline.ArgumentError naming the field.
func (c Config) Validate() error {
	const op = "eventstore.Config"
	if len(c.Indexes) > MaxIndexes {
		return &pipeline.ArgumentError{Op: op, Arg: "Indexes", Reason: fmt.Sprintf("%d indexes exceed %d", len(c.Indexes), MaxIndexes)}
	}
	for i, ix := range c.Indexes {
		arg := fmt.Sprintf("Indexes[%d]", i)
		if err := checkIndexName(op, arg+".Name", ix.Name); err != nil {
			return err
		}
		for _, other := range c.Indexes[:i] {
			if other.Name == ix.Name {
				return &pipeline.ArgumentError{Op: op, Arg: arg + ".Name", Reason: fmt.Sprintf("%q is declared twice", ix.Name)}
			}
		}
		switch {
		case ix.Kind < ByType || ix.Kind > BySelector:
			return &pipeline.ArgumentError{Op: op, Arg: arg + ".Kind", Reason: fmt.Sprintf("%v is not ByType, ByCategory, ByTag or BySelector", ix.Kind)}
		case ix.Kind == BySelector && ix.Select == nil:
			return &pipeline.ArgumentError{Op: op, Arg: arg + ".Select", Reason: "a BySelector index needs a Select function"}
		case ix.Kind != BySelector && ix.Select != nil:
			return &pipeline.ArgumentError{Op: op, Arg: arg + ".Select", Reason: fmt.Sprintf("only a BySelector index has one, not a %v index", ix.Kind)}
		}
	}
	return nil
}

func checkIndexName(op, arg, name string) error {
	if name == "" || len(name) > MaxIndexNameLen {
		return &pipeline.ArgumentError{Op: op, Arg: arg, Reason: fmt.Sprintf("%q is not 1..%d bytes", name, MaxIndexNameLen)}
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return &pipeline.ArgumentError{Op: op, Arg: arg, Reason: fmt.Sprintf("%q holds %q; want A-Z a-z 0-9 _ . -", name, c)}
		}
	}
	return nil
}

func checkIndexValue(op, arg, value string) error {
	switch {
	case value == "" || len(value) > MaxIndexValueLen:
		return &pipeline.ArgumentError{Op: op, Arg: arg, Reason: fmt.Sprintf("%d bytes, want 1..%d", len(value), MaxIndexValueLen)}
	case !utf8.ValidString(value):
		return &pipeline.ArgumentError{Op: op, Arg: arg, Reason: "must be valid UTF-8"}
	}
	return nil
}

// ErrIndexMismatch is matched (errors.Is) by an *IndexMismatchError.
var ErrIndexMismatch = errors.New("rockline: index configuration differs from the store's")

// IndexMismatchError is returned by NewWithConfig when the indexes declared disagree
// with those the database keeps or with those another Store of the same open
// database declared, and by appends of a Store that was not given an index's Select.
type IndexMismatchError struct {
	Index  string // the index in question
	Reason string
}

// Error names the index and what disagrees.
func (e *IndexMismatchError) Error() string {
	return fmt.Sprintf("rockline: index %q: %s", e.Index, e.Reason)
}

// Is matches ErrIndexMismatch.
func (e *IndexMismatchError) Is(target error) bool { return target == ErrIndexMismatch }

// values appends to dst the values of e, an event of stream, under ix, checked and
// without duplicates; a selector's bad value is an *pipeline.ArgumentError naming
// where's event (where is called only then, so an append formats no name).
func (ix *Index) values(op string, where func() string, stream string, e *pipeline.Event, dst []string) ([]string, error) {
	switch ix.Kind {
	case ByType:
		if e.Type != "" {
			dst = append(dst, e.Type)
		}
	case ByCategory:
		if c, ok := category(stream); ok {
			dst = append(dst, c)
		}
	case ByTag:
		dst = append(dst, e.Tags...) // distinct, as pipeline.CheckEvents requires
	case BySelector:
		if !ix.computable() {
			return dst, &IndexMismatchError{Index: ix.Name, Reason: "this Store was not given the index's Select: declare it in Config.Indexes to append"}
		}
		start := len(dst)
		for _, v := range ix.Select(stream, *e) {
			if err := checkIndexValue(op, "", v); err != nil {
				var ae *pipeline.ArgumentError
				if errors.As(err, &ae) {
					ae.Arg = fmt.Sprintf("%s: index %q value", where(), ix.Name)
				}
				return dst[:start], err
			}
			if !slices.Contains(dst[start:], v) {
				dst = append(dst, v)
			}
		}
	}
	return dst, nil
}

// computable reports whether this Store can compute ix's values: a selector index
// adopted without its function cannot.
func (ix *Index) computable() bool { return ix.Kind != BySelector || ix.Select != nil }

// category returns the category of stream: the name up to its first '-', when one
// follows at least one byte.
func category(stream string) (string, bool) {
	i := strings.IndexByte(stream, '-')
	if i <= 0 {
		return "", false
	}
	return stream[:i], true
}

// sameIndexes reports whether a and b declare the same names with the same kinds,
// in any order.
func sameIndexes(a, b []Index) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !hasIndex(b, x.Name, x.Kind) {
			return false
		}
	}
	return true
}

// hasIndex reports whether set holds an index named name of kind kind (any kind when
// kind is 0).
func hasIndex(set []Index, name string, kind IndexKind) bool {
	return slices.ContainsFunc(set, func(x Index) bool { return x.Name == name && (kind == 0 || x.Kind == kind) })
}

// indexEntries are the index entries of an append's events: prefix i is
// buf[ends[i-1]:ends[i]], of the append's event events[i].
type indexEntries struct {
	buf    []byte
	ends   []int
	events []int
}

// indexEntries computes the entries of events appended to stream, checking every
// selector's values before the append writes anything.
func (s *Store) indexEntries(op, stream string, events []pipeline.Event) (indexEntries, error) {
	var out indexEntries
	if len(s.indexes) == 0 {
		return out, nil
	}
	var vals []string
	for i := range events {
		for j := range s.indexes {
			ix := &s.indexes[j]
			var err error
			if vals, err = ix.values(op, func() string { return fmt.Sprintf("events[%d]", i) }, stream, &events[i], vals[:0]); err != nil {
				return indexEntries{}, err
			}
			for _, v := range vals {
				out.buf = indexPrefix(out.buf, ix.Name, v)
				out.ends = append(out.ends, len(out.buf))
				out.events = append(out.events, i)
			}
		}
	}
	return out, nil
}

// put writes the entries in tx with keys made at commit; first is the index in the
// commit's entry of the append's first event.
func (en *indexEntries) put(s *Store, tx *pipeline.Txn, first int) error {
	var payload []byte
	start := 0
	for i, end := range en.ends {
		payload = indexPayload(payload[:0], en.buf[start:end], first+en.events[i])
		if err := tx.PutKeyAtCommit(s.cf, indexKeyCodec, payload, nil); err != nil {
			return err
		}
		start = end
	}
	return nil
}
