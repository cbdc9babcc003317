package jetstream

import (
	"encoding/base64"
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
func (s subjects) parse(subject string) (kind string, a, b []byte, ok bool) {
	rest, found := strings.CutPrefix(subject, s.prefix)
	if !found {
		return "", nil, nil, false
	}
	kind, rest, _ = strings.Cut(rest, ".")
	switch kind {
	case tokKey:
		ft, kt, found := strings.Cut(rest, ".")
		if !found {
			return "", nil, nil, false
		}
		if a, ok = untoken(ft); !ok {
			return "", nil, nil, false
		}
		if b, ok = untoken(kt); !ok {
			return "", nil, nil, false
		}
		return kind, a, b, true
	case tokEvent:
		if a, ok = untoken(rest); !ok {
			return "", nil, nil, false
		}
		return kind, a, nil, true
	case tokMarker, tokCommit, tokProbe:
		return kind, nil, nil, rest == ""
	}
	return "", nil, nil, false
}
