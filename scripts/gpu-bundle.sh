#!/usr/bin/env bash
# Builds, on this machine, what the first GPU run needs and packs it into one
# folder that travels to the GPU machine (which has CUDA, a Python with the
# pip packages nvidia-nccl-cu13 / nvidia-cublas / nvidia-cuda-runtime, and
# none of the Debian libraries coconet builds with):
#
#   BUNDLE/coconet test_gpu test_gpu_host bench_gpu   cuda-enabled, sm_90, Release,
#                                                     taken from their fixed paths in the build
#                                                     (program_paths below), rpath $ORIGIN/lib
#                                                     set by patchelf
#   BUNDLE/lib/        every shared library they need that is not glibc, libstdc++,
#                      libgcc_s, the CUDA driver, or one of FROM_IMAGE below; each
#                      with rpath $ORIGIN, so their own needs resolve inside lib/
#                      without LD_LIBRARY_PATH (Debian's Open MPI libraries carry
#                      RUNPATHs to this machine's system folders)
#   BUNDLE/lib/libcoconet_nccl_tuner.so   NCCL's tuner plugin that gives each
#                      collective call the plan's choice (`coconet run` finds it there)
#   BUNDLE/run.sh      the launcher: run.sh PROGRAM ARGS... finds the image's NCCL,
#                      cuBLAS and CUDA runtime (scripts/gpu_env.py) and runs PROGRAM
#   BUNDLE/gpu_env.py, manifest.json   (scripts/gpu-check.sh runs from the repository);
#                      the manifest records each program's build path and GNU build
#                      id (the closure check compares them with the build's, where
#                      the build is at hand) and the oldest glibc and libstdc++
#                      (GLIBCXX) the bundle's files need (gpu_env.py --preflight
#                      checks the GPU machine's before anything runs)
#
#   scripts/gpu-bundle.sh [BUNDLE]      (default gpu-bundle/, git-ignored): builds, then packs
#   scripts/gpu-bundle.sh --from BUILD BUNDLE   packs the programs of an existing cuda-enabled
#                                        build (the ctest packs `make test`'s build, seconds)
#   scripts/gpu-bundle.sh --check BUNDLE   only the closure check
#   env: BUILD_DIR (default build-bundle), CUDA_ARCH (90), JOBS (2)
#
# NCCL, cuBLAS and the CUDA runtime never travel (this machine's libnccl.so.2
# alone is 208 MB, the limit of what goes to the GPU machine is 64 MiB).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The limit on what travels to the GPU machine, project files included
# (/work/.library/device/README.md, "Limits"): the bundle stays under it.
max_bundle_mib=64
# Libraries the GPU image provides: the pip packages' NCCL, cuBLAS, CUDA
# runtime, and the driver.
from_image_re='^(libnccl\.so\.2|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libcudart\.so\.[0-9]+|libcuda\.so\.1)$'
# Libraries of the base system every Linux image has (glibc, the GCC runtime).
system_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
programs=(coconet test_gpu test_gpu_host bench_gpu)
# Where each program is in a build folder (cli/, tests/ and bench/ CMakeLists).
# Fixed paths: a search would also find older copies (a bundle packed inside
# the build, as the ctest does, under tests/gpu-bundle-test/).
declare -A program_paths=(
  [coconet]=cli/coconet [test_gpu]=tests/test_gpu [test_gpu_host]=tests/test_gpu_host [bench_gpu]=bench/bench_gpu)

# ldd NAME => PATH pairs of FILE as the loader resolves them with no
# LD_LIBRARY_PATH (the rpaths alone, as on the GPU machine before run.sh).
deps() {
  env -u LD_LIBRARY_PATH ldd "$1" | awk '/=>/ {print $1, $3; next} /ld-linux/ {n = $1; sub(".*/", "", n); print n, $1}'
}

# The GNU build id of an ELF file (kept by strip and patchelf).
build_id() { readelf -n "$1" 2>/dev/null | awk '/Build ID:/ {print $3; exit}'; }

# The newest symbol version of PREFIX (GLIBC or GLIBCXX) the files need.
newest_needed() {
  local prefix="$1"
  shift
  objdump -T "$@" 2>/dev/null | grep -o "(${prefix}_[0-9.]*)" | tr -d '()' | sed "s/^${prefix}_//" |
    sort -V | tail -1
}

# Fails unless every library the bundle's files need resolves inside the
# bundle, is a system library, or is one the GPU image provides.
check() {
  local bundle="$1" bad=0 f name path
  [ -f "${bundle}/manifest.json" ] || { echo "gpu-bundle: no bundle at ${bundle}" >&2; return 1; }
  for f in "${programs[@]/#/${bundle}/}" "${bundle}"/lib/*; do
    [ -e "$f" ] || { echo "missing: $f"; bad=1; continue; }
    while read -r name path; do
      if [[ "$name" =~ $from_image_re || "$name" =~ $system_re ]]; then continue; fi
      if [[ "$path" == "${bundle}/lib/"* ]]; then continue; fi
      echo "$(basename "$f") needs ${name}, which resolves to ${path} outside the bundle"
      bad=1
    done < <(deps "$f" "${bundle}")
  done
  for f in "${programs[@]/#/${bundle}/}"; do
    readelf -d "$f" | grep -q 'RPATH.*\$ORIGIN/lib' || { echo "$(basename "$f"): no rpath \$ORIGIN/lib"; bad=1; }
  done
  for f in "${bundle}"/lib/*; do
    [ -e "$f" ] || continue
    readelf -d "$f" | grep -q 'R\(UN\)\?PATH.*\[\$ORIGIN\]' || { echo "$(basename "$f"): no rpath \$ORIGIN"; bad=1; }
  done
  # Each program is the build's own (same build id), where that build is here.
  local p src
  for p in "${programs[@]}"; do
    src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["programs"][sys.argv[2]]["source"])' \
      "${bundle}/manifest.json" "$p" 2>/dev/null)
    if [ -z "${src}" ]; then echo "manifest.json names no source for ${p}"; bad=1; continue; fi
    [ -f "${src}" ] || continue  # the GPU machine: the build stayed behind
    if [ "$(build_id "${src}")" != "$(build_id "${bundle}/${p}")" ]; then
      echo "${p}: the bundle's copy is not ${src} (build ids differ): pack again"
      bad=1
    fi
  done
  local size
  size=$(du -sm "${bundle}" | cut -f1)
  if [ "${size}" -gt "${max_bundle_mib}" ]; then
    echo "bundle is ${size} MiB, over ${max_bundle_mib} MiB"
    bad=1
  fi
  [ "${bad}" -eq 0 ] && echo "gpu-bundle: closure ok, ${size} MiB (${bundle})"
  return "${bad}"
}

if [ "${1:-}" = "--check" ]; then
  check "$(cd "${2:?usage: gpu-bundle.sh --check BUNDLE}" && pwd)"
  exit $?
fi

if [ "${1:-}" = "--from" ]; then
  build="$(cd "${2:?usage: gpu-bundle.sh --from BUILD BUNDLE}" && pwd)"
  bundle="${3:?usage: gpu-bundle.sh --from BUILD BUNDLE}"
  arch="$(sed -n 's/^COCONET_CUDA_ARCHITECTURES:STRING=//p' "${build}/CMakeCache.txt")"
else
  bundle="${1:-${root}/gpu-bundle}"
  build="${BUILD_DIR:-${root}/build-bundle}"
  arch="${CUDA_ARCH:-90}"
  jobs="${JOBS:-2}"
  configured=$(cmake -S "${root}" -B "${build}" -DCMAKE_BUILD_TYPE=Release -DCOCONET_CUDA_ARCHITECTURES="${arch}")
  grep -q "CUDA backend ON" <<<"${configured}" ||
    { echo "gpu-bundle: CMake found no CUDA/NCCL/MPI here; the bundle needs the cuda backend" >&2; exit 1; }
  cmake --build "${build}" -j"${jobs}" --target "${programs[@]}"
fi
command -v patchelf >/dev/null || { echo "gpu-bundle: needs patchelf (scripts/install-deps.sh installs it)" >&2; exit 1; }

rm -rf "${bundle}"
mkdir -p "${bundle}/lib"
bundle="$(cd "${bundle}" && pwd)"
for p in "${programs[@]}"; do
  src="${build}/${program_paths[$p]}"
  [ -x "${src}" ] || { echo "gpu-bundle: ${p} was not built (no ${src})" >&2; exit 1; }
  strip -o "${bundle}/${p}" "${src}"
  patchelf --force-rpath --set-rpath '$ORIGIN/lib' "${bundle}/${p}"
done
from_image=()
for p in "${programs[@]}"; do
  while read -r name path; do
    if [[ "$name" =~ $from_image_re ]]; then from_image+=("$name"); continue; fi
    [[ "$name" =~ $system_re ]] && continue
    [ -f "$path" ] || { echo "gpu-bundle: ${p} needs ${name}, not found here" >&2; exit 1; }
    if [ ! -e "${bundle}/lib/${name}" ]; then
      strip --strip-unneeded -o "${bundle}/lib/${name}" "$(readlink -f "$path")"
      patchelf --force-rpath --set-rpath '$ORIGIN' "${bundle}/lib/${name}"
    fi
  done < <(LD_LIBRARY_PATH="${bundle}/lib" ldd "${bundle}/${p}" |
           awk '/=>/ {print $1, $3; next} /ld-linux/ {n = $1; sub(".*/", "", n); print n, $1}')
done
# cuBLAS is dlopen'ed at the first GEMM (kernels/cuda/cublas_loader.h), not
# linked: ldd does not list it, the image must still provide it.
cublas_h="$(dirname "$(sed -n 's/^CUDAToolkit_BIN_DIR:PATH=//p' "${build}/CMakeCache.txt")")/include/cublas_api.h"
cublas_major=$(awk '/^#define CUBLAS_VER_MAJOR / {print $3}' "${cublas_h}")
[ -n "${cublas_major}" ] || { echo "gpu-bundle: no CUBLAS_VER_MAJOR in ${cublas_h}" >&2; exit 1; }
from_image+=("libcublas.so.${cublas_major}" "libcublasLt.so.${cublas_major}")
# NCCL's tuner plugin that gives each collective call the plan's choice
# (exec/nccl_tuner/): `coconet run --backend cuda` names it in
# NCCL_TUNER_PLUGIN from lib/ beside the program.
plugin="${build}/exec/libcoconet_nccl_tuner.so"
[ -f "${plugin}" ] || { echo "gpu-bundle: the NCCL tuner plugin was not built (no ${plugin})" >&2; exit 1; }
strip --strip-unneeded -o "${bundle}/lib/libcoconet_nccl_tuner.so" "${plugin}"
patchelf --force-rpath --set-rpath '$ORIGIN' "${bundle}/lib/libcoconet_nccl_tuner.so"
cp "${root}/scripts/gpu_env.py" "${bundle}/"
cat >"${bundle}/run.sh" <<'LAUNCHER'
#!/usr/bin/env bash
# run.sh PROGRAM ARGS...: runs a bundled program with the GPU image's NCCL,
# cuBLAS and CUDA runtime on LD_LIBRARY_PATH (found by gpu_env.py).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prog="${1:?usage: run.sh PROGRAM ARGS...}"
shift
LD_LIBRARY_PATH="$(python3 "${here}/gpu_env.py" "${here}" --ld-path)" || exit 1
export LD_LIBRARY_PATH
exec "${here}/${prog}" "$@"
LAUNCHER
chmod +x "${bundle}/run.sh"

# The NCCL version of the headers built with (the include folder CMake found).
nccl_h="$(sed -n 's/^NCCL_INCLUDE_DIR:PATH=//p' "${build}/CMakeCache.txt")/nccl.h"
nccl_header=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {v = v (v != "" ? "." : "") $3} END {print v}' "${nccl_h}")
unique_from_image=$(printf '%s\n' "${from_image[@]}" | sort -u | grep -v '^libcuda\.so' |
  python3 -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin if l.strip()]))')
# The oldest C and C++ runtimes the bundle runs on: the newest symbol
# versions its files need (the GPU machine's are checked by the preflight).
elf_files=("${programs[@]/#/${bundle}/}" "${bundle}"/lib/*)
needs_glibc=$(newest_needed GLIBC "${elf_files[@]}")
needs_glibcxx=$(newest_needed GLIBCXX "${elf_files[@]}")
sources=$(for p in "${programs[@]}"; do printf '%s %s %s\n' "$p" "${build}/${program_paths[$p]}" "$(build_id "${bundle}/${p}")"; done)
python3 - "${bundle}/manifest.json" "${nccl_header}" "${unique_from_image}" "${arch}" \
  "$(git -C "${root}" rev-parse --short HEAD 2>/dev/null || echo unknown)" "${needs_glibc}" "${needs_glibcxx}" \
  "${sources}" <<'PY'
import json, os, sys
path, nccl, from_image, arch, commit, glibc, glibcxx, sources = sys.argv[1:]
files = sorted(os.path.relpath(os.path.join(d, f), os.path.dirname(path))
               for d, _, fs in os.walk(os.path.dirname(path)) for f in fs)
programs = {name: {"source": src, "build_id": bid}
            for name, src, bid in (line.split(" ") for line in sources.splitlines() if line)}
json.dump({"commit": commit, "cuda_arch": "sm_" + arch, "nccl_header_version": nccl,
           "from_image": json.loads(from_image), "needs": {"glibc": glibc, "glibcxx": glibcxx},
           "programs": programs, "files": files + ["manifest.json"]}, open(path, "w"), indent=1)
PY
check "${bundle}"
