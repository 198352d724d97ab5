#!/usr/bin/env bash
# The GPU check in one command, run from the bundle (scripts/gpu-bundle.sh
# builds it here; it travels to the GPU machine with the repository):
#   0 closure   every library the bundled programs need is in the bundle or the image's
#   1 preflight GPU, driver, CUDA runtime, NCCL runtime vs headers, cuBLAS, and the
#               glibc / libstdc++ the bundle needs (stops if anything is missing)
#   2 smoke     the LSA, raw-kernel and overlap: tile tests first, in their own process
#               (a device fault there cannot poison the rest; the newest code is seen first)
#   3 tests     test_gpu_host, then the rest of test_gpu (every workload through the
#               runtime on one rank, the zeroing race, the wrong-GEMM check)
#   4 bench     copy bandwidth; fused, unfused and generic Adam, LAMB as % of copy;
#               chunked vs single GEMM; the fused RS+Adam+AG paths
#   5 runs      every workload on one rank through `coconet run --backend cuda
#               --topology dgx-h200` (predicted next to measured, verified), sizes
#               that fit and keep f16 finite; gpt3_pipeline is an expected skip
#   6 summary   one JSON object of at most 4 KB, printed last
#
#   scripts/gpu-check.sh [--dry-run] [OUT_DIR]
#     OUT_DIR: $OUT when set, else gpu-check/; at most MAX_OUT_FILES (8) files are written there.
#     --dry-run: what needs no GPU, with the real run's own command lines: the
#       closure, the preflight saying "no GPU", the kill fallback of `limit` on a
#       process that ignores TERM, test_gpu_host whole and test_gpu's
#       GPU-free tests (their JSON read by the summary as the real run's is), one
#       benchmark with the real run's exact flags, --help of every program, each
#       `coconet run` command line, which must stop only for want of a GPU; exit 0
#       when they pass. Meant for a machine without a GPU (tests/gpu/bundle_test.sh
#       runs it from a copy of the checkout with the build's own hidden).
#     env: COCONET_BUNDLE (default gpu-bundle/ beside scripts/)
#
# Exit status: 0 every check passed, 1 a check failed, 2 no GPU (not a dry run).
set -uo pipefail

# Seconds each step may take: together at most 450 s, inside the GPU
# machine's 10-minute command limit with room for its start. Each `timeout`
# sends KILL KILL_AFTER seconds after its TERM: a process stuck in the driver
# ignores TERM, and must not hold the window.
readonly BUDGET_CLOSURE=10
readonly BUDGET_PREFLIGHT=20
readonly BUDGET_SMOKE=90
readonly BUDGET_TEST_HOST=30
readonly BUDGET_TEST_GPU=80
readonly BUDGET_BENCH=75
readonly BUDGET_RUN=27          # per workload, 5 workloads: 135
readonly BUDGET_SUMMARY=10
readonly BUDGET_TOTAL=450
readonly KILL_AFTER=5
# The smoke step's tests: the LSA kernels (NCCL's device API, inlined
# structures), the raw kernels and overlap: tile (the tiled GEMM against the
# reference and cuBLAS; megatron_mlp's tile schedules against their chunk
# schedules on one GPU, a loopback LSA team of one, verified against the
# interpreter), the code no GPU has run yet.
readonly SMOKE_FILTER='FusedProgramLsa.*:FusedAllreduce.*:CudaKernels.*:TileGemm.*'
# Google Benchmark 1.7 (the one bundled, Debian's libbenchmark) takes
# --benchmark_min_time in seconds as a plain number; "0.2s" is 1.8's form and
# 1.7 rejects it (bench_gpu exits 2 on a flag it does not know).
readonly BENCH_FLAGS="--benchmark_min_time=0.2"
# Sizes of the runs on one GPU. N: 2^24 parameters (64 MiB of f32 per state
# tensor: large enough to fill an H200, small enough that the host fills the
# inputs in under a second). Megatron blocks: inputs are integers in [1, 4]
# (model/input_pattern.h, kInputPositiveMax), so the MLP's y sums 4H products of
# at most 16: at H = 768 at most 49,152 (54,620 after dropout's 1/0.9 and the
# residual), under f16's largest 65,504; at the paper's H = 3072 one rank's y
# averages 76,800 and overflows. B=2, S=256: 512 rows.
readonly OPTIMIZER_N=16777216
readonly MEGATRON_SIZES="B=2 S=256 H=768"
readonly RUN_ITERS=5
# The megatron blocks at MEGATRON_SIZES hold about 5.5 M elements, past the
# interpreter's default limit (exec/runtime.h, 2^21): checked against it all
# the same (its GEMM of 1.2 G multiply-adds takes about a second), since the
# unscheduled program on the GPU shares a wrong GEMM with every schedule.
readonly INTERPRETER_LIMIT=16777216
# What comes back from the GPU machine is limited in files: the log, the
# preflight, three test reports, the benchmarks, the runs and the summary.
readonly MAX_OUT_FILES=8

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="${COCONET_BUNDLE:-${root}/gpu-bundle}"
out="${1:-${OUT:-${root}/gpu-check}}"
mkdir -p "${out}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
log="${out}/gpu-check.log"
: >"${log}"
export COCONET_ROOT="${root}"
start=$(date +%s)

say() { echo "gpu-check: $*" | tee -a "${log}" >&2; }
step() { # name rc
  printf '%s %s\n' "$1" "$2" >>"${work}/steps.txt"
  say "$1: rc $2 ($(($(date +%s) - start)) s in)"
}
: >"${work}/steps.txt"
limit() { local s="$1"; shift; timeout -k "${KILL_AFTER}" "${s}" "$@"; }  # timeout with a KILL fallback
run() { "${bundle}/run.sh" "$@"; }  # a bundled program with the image's NCCL/cuBLAS
tests() { # step budget report program args...: a bundled test binary, its JSON report under $out
  local name="$1" budget="$2" report="$3"
  shift 3
  limit "${budget}" "${bundle}/run.sh" "$@" --gtest_output="json:${out}/${report}.json" >>"${log}" 2>&1
  step "${name}" $?
}
readonly WORKLOADS=(adam lamb sgd megatron_mlp megatron_attention gpt3_pipeline)
run_args() { # workload: the arguments of its `coconet run` (no spaces inside any)
  local sets=""
  case "$1" in
    adam | lamb | sgd) sets="--set N=${OPTIMIZER_N}" ;;
    megatron_*) for s in ${MEGATRON_SIZES}; do sets+=" --set ${s}"; done
                sets+=" --interpreter-limit ${INTERPRETER_LIMIT}" ;;
  esac
  echo "run $1 --backend cuda --topology dgx-h200 --schedule all --iters ${RUN_ITERS} --format json ${sets}"
}
finish() { # status
  local files
  files=$(find "${out}" -type f | wc -l)
  # summary.json is written next: it must fit too
  [ -f "${out}/summary.json" ] || files=$((files + 1))
  [ "${files}" -le "${MAX_OUT_FILES}" ]
  step out_files "$?"
  limit "${BUDGET_SUMMARY}" python3 "${root}/scripts/gpu_check_summary.py" "${out}" "${work}" "$1" \
    >"${out}/summary.json" 2>>"${log}"
  cat "${out}/summary.json"
}

# 0. The bundle's closure.
if [ ! -f "${bundle}/manifest.json" ]; then
  say "no bundle at ${bundle}: run scripts/gpu-bundle.sh first (here, where the libraries are)"
  exit 1
fi
# A dry run is the build machine's (2 cores, shared with builds and tests):
# its ldd and readelf over the bundle have taken past 10 s there under load.
closure_budget=$((dry ? 6 * BUDGET_CLOSURE : BUDGET_CLOSURE))
limit "${closure_budget}" "${root}/scripts/gpu-bundle.sh" --check "${bundle}" >>"${log}" 2>&1
step closure $?

# 1. Preflight.
limit "${BUDGET_PREFLIGHT}" python3 "${bundle}/gpu_env.py" "${bundle}" --preflight >"${work}/preflight.txt" 2>&1
preflight_rc=$?
tee -a "${log}" <"${work}/preflight.txt" | grep -v '^{' >&2
tail -1 "${work}/preflight.txt" >"${out}/preflight.json"
step preflight "${preflight_rc}"

if [ "${dry}" -eq 1 ]; then
  [ "${preflight_rc}" -eq 2 ] || [ "${preflight_rc}" -eq 0 ] || say "preflight found more missing than the GPU"
  # The kill fallback: a process that ignores TERM (as one stuck in the
  # driver does) must be gone KILL_AFTER seconds after its limit, not when it
  # chooses to end (without -k, timeout would wait the whole 30 s here).
  t0=$(date +%s)
  limit 1 sh -c 'trap "" TERM; sleep 30' >/dev/null 2>&1  # the ignored TERM is inherited by sleep
  [ $(($(date +%s) - t0)) -le $((1 + KILL_AFTER + 2)) ]
  step kill_fallback $?
  # What a run would start, each asked for its --help: the programs load
  # (every library resolves) and parse their arguments.
  for p in "test_gpu_host --gtest_list_tests" "test_gpu --gtest_list_tests" "bench_gpu --help" \
           "coconet --help" "coconet run --help" "coconet --version"; do
    # shellcheck disable=SC2086
    limit 20 "${bundle}/run.sh" ${p} >>"${log}" 2>&1
    step "help:${p// /_}" $?
  done
  # The tests that need no GPU, their reports written where the real run's go.
  tests test_gpu_host "${BUDGET_TEST_HOST}" test_gpu_host test_gpu_host
  tests test_gpu_data "${BUDGET_TEST_HOST}" test_gpu test_gpu --gtest_filter='GpuData.*'
  # One benchmark with the real run's exact flags.
  # shellcheck disable=SC2086
  limit 30 "${bundle}/run.sh" bench_gpu ${BENCH_FLAGS} --benchmark_filter=BM_HostEncodeF16 \
    --benchmark_out="${work}/bench_dry.json" --benchmark_out_format=json >>"${log}" 2>&1
  bench_rc=$?
  [ "${bench_rc}" -eq 0 ] && python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["benchmarks"]; sys.exit(0 if b and b[0]["iterations"] > 0 else 1)' \
    "${work}/bench_dry.json" 2>>"${log}"
  step bench_flags $?
  # Each run's own command line: parsed, its workload and sizes accepted and
  # predicted; it must stop only for want of a GPU.
  for w in "${WORKLOADS[@]}"; do
    [ "${w}" = gpt3_pipeline ] && continue
    # shellcheck disable=SC2046
    msg=$(limit 30 "${bundle}/run.sh" coconet $(run_args "${w}") 2>&1 >/dev/null)
    echo "${msg}" >>"${log}"
    grep -q "needs an NVIDIA GPU" <<<"${msg}"
    step "args:run_${w}" $?
  done
  finish dry_run
  python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["status"] == "dry_run_pass" else 1)' \
    "${out}/summary.json"
  exit $?
fi

if [ "${preflight_rc}" -ne 0 ]; then
  say "preflight: something is missing (above); nothing else runs"
  finish "$([ "${preflight_rc}" -eq 2 ] && echo no_gpu || echo preflight_failed)"
  exit "$([ "${preflight_rc}" -eq 2 ] && echo 2 || echo 1)"
fi

# 2. Smoke: the newest device code first, alone.
tests test_gpu_smoke "${BUDGET_SMOKE}" test_gpu_smoke test_gpu --gtest_filter="${SMOKE_FILTER}"

# 3. Correctness.
tests test_gpu_host "${BUDGET_TEST_HOST}" test_gpu_host test_gpu_host
tests test_gpu "${BUDGET_TEST_GPU}" test_gpu test_gpu --gtest_filter="-${SMOKE_FILTER}"

# 4. Performance.
# shellcheck disable=SC2086
limit "${BUDGET_BENCH}" "${bundle}/run.sh" bench_gpu ${BENCH_FLAGS} \
  --benchmark_out="${out}/bench_gpu.json" --benchmark_out_format=json >>"${log}" 2>&1
step bench_gpu $?

# 5. Every workload on one rank, predicted next to measured.
for w in "${WORKLOADS[@]}"; do
  if [ "${w}" = gpt3_pipeline ]; then  # two process groups (pipeline stages): one GPU cannot run it
    echo "gpt3_pipeline expected_skip" >>"${work}/expected_skips.txt"
    say "gpt3_pipeline: expected skip (needs two process groups, one GPU here)"
    continue
  fi
  # shellcheck disable=SC2046
  limit "${BUDGET_RUN}" "${bundle}/run.sh" coconet $(run_args "${w}") >"${work}/run_${w}.json" 2>>"${log}"
  step "run_${w}" $?
done
python3 - "${work}" "${out}/runs.json" <<'PY'
import json, pathlib, sys
work, dest = pathlib.Path(sys.argv[1]), sys.argv[2]
runs = {}
for f in sorted(work.glob("run_*.json")):
    try:
        runs[f.stem[4:]] = json.loads(f.read_text())
    except ValueError:
        runs[f.stem[4:]] = None
json.dump(runs, open(dest, "w"))
PY

# 6. The summary, last.
say "done in $(($(date +%s) - start)) s (budget ${BUDGET_TOTAL} s)"
finish run
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["status"] == "pass" else 1)' \
  "${out}/summary.json"
