#!/usr/bin/env bash
# The GPU check in one command: builds coconet with the cuda backend, verifies
# every CUDA kernel against its CPU reference, runs every workload through the
# runtime on one rank (NCCL), benchmarks the kernels against the device's copy
# bandwidth, and puts the cost model's predicted compute times next to the
# measured ones. Writes a JSON summary (default gpu-check/summary.json; see
# docs/gpu.md for its fields). Sized for one H200 within 8 minutes.
#
#   scripts/gpu-check.sh [OUT_DIR]        (env: JOBS, BUILD_DIR, CUDA_ARCH)
#
# Exit status: 0 every check passed, 1 a check failed, 2 no GPU here.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${root}/gpu-check}"
build="${BUILD_DIR:-${root}/build-gpu-check}"
jobs="${JOBS:-$(nproc)}"
arch="${CUDA_ARCH:-90}"
# Per-step limits in seconds; together under the 8-minute budget.
build_limit=270
test_limit=90
bench_limit=100
run_limit=40
mkdir -p "${out}"
log="${out}/gpu-check.log"
: >"${log}"

say() { echo "gpu-check: $*" | tee -a "${log}" >&2; }
status_of() { # name rc
  printf '%s %s\n' "$1" "$2" >>"${out}/steps.txt"
}
: >"${out}/steps.txt"

# 1. Is there a GPU at all?
if ! nvidia-smi -L >"${out}/gpus.txt" 2>&1 || ! grep -q "GPU" "${out}/gpus.txt"; then
  say "no NVIDIA GPU visible (nvidia-smi -L failed or listed none); nothing to check"
  printf '{"status": "no_gpu", "reason": "nvidia-smi -L lists no GPU"}\n' >"${out}/summary.json"
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"${out}/gpu.csv" 2>/dev/null
say "GPU: $(head -1 "${out}/gpu.csv")"

# 2. Build what the check runs.
say "building in ${build} (sm_${arch}, ${jobs} jobs)"
timeout "${build_limit}" cmake -S "${root}" -B "${build}" -DCMAKE_BUILD_TYPE=Release \
  -DCOCONET_CUDA_ARCHITECTURES="${arch}" >>"${log}" 2>&1 &&
  timeout "${build_limit}" cmake --build "${build}" -j"${jobs}" \
    --target coconet test_gpu test_gpu_host bench_gpu >>"${log}" 2>&1
build_rc=$?
status_of build "${build_rc}"
if [ "${build_rc}" -ne 0 ]; then
  say "build failed (rc ${build_rc}); see ${log}"
  printf '{"status": "build_failed", "log": "%s"}\n' "${log}" >"${out}/summary.json"
  exit 1
fi

# 3. Correctness: kernels vs CPU references, every workload through the runtime, fused collective.
say "tests: kernels, runtime (1 rank, NCCL), fused RS+Adam+AG"
timeout "${test_limit}" "${build}/tests/test_gpu_host" --gtest_output="json:${out}/test_gpu_host.json" >>"${log}" 2>&1
status_of test_gpu_host $?
timeout "${test_limit}" "${build}/tests/test_gpu" --gtest_output="json:${out}/test_gpu.json" >>"${log}" 2>&1
status_of test_gpu $?

# 4. Performance: copy bandwidth, fused vs unfused optimizers, chunked GEMM, fused collective paths.
say "benchmarks"
bench_args=(--benchmark_format=json --benchmark_out="${out}/bench_gpu.json" --benchmark_out_format=json)
timeout "${bench_limit}" "${build}/bench/bench_gpu" "${bench_args[@]}" --benchmark_min_time=0.2s \
  >>"${log}" 2>&1 ||
  timeout "${bench_limit}" "${build}/bench/bench_gpu" "${bench_args[@]}" --benchmark_min_time=0.2 \
    >>"${log}" 2>&1
status_of bench_gpu $?

# 5. Predicted vs measured compute: one rank, each single-GPU workload, baseline schedule.
say "prediction vs measurement (coconet predict / coconet run --backend cuda)"
coconet="${build}/cli/coconet"
for w in adam lamb sgd megatron_mlp megatron_attention; do
  timeout "${run_limit}" "${coconet}" run "${w}" --backend cuda --schedule all --iters 5 \
    --format json >"${out}/run_${w}.json" 2>>"${log}"
  status_of "run_${w}" $?
  timeout "${run_limit}" "${coconet}" predict "${w}" --topology dgx-h200 --gpus 1 \
    --format json >"${out}/predict_${w}.json" 2>>"${log}"
  status_of "predict_${w}" $?
done

# 6. The summary.
python3 "${root}/scripts/gpu_check_summary.py" "${out}" >"${out}/summary.json" 2>>"${log}"
summary_rc=$?
cat "${out}/summary.json"
if [ "${summary_rc}" -ne 0 ]; then
  say "summary failed; see ${log}"
  exit 1
fi
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["status"] == "pass" else 1)' \
  "${out}/summary.json"
