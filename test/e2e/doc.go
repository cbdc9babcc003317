// Package e2e holds end-to-end tests against real external programs. jaeger_test.go
// runs the bank example against a real Jaeger v2 binary (ROCKLINE_JAEGER_BIN; `make
// jaeger` builds it) and checks the trace tree Jaeger stores.
package e2e
