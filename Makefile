# sortd quick start: `make run` serves, `make test` runs the whole suite.
# Both install missing Debian packages first (scripts/install-deps.sh).
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
ARGS ?=

.PHONY: all deps configure build run test test-core test-service test-e2e bench-cpu lint clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) > $(BUILD).configure.log 2>&1 \
	  || (cat $(BUILD).configure.log; exit 1)
	@grep -E "^-- sortd:" $(BUILD).configure.log || true

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Starts the server on its embedded default (GPU engine when present, else
# CPU) on 0.0.0.0:50051. Extra flags: make run ARGS="--engine=cpu".
run: build
	$(BUILD)/server/sortd $(ARGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-core: build
	cd $(BUILD) && ctest --output-on-failure -L core

test-service: build
	cd $(BUILD) && ctest --output-on-failure -L service

test-e2e: build
	cd $(BUILD) && ctest --output-on-failure -L e2e

bench-cpu: build
	SORTD_BENCH_BIN=$(BUILD)/bench/sortd_cpu_bench bash bench/run_cpu_bench.sh

lint: deps
	cd proto && ../.tools/node/node_modules/.bin/buf lint

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
