// Package settings defines the one error type rockline returns for a setting it
// refuses: a Config field, a storage option, an argument of New or Open that configures
// something, or an OTEL_* environment variable. It sits at the bottom of the
// dependency graph (it imports only the standard library) so that every public package
// can expose the same type under one name, ConfigError, as an alias:
// errors.As(err, &ce) with a *pipeline.ConfigError catches the error whichever layer
// refused the setting (pipeline, storage, lanes or tracing/otelsetup).
package settings

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrInvalid is matched (errors.Is) by every *Error. Public packages export it as
// ErrInvalidConfig.
var ErrInvalid = errors.New("rockline: invalid setting")

// Error reports one refused setting: which one (Field), the value given (Value) and
// what would have been accepted (Expected); Err is the cause when another package
// refused it first (for example the OpenTelemetry autoexport package), else nil. It
// matches ErrInvalid, and Err through Unwrap.
type Error struct {
	// Field names the setting as the caller wrote it: a Config field
	// ("Lanes", "Families[orders].WriteBufferSize"), an argument ("dir",
	// "family name") or an environment variable ("OTEL_TRACES_EXPORTER").
	Field string
	// Value is the value given, as given (an int, a time.Duration, a string, ...).
	Value any
	// Expected states what is accepted, as a phrase that follows "expected", e.g.
	// "between 1 and 64" or `"parallel" or "serial"`.
	Expected string
	// Err is the underlying cause, or nil.
	Err error
}

// Error renders `rockline: <Field> = <Value>: expected <Expected>`, followed by
// ": <Err>" when there is a cause. A Value of string kind or a []byte is quoted, so an
// empty or odd value stays visible.
func (e *Error) Error() string {
	s := fmt.Sprintf("rockline: %s = %s: expected %s", e.Field, render(e.Value), e.Expected)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the cause, or nil.
func (e *Error) Unwrap() error { return e.Err }

func render(v any) string {
	if b, ok := v.([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	if v != nil && reflect.TypeOf(v).Kind() == reflect.String {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%v", v)
}
