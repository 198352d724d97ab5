#!/bin/sh
# ctest of the GPU bundle (scripts/gpu-bundle.sh):
#   pack     packs this build's cuda programs into OUT_DIR/bundle (seconds),
#            unless a bundle was built at gpu-bundle/ (or $COCONET_BUNDLE)
#   closure  every library the bundled programs need resolves inside the
#            bundle or is one the GPU image provides, with no LD_LIBRARY_PATH;
#            each program is the build's own (build ids); the bundle fits 64 MiB
#   dry_run  scripts/gpu-check.sh --dry-run as the GPU machine will run it: from
#            a copy of the checkout (its tracked and untracked, not ignored,
#            files, as the device tool carries them) with the bundle inside, in
#            another directory, LD_LIBRARY_PATH unset and, where a mount
#            namespace can be made (root), this checkout and the build hidden
#            under an empty tmpfs, so that a path of the build machine compiled
#            into a program fails the run; the summary is read as the real
#            run's is, and kept in OUT_DIR/dry-run
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
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/coconet-dry-run.XXXXXX") || exit 1
    trap 'rm -rf "${tmp}"' EXIT
    mkdir -p "${tmp}/repo" "${tmp}/out"
    (cd "${root}" && git ls-files -co --exclude-standard) >"${tmp}/files" 2>/dev/null ||
      (cd "${root}" && find scripts workloads configs models tests/workloads validation -type f) >"${tmp}/files"
    (cd "${root}" && tar -cf - -T "${tmp}/files") | tar -xf - -C "${tmp}/repo" || exit 1
    cp -a "${bundle}" "${tmp}/repo/gpu-bundle" || exit 1
    hide=""
    if [ "$(id -u)" -eq 0 ] && unshare --mount --propagation private true 2>/dev/null; then
      hide="${root}"
      case "${build}" in "${root}"/*) ;; *) hide="${hide} ${build}" ;; esac
      echo "hidden under tmpfs while it runs: ${hide}"
    else
      echo "no mount namespace here (not root): the build's checkout stays visible"
    fi
    cd "${tmp}" || exit 1
    # shellcheck disable=SC2016
    env -u LD_LIBRARY_PATH OUT= COCONET_BUNDLE="${tmp}/repo/gpu-bundle" HIDE="${hide}" \
      ${hide:+unshare --mount --propagation private} sh -c \
      'for d in ${HIDE}; do mount -t tmpfs -o size=1m tmpfs "$d" || exit 1; done; exec "$@"' sh \
      "${tmp}/repo/scripts/gpu-check.sh" --dry-run "${tmp}/out"
    rc=$?
    cp -r "${tmp}/out" "${out}/dry-run"
    exit "${rc}" ;;
  *) echo "usage: bundle_test.sh pack|closure|dry_run ROOT BUILD OUT_DIR"; exit 2 ;;
esac
