# rockline: `make demo` runs the main example, `make test` runs every test.
# Both install what is missing (librocksdb-dev through apt) before they build.

GO      ?= go
PKGS    ?= ./...
ROCKSDB_HEADER ?= /usr/include/rocksdb/c.h
export CGO_ENABLED = 1

.PHONY: all deps build test demo bench fmt lint vet clean

all: build

# deps installs Debian's librocksdb-dev (RocksDB 7.8.3, matched by grocksdb v1.7.15)
# when its header is missing: apt-get update first when apt does not know the
# package, sudo when not root, a clear message when neither works.
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
	  echo "rockline: installing librocksdb-dev"; \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q librocksdb-dev || \
	    { echo "rockline: could not install librocksdb-dev with apt-get" >&2; exit 1; }; \
	fi

build: deps
	$(GO) build $(PKGS)

test: deps vet
	$(GO) test -race -timeout 20m $(PKGS)

demo: deps
	$(GO) run ./examples/quickstart

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 3 ./test/benchmarks/

vet: deps
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

lint: fmt vet

clean:
	$(GO) clean -testcache
