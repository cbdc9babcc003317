package lanes

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestNewConfigValidation(t *testing.T) {
	noop := func(int, int) {}
	tests := []struct {
		name         string
		lanes, depth int
		run          func(int, int)
		field        string // "" means valid
		value        string
	}{
		{"lanes zero", 0, 1, noop, "Lanes", "0"},
		{"lanes negative", -1, 1, noop, "Lanes", "-1"},
		{"lanes too many", 65, 1, noop, "Lanes", "65"},
		{"depth zero", 1, 0, noop, "Depth", "0"},
		{"depth too deep", 1, 1<<20 + 1, noop, "Depth", strconv.Itoa(1<<20 + 1)},
		{"nil run", 1, 1, nil, "Run", "<nil>"},
		{"min edges", 1, 1, noop, "", ""},
		{"max lanes", 64, 1, noop, "", ""},
		{"max depth", 1, 1 << 20, noop, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newEach(tc.lanes, tc.depth, tc.run)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("newEach(%d, %d) = %v, want nil", tc.lanes, tc.depth, err)
				}
				defer l.Close()
				if l.Len() != tc.lanes {
					t.Fatalf("Len() = %d, want %d", l.Len(), tc.lanes)
				}
				return
			}
			if l != nil {
				t.Fatalf("New returned non-nil Lanes with error %v", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not *ConfigError", err, err)
			}
			if ce.Field != tc.field {
				t.Fatalf("Field = %q, want %q", ce.Field, tc.field)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("errors.Is(%v, ErrInvalidConfig) = false", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.field, tc.value} {
				if !strings.Contains(msg, want) {
					t.Fatalf("Error() = %q, missing %q", msg, want)
				}
			}
			if tc.field != "Run" && !strings.Contains(msg, "[1, ") {
				t.Fatalf("Error() = %q, missing valid range", msg)
			}
		})
	}
}
