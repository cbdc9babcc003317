package history

import (
	"fmt"
	"strconv"
	"strings"
)

// keyPrefix starts every key the workload writes: key k is "h<k>".
const keyPrefix = "h"

// KeyName is the database key of list key k.
func KeyName(k int) []byte { return []byte(keyPrefix + strconv.Itoa(k)) }

// ParseKey returns the list key a database key names, or false for another key.
func ParseKey(b []byte) (int, bool) {
	s, ok := strings.CutPrefix(string(b), keyPrefix)
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(s)
	return k, err == nil && k >= 0
}

// EncodeList is a list's stored value: its elements in decimal, space-separated.
func EncodeList(l []int64) []byte {
	var b []byte
	for i, v := range l {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return b
}

// DecodeList parses a stored value; an error names the bad element.
func DecodeList(b []byte) ([]int64, error) {
	if len(b) == 0 {
		return nil, nil
	}
	fields := strings.Fields(string(b))
	out := make([]int64, 0, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("history: list element %d %q: %w", i, f, err)
		}
		out = append(out, v)
	}
	return out, nil
}
