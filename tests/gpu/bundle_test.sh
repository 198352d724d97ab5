#!/bin/sh
# ctest of the GPU bundle (scripts/gpu-bundle.sh):
#   pack     packs this build's cuda programs into OUT_DIR/bundle (seconds),
#            unless a bundle was built at gpu-bundle/ (or $COCONET_BUNDLE)
#   closure  every library the bundled programs need resolves inside the
#            bundle or is one the GPU image provides; the bundle fits 64 MiB
#   dry_run  scripts/gpu-check.sh --dry-run from it
# Skipped (77) when this build has no cuda backend (no CUDA Toolkit or NCCL).
#   bundle_test.sh pack|closure|dry_run ROOT BUILD OUT_DIR
mode="$1" root="$2" build="$3" out="$4"
bundle="${COCONET_BUNDLE:-${root}/gpu-bundle}"
[ -f "${bundle}/manifest.json" ] || bundle="${out}/bundle"
case "${mode}" in
  pack)
    [ "${bundle}" = "${out}/bundle" ] || { echo "using the bundle at ${bundle}"; exit 0; }
    if [ ! -x "${build}/tests/test_gpu" ]; then
      echo "this build has no cuda backend (no test_gpu in ${build}): nothing to pack"
      exit 77
    fi
    rm -rf "${out}" && mkdir -p "${out}"
    exec "${root}/scripts/gpu-bundle.sh" --from "${build}" "${bundle}" ;;
  closure | dry_run)
    if [ ! -f "${bundle}/manifest.json" ]; then
      echo "no GPU bundle at ${bundle} (gpu_bundle.pack skipped: no cuda backend in this build)"
      exit 77
    fi
    if [ "${mode}" = closure ]; then exec "${root}/scripts/gpu-bundle.sh" --check "${bundle}"; fi
    rm -rf "${out}/dry-run"
    OUT= COCONET_BUNDLE="${bundle}" exec "${root}/scripts/gpu-check.sh" --dry-run "${out}/dry-run" ;;
  *) echo "usage: bundle_test.sh pack|closure|dry_run ROOT BUILD OUT_DIR"; exit 2 ;;
esac
