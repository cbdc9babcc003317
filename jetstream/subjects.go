package jetstream

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// The subject scheme of one partition, under its prefix P (Config.Subject):
//
//	P.k.<family>.<key>   one subject per key: its messages are the key's versions; the
//	                     last one at or below a position is the key's value there
//	                     (header Rl-Op: del marks a delete)
//	P.e.<stream>         one subject per event stream: its messages are the stream's
//	                     events in order; P.e._ holds events on no stream
//	P.m                  read markers: an empty message whose expectation checks a
//	                     key or stream only read (Nats-Expected-Last-Subject-Sequence-Subject)
//	P.c                  commit markers: the last message of every commit, so its
//	                     sequence is the commit's position (also abort markers)
//	P.x                  never written: the target of read-only message-ID probes
//	P.f.<family>.<shard> the family's catalog record (its generation and whether it is
//	                     dropped), the same in each of FamilyShards shards (families.go)
//
// A family's keys of generation 1 (every family never dropped) live under the family
// token itself; generation g >= 2 under "<family token>~<g>", P.k.<family>~<g>.<key>,
// so a re-created family starts empty and the old generation's subjects stay apart.
//
// family, key and stream are tokens: "_" for an empty value, otherwise the value in
// unpadded base64url. Base64url has no '.', '*', '>' or whitespace, and "_" alone is
// not a valid base64 string, so every value maps to exactly one token and back.
const (
	tokKey    = "k"
	tokEvent  = "e"
	tokMarker = "m"
	tokCommit = "c"
	tokProbe  = "x"
	tokFamily = "f"
	// genSep separates a family's token from its generation (>= 2) in key subjects:
	// base64url never holds it.
	genSep = "~"
)

var b64 = base64.RawURLEncoding

// token encodes b as one subject token.
func token(b []byte) string {
	if len(b) == 0 {
		return "_"
	}
	return b64.EncodeToString(b)
}

// untoken decodes a token made by token.
func untoken(t string) ([]byte, bool) {
	if t == "_" {
		return nil, true
	}
	b, err := b64.DecodeString(t)
	return b, err == nil
}

// tokenLen is len(token(b)) without encoding.
func tokenLen(n int) int {
	if n == 0 {
		return 1
	}
	return b64.EncodedLen(n)
}

type subjects struct {
	prefix string // "P."
}

func (s subjects) key(family string, key []byte) string {
	return s.prefix + tokKey + "." + token([]byte(family)) + "." + token(key)
}
func (s subjects) family(family string) string {
	return s.prefix + tokKey + "." + token([]byte(family)) + ".*"
}

// famToken is the family token of generation gen (0 and 1: the bare token).
func famToken(family string, gen uint64) string {
	t := token([]byte(family))
	if gen > 1 {
		t += genSep + strconv.FormatUint(gen, 10)
	}
	return t
}

// keyGen is the subject of key in generation gen of family.
func (s subjects) keyGen(family string, gen uint64, key []byte) string {
	return s.prefix + tokKey + "." + famToken(family, gen) + "." + token(key)
}

// familyGen matches every key of generation gen of family.
func (s subjects) familyGen(family string, gen uint64) string {
	return s.prefix + tokKey + "." + famToken(family, gen) + ".*"
}

// keyGenLen is len(s.keyGen(family, gen, key)) without building it.
func (s subjects) keyGenLen(family string, gen uint64, key []byte) int {
	n := s.keyLen(family, key)
	if gen > 1 {
		n += len(genSep) + len(strconv.FormatUint(gen, 10))
	}
	return n
}

// catalog is the subject of shard of family's catalog record.
func (s subjects) catalog(family string, shard int) string {
	return s.prefix + tokFamily + "." + token([]byte(family)) + "." + strconv.Itoa(shard)
}
func (s subjects) stream(stream string) string {
	return s.prefix + tokEvent + "." + token([]byte(stream))
}
func (s subjects) marker() string { return s.prefix + tokMarker }
func (s subjects) commit() string { return s.prefix + tokCommit }
func (s subjects) probe() string  { return s.prefix + tokProbe }

// keyLen is len(s.key(family, key)) without building it.
func (s subjects) keyLen(family string, key []byte) int {
	return len(s.prefix) + len(tokKey) + 2 + tokenLen(len(family)) + tokenLen(len(key))
}

// subjectKind splits a subject of this partition: kind is one of the tok* constants,
// and for keys and events a and b are the decoded family and key, or the stream.
// A key of a generation above 1 parses too; parseGen also returns the generation.
func (s subjects) parse(subject string) (kind string, a, b []byte, ok bool) {
	kind, a, b, _, ok = s.parseGen(subject)
	return kind, a, b, ok
}

// parseGen is parse that also returns a key's generation (1 for the bare family
// token) and a catalog record's shard (in gen).
func (s subjects) parseGen(subject string) (kind string, a, b []byte, gen uint64, ok bool) {
	gen = 1
	rest, found := strings.CutPrefix(subject, s.prefix)
	if !found {
		return "", nil, nil, 0, false
	}
	kind, rest, _ = strings.Cut(rest, ".")
	switch kind {
	case tokKey:
		ft, kt, found := strings.Cut(rest, ".")
		if !found {
			return "", nil, nil, 0, false
		}
		if ft, gt, hasGen := strings.Cut(ft, genSep); hasGen {
			g, err := strconv.ParseUint(gt, 10, 64)
			if err != nil || g < 2 || strconv.FormatUint(g, 10) != gt {
				return "", nil, nil, 0, false
			}
			gen, rest = g, ft+"."+kt
		}
		ft, kt, _ = strings.Cut(rest, ".")
		if a, ok = untoken(ft); !ok {
			return "", nil, nil, 0, false
		}
		if b, ok = untoken(kt); !ok {
			return "", nil, nil, 0, false
		}
		return kind, a, b, gen, true
	case tokFamily:
		ft, st, found := strings.Cut(rest, ".")
		if !found {
			return "", nil, nil, 0, false
		}
		shard, err := strconv.ParseUint(st, 10, 16)
		if err != nil || shard >= FamilyShards {
			return "", nil, nil, 0, false
		}
		if a, ok = untoken(ft); !ok {
			return "", nil, nil, 0, false
		}
		return kind, a, nil, shard, true
	case tokEvent:
		if a, ok = untoken(rest); !ok {
			return "", nil, nil, 0, false
		}
		return kind, a, nil, 1, true
	case tokMarker, tokCommit, tokProbe:
		return kind, nil, nil, 0, rest == ""
	}
	return "", nil, nil, 0, false
}
