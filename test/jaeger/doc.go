// Package jaeger pins the Jaeger all-in-one v2 binary as a Go tool in a module of its
// own: Jaeger's go.mod pins an OpenTelemetry older than rockline's, so it cannot share
// rockline's module. `make jaeger` builds it into a cache outside the tracked tree.
package jaeger
