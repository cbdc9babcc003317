// Package benchmarks compares rockline's commit path with RocksDB's own
// OptimisticTransactionDB (the anchor) and a raw WriteBatch with no validation (the
// ceiling), in one `go test -bench` run. Every engine writes the same bytes: the data
// keys plus one log record per commit holding the write set, which is what a user of
// the native engines would have to write to get rockline's log.
//
//	go test -run '^$' -bench . -count 5 ./test/benchmarks/
//
// The machine these figures come from has 2 shared cores: compare engines within one
// run, as ratios, over medians of several counts (benchstat), never absolute times.
package benchmarks
