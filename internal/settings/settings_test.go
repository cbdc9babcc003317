package settings_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/internal/settings"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type policy string

func TestErrorMessage(t *testing.T) {
	cause := errors.New("unknown exporter")
	for _, tc := range []struct {
		err  *settings.Error
		want string
	}{
		{&settings.Error{Field: "Lanes", Value: 0, Expected: "between 1 and 64"}, "rockline: Lanes = 0: expected between 1 and 64"},
		{&settings.Error{Field: "RetryBackoff", Value: 2 * time.Second, Expected: "between 0 and 1s"}, "rockline: RetryBackoff = 2s: expected between 0 and 1s"},
		{&settings.Error{Field: "dir", Value: "", Expected: "a folder"}, `rockline: dir = "": expected a folder`},
		{&settings.Error{Field: "Validation", Value: policy("fast"), Expected: `"parallel" or "serial"`}, `rockline: Validation = "fast": expected "parallel" or "serial"`},
		{&settings.Error{Field: "range start", Value: []byte("z"), Expected: `not after the end "a"`}, `rockline: range start = "z": expected not after the end "a"`},
		{&settings.Error{Field: "Run", Value: nil, Expected: "a non-nil function"}, "rockline: Run = <nil>: expected a non-nil function"},
		{&settings.Error{Field: "OTEL_TRACES_EXPORTER", Value: "zipkin", Expected: `"otlp", "console" or "none"`, Err: cause},
			`rockline: OTEL_TRACES_EXPORTER = "zipkin": expected "otlp", "console" or "none": unknown exporter`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %s\nwant      %s", got, tc.want)
		}
	}
}

// Wrapped by a caller, the error still matches ErrInvalid, is found by errors.As, and
// exposes its cause.
func TestErrorMatching(t *testing.T) {
	cause := errors.New("cause")
	err := fmt.Errorf("open: %w", &settings.Error{Field: "f", Value: 1, Expected: "2", Err: cause})
	if !errors.Is(err, settings.ErrInvalid) {
		t.Errorf("%v does not match ErrInvalid", err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("%v does not match its cause", err)
	}
	var se *settings.Error
	if !errors.As(err, &se) || se.Field != "f" {
		t.Errorf("errors.As(%v) = %v", err, se)
	}
	if errors.Is(&settings.Error{}, cause) {
		t.Error("an error without a cause matches an unrelated error")
	}
}
