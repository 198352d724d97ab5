# The two commands of the README's quick start, and their helpers.
#   make run   installs what is missing, builds (Release), runs the main job on the embedded default
#   make test  installs what is missing, builds, runs every test through ctest
#   make docs      rewrites the figures README.md and docs/ quote from the model
#                  (scripts/docs_figures.py; ctest docs.figures fails when one is stale)
#   make python    only the Python module (pybind11), into $(BUILD)/python:
#                  PYTHONPATH=$(BUILD)/python python3 -c "import coconet"
#   make sanitize  an ASan + UBSan build (clang 14, libFuzzer instrumented) of
#                  the model, plan and sim libraries and the coconet command
#                  (without MPI): their unit, error, equivalence and CLI tests,
#                  then each fuzz target for FUZZ_SECONDS
#   make fuzz      the same build, each fuzz target for FUZZ_SECONDS (default 600)
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

SAN_BUILD ?= build-san
# Fuzz targets run side by side, one core each (libFuzzer is single-threaded):
# on the 2-core CI machine, two at a time halve make sanitize's fuzzing time.
FUZZ_JOBS ?= 2
FUZZ_TARGETS := workload expression topology experiment schedule tune_file model
SAN_TESTS := test_model_frontend test_model_errors test_hostile_model test_sched_unit test_sched_equivalence \
             test_sched_errors test_plan test_sim test_topology_errors coconet test_cli test_hostile_cli \
             test_hostile_surfaces
# A new build folder is generated for Ninja where it is installed: Ninja starts
# a target's compiles while the libraries it links are still being linked, so
# both cores stay busy; a folder configured before keeps its generator.
generator = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))
export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1

.PHONY: all deps build run test docs python bench clean sanitize sanitize-build sanitize-test fuzz fuzz-run

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(call generator,$(BUILD)) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	./$(BUILD)/cli/coconet predict

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

docs: deps
	@cmake -S . -B $(BUILD) $(call generator,$(BUILD)) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target coconet
	python3 scripts/docs_figures.py --coconet $(BUILD)/cli/coconet --write

python: deps
	@cmake -S . -B $(BUILD) $(call generator,$(BUILD)) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target coconet_python
	@echo "built $(BUILD)/python: PYTHONPATH=$(BUILD)/python python3 -c 'import coconet'"

bench: build
	./$(BUILD)/bench/coconet_bench_sim
	./$(BUILD)/bench/coconet_bench_step
	./$(BUILD)/bench/coconet_bench_kernels
	cmake --build $(BUILD) --target bench_exec

# -g1: line tables, all an ASan or UBSan report needs to name file:line.
sanitize-build: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(SAN_BUILD) $(call generator,$(SAN_BUILD)) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
	  -DCOCONET_FUZZ=ON -DCOCONET_WITH_MPI=OFF -DCOCONET_WITH_CUDA=OFF >/dev/null
	@cmake --build $(SAN_BUILD) -j$(JOBS) --target $(SAN_TESTS) $(addprefix fuzz_,$(FUZZ_TARGETS))

sanitize-test: sanitize-build
	cd $(SAN_BUILD) && ctest --output-on-failure -j$(JOBS) -R '^(model|errors|schedule|equivalence|plan|sim|cli)\.'

# Each target runs FUZZ_SECONDS on a working corpus in the build folder, seeded
# from tests/fuzz/corpus/<target>; a finding is written to $(SAN_BUILD)/fuzz-findings/.
fuzz-run:
	@mkdir -p $(SAN_BUILD)/fuzz-findings
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) $(addprefix fuzz-one-,$(FUZZ_TARGETS))

fuzz-one-%:
	@mkdir -p $(SAN_BUILD)/fuzz-corpus/$*
	@$(SAN_BUILD)/tests/fuzz_$* $(SAN_BUILD)/fuzz-corpus/$* tests/fuzz/corpus/$* -max_total_time=$(FUZZ_SECONDS) \
	  -timeout=10 -rss_limit_mb=2048 -max_len=131072 -print_final_stats=1 \
	  -artifact_prefix=$(SAN_BUILD)/fuzz-findings/$*- 2>$(SAN_BUILD)/fuzz-$*.log \
	  || { echo "fuzz_$*: FAILED"; tail -40 $(SAN_BUILD)/fuzz-$*.log; exit 1; }
	@echo "fuzz_$* ($(FUZZ_SECONDS) s): $$(grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' $(SAN_BUILD)/fuzz-$*.log | tr '\n' ' ')"

sanitize: FUZZ_SECONDS ?= 30
sanitize: sanitize-test
	@$(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=$(FUZZ_SECONDS)

fuzz: FUZZ_SECONDS ?= 600
fuzz: sanitize-build
	@$(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=$(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
