# rockline: `make demo` runs the main example, `make test` runs every test.
# Both install what is missing (librocksdb-dev through apt) before they build.

GO      ?= go
PKGS    ?= ./...
ROCKSDB_HEADER ?= /usr/include/rocksdb/c.h
export CGO_ENABLED = 1

# Jaeger's all-in-one v2 binary, built from the Go module proxy in its own module
# (test/jaeger) and cached outside the tracked tree; rebuilt only when missing.
JAEGER_VERSION ?= v1.76.0
JAEGER_CACHE   ?= $(HOME)/.cache/rockline
JAEGER_BIN     ?= $(JAEGER_CACHE)/jaeger-$(JAEGER_VERSION)


.PHONY: hygiene all deps bench-deps build test demo bench bench-go fmt lint vet clean jaeger jaeger-demo crash soak nats-server test-jetstream demo-cluster

all: build

# deps installs Debian's librocksdb-dev (RocksDB 7.8.3, matched by grocksdb v1.7.15)
# when its header is missing: apt-get update first when apt does not know the
# package, sudo when not root, a clear message when neither works. It stops with a
# message naming the versions when apt offers, or the headers are, another RocksDB
# (Debian trixie ships 9.10, which grocksdb v1.7.15 does not compile against).
deps:
	@if [ ! -f $(ROCKSDB_HEADER) ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "rockline: librocksdb-dev is missing, and installing it needs root or sudo." >&2; \
	       echo "rockline: run 'apt-get install librocksdb-dev' as root, then try again." >&2; exit 1; fi; \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "rockline: librocksdb-dev is missing and this machine has no apt-get; install RocksDB 7.8 headers and libraries by hand." >&2; exit 1; fi; \
	  if [ -z "$$(apt-cache policy librocksdb-dev 2>/dev/null | grep 'Candidate:' | grep -v '(none)')" ]; then \
	    echo "rockline: apt does not know librocksdb-dev yet; running apt-get update"; \
	    $$SUDO apt-get update -q || { echo "rockline: apt-get update failed" >&2; exit 1; }; \
	  fi; \
	  CANDIDATE=$$(apt-cache policy librocksdb-dev 2>/dev/null | awk '/Candidate:/ {print $$2}'); \
	  case "$$CANDIDATE" in 7.8.*) ;; *) \
	    echo "rockline: apt offers librocksdb-dev $$CANDIDATE; rockline's binding, grocksdb v1.7.15, builds against RocksDB 7.8 only (Debian bookworm's librocksdb-dev 7.8.3; trixie's 9.10 does not compile)." >&2; \
	    echo "rockline: use Debian bookworm, or install RocksDB 7.8 headers and libraries by hand (CGO_CFLAGS and CGO_LDFLAGS pointing at them, ROCKSDB_HEADER at its c.h)." >&2; exit 1;; esac; \
	  echo "rockline: installing librocksdb-dev $$CANDIDATE"; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q librocksdb-dev || \
	    { echo "rockline: could not install librocksdb-dev with apt-get" >&2; exit 1; }; \
	fi
	@V=$$(dirname $(ROCKSDB_HEADER))/version.h; \
	MAJOR=$$(awk '/define ROCKSDB_MAJOR/ {print $$3}' $$V 2>/dev/null); MINOR=$$(awk '/define ROCKSDB_MINOR/ {print $$3}' $$V 2>/dev/null); \
	if [ "$$MAJOR.$$MINOR" != "7.8" ]; then \
	  echo "rockline: the RocksDB headers in $$(dirname $(ROCKSDB_HEADER)) are version $$MAJOR.$$MINOR; rockline's binding, grocksdb v1.7.15, builds against RocksDB 7.8 only (Debian bookworm's librocksdb-dev 7.8.3; trixie's 9.10 does not compile)." >&2; \
	  echo "rockline: use Debian bookworm's librocksdb-dev, or install RocksDB 7.8 by hand (CGO_CFLAGS and CGO_LDFLAGS pointing at it, ROCKSDB_HEADER at its c.h)." >&2; exit 1; \
	fi

build: deps
	$(GO) build $(PKGS)

# test runs every package with -race, the Jaeger end-to-end test included (it needs
# the cached Jaeger binary, which `make jaeger` builds the first time).
# The race detector's instrumentation allocates, so the allocation guarantees (tests
# named *Alloc*) are skipped under -race; the second line runs them without it.
# On a cold machine Jaeger's build (minutes of compiling) runs beside the JetStream
# module's tests, which spend most of their time waiting on elections, timeouts and
# fsyncs; the build runs at the lowest CPU priority (nice 19), so it takes only what
# the tests leave and never starves their deadlines. The end-to-end test runs last,
# once both are done.
E2E_PKG   := ./test/e2e
CORE_PKGS  = $(shell $(GO) list ./... | grep -v '/test/e2e$$')
test: hygiene deps bench-deps vet
	$(GO) test -race -timeout 30m $(CORE_PKGS)
	$(GO) test -count=1 -run 'Alloc' ./internal/logentry/
	cd test/bench && $(GO) vet ./... && ROCKLINE_REQUIRE_PG=1 $(GO) test -race -timeout 15m ./...
	$(MAKE) --no-print-directory -j2 --output-sync=target test-jetstream jaeger
	ROCKLINE_JAEGER_BIN=$(JAEGER_BIN) ROCKLINE_REQUIRE_JAEGER=1 $(GO) test -race -timeout 10m $(E2E_PKG)

# hygiene fails on a tracked executable or a tracked file over 1 MB (test/hygiene.sh).
hygiene:
	@bash test/hygiene.sh

demo: deps
	$(GO) run ./examples/orders

# bench runs the harness's quick mode (under 5 minutes on 2 cores); BENCH_FLAGS=
# (empty) runs the full set. Its SVG charts go to BENCH_CHARTS, next to RESULTS.md
# (BENCH_CHARTS= for none); `go -C test/bench run . --charts-from FILE.jsonl --charts DIR`
# redraws them from a saved run's JSON lines.
# The harness is its own module (test/bench/go.mod): Badger, pgx, nats-server and
# gonum/plot, which only it uses, stay out of the library's go.mod. A quick run's
# charts go to a scratch folder, so they never replace the full run's beside RESULTS.md.
BENCH_FLAGS ?= --quick
BENCH_CHARTS ?= $(if $(filter --quick,$(BENCH_FLAGS)),$(or $(TMPDIR),/tmp)/rockline-bench-charts,$(CURDIR)/test/bench/charts)
bench: deps bench-deps
	$(GO) -C test/bench run . $(if $(BENCH_CHARTS),--charts $(BENCH_CHARTS)) $(BENCH_FLAGS)

# bench-deps installs Debian's PostgreSQL 15, the harness's appends scenario's third
# engine (the harness makes, starts and stops its own cluster on 127.0.0.1), when it
# is missing.
PG_INITDB ?= /usr/lib/postgresql/15/bin/initdb
bench-deps:
	@if [ ! -x $(PG_INITDB) ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "rockline: postgresql-15 is missing, and installing it needs root or sudo: apt-get install postgresql-15" >&2; exit 1; fi; \
	  if [ -z "$$(apt-cache policy postgresql-15 2>/dev/null | grep 'Candidate:' | grep -v '(none)')" ]; then $$SUDO apt-get update -q; fi; \
	  echo "rockline: installing postgresql-15 for the harness's appends scenario"; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q postgresql-15 || \
	    { echo "rockline: could not install postgresql-15 with apt-get" >&2; exit 1; }; \
	fi

# bench-go runs the Go benchmarks side by side (rockline, native OCC, raw batch).
bench-go: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 5 ./test/benchmarks/

jaeger:
	@if [ ! -x "$(JAEGER_BIN)" ]; then \
	  echo "rockline: building Jaeger $(JAEGER_VERSION) into $(JAEGER_BIN) (about 5-11 minutes cold, cached after)"; \
	  mkdir -p "$(JAEGER_CACHE)" && \
	  cd test/jaeger && nice -n 19 $(GO) build -trimpath -ldflags='-s -w' -o "$(JAEGER_BIN).tmp" github.com/jaegertracing/jaeger/cmd/jaeger && \
	  mv "$(JAEGER_BIN).tmp" "$(JAEGER_BIN)"; \
	fi

# nats-server builds the NATS server binary (for clusters of child processes and
# `make demo-cluster`) from the Go module proxy with `go install pkg@version`, at the
# version the jetstream module requires, so the binary and the embedded test cluster
# are the same server; cached outside the tracked tree, rebuilt only when missing.
NATS_SERVER_VERSION ?= $(shell awk '$$1 == "github.com/nats-io/nats-server/v2" {print $$2}' jetstream/go.mod)
NATS_SERVER_BIN     ?= $(JAEGER_CACHE)/nats-server-$(NATS_SERVER_VERSION)
nats-server:
	@if [ -z "$(NATS_SERVER_VERSION)" ]; then echo "rockline: no nats-server version in jetstream/go.mod; set NATS_SERVER_VERSION" >&2; exit 1; fi
	@if [ ! -x "$(NATS_SERVER_BIN)" ]; then \
	  echo "rockline: building nats-server $(NATS_SERVER_VERSION) into $(NATS_SERVER_BIN) (about 40 s cold, cached after)"; \
	  mkdir -p "$(JAEGER_CACHE)" && TMPBIN=$$(mktemp -d) && \
	  CGO_ENABLED=0 GOBIN=$$TMPBIN $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION) && \
	  mv "$$TMPBIN/nats-server" "$(NATS_SERVER_BIN)" && rmdir "$$TMPBIN"; \
	fi

# demo-cluster runs the orders example on a 3-node NATS JetStream cluster on
# 127.0.0.1 (the nats-server binary built from the module proxy and cached, as
# Jaeger's is): the same service code as `make demo`, one partition with 3 replicas,
# through the jetstreamfx module. PORT_BASE=N moves its ports (default 14222..).
demo-cluster: deps nats-server
	bash jetstream/examples/orders/cluster.sh "$(NATS_SERVER_BIN)"

# test-jetstream runs the JetStream engine's module (its own go.mod) with -race,
# against the embedded 3-node cluster its TestMain starts on 127.0.0.1: its own tests
# and the core's conformance suite (test/conformance) through its adapter; its
# failover tests (about 40 s) stop, SIGKILL and, as root, cut off the stream leader
# under load (child-process nodes, network namespaces); ROCKLINE_FAILOVER_LONG=1
# makes each phase 10x longer. Its history test (about 2.5 minutes) runs every fault
# schedule once under list-append clients. `make test` runs it last.
test-jetstream: deps
	cd jetstream && $(GO) vet ./... && $(GO) test -race -timeout 15m ./...

# jaeger-demo starts Jaeger on loopback, runs the bank service with a load exporting
# to it, and prints the slowest trace as a tree.
jaeger-demo: deps jaeger
	bash test/jaeger/demo.sh "$(JAEGER_BIN)"

# crash runs the long forms of the crash-recovery harness (CRASH_CYCLES SIGKILL cycles),
# of the model-based lifecycle test (MODEL_CHECKS random sequences of about
# MODEL_STEPS operations each, kills and reopens among them), of the event store's
# model-based test (ESMODEL_CHECKS sequences of about ESMODEL_STEPS operations:
# appends, reads, deletes, Reclaim, truncation, subscriptions, a projection, reopens
# and kills) and of the history test (test/history: HISTORY_RUNS runs of every fault
# schedule, on the local engine and on the JetStream cluster, judged by the
# Elle-style checker). `make test` runs short forms of all four.
CRASH_CYCLES   ?= 200
MODEL_CHECKS   ?= 400
MODEL_STEPS    ?= 80
ESMODEL_CHECKS ?= 400
ESMODEL_STEPS  ?= 60
HISTORY_RUNS   ?= 20
crash: deps
	ROCKLINE_MODEL_CHECKS=$(MODEL_CHECKS) ROCKLINE_MODEL_STEPS=$(MODEL_STEPS) $(GO) test -count=1 -timeout 60m -v -run 'TestModel' ./test/model/
	ROCKLINE_CRASH_CYCLES=$(CRASH_CYCLES) $(GO) test -count=1 -timeout 120m -v -run 'TestCrash' ./test/crash/
	ROCKLINE_ESMODEL_CHECKS=$(ESMODEL_CHECKS) ROCKLINE_ESMODEL_STEPS=$(ESMODEL_STEPS) $(GO) test -count=1 -timeout 90m -v -run 'TestESModel' ./test/esmodel/
	ROCKLINE_HISTORY_RUNS=$(HISTORY_RUNS) $(GO) test -count=1 -timeout 60m -v -run 'TestLocalHistory' ./test/history/
	cd jetstream && ROCKLINE_HISTORY_RUNS=$(HISTORY_RUNS) $(GO) test -count=1 -timeout 150m -v -run 'TestJetStreamHistory' .

# soak runs the 10-minute soak test, then the family-churn loop's long form (10,000
# families created, written and dropped; anonymous memory must stay flat). Without
# -race: the race detector's shadow memory grows with every allocation.
soak: deps
	ROCKLINE_SOAK=10m $(GO) test -count=1 -timeout 30m -v -run 'TestSoak' ./test/soak/
	ROCKLINE_CHURN=10000 $(GO) test -count=1 -timeout 30m -v -run 'TestFamilyChurn' ./test/soak/

vet: deps
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

lint: fmt vet

clean:
	$(GO) clean -testcache
