# The two commands of the README's quick start, and their helpers.
#   make run   installs what is missing, builds (Release), runs the main job on the embedded default
#   make test  installs what is missing, builds, runs every test through ctest
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps build run test bench clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	./$(BUILD)/cli/coconet predict

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

bench: build
	./$(BUILD)/bench/coconet_bench_sim
	cmake --build $(BUILD) --target bench_exec

clean:
	rm -rf $(BUILD)
