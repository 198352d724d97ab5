#!/bin/sh
# ctest of the GPU bundle (scripts/gpu-bundle.sh): `closure` checks that every
# library the bundled programs need resolves inside the bundle or is one the
# GPU image provides; `dry_run` runs scripts/gpu-check.sh --dry-run from it.
# Skipped (77) when no bundle was built: building one takes minutes.
#   bundle_test.sh closure|dry_run ROOT OUT_DIR
mode="$1" root="$2" out="$3"
bundle="${COCONET_BUNDLE:-${root}/gpu-bundle}"
if [ ! -f "${bundle}/manifest.json" ]; then
  echo "no GPU bundle at ${bundle}: run scripts/gpu-bundle.sh first (then this test runs)"
  exit 77
fi
case "${mode}" in
  closure) exec "${root}/scripts/gpu-bundle.sh" --check "${bundle}" ;;
  dry_run) rm -rf "${out}"; OUT= COCONET_BUNDLE="${bundle}" exec "${root}/scripts/gpu-check.sh" --dry-run "${out}" ;;
  *) echo "usage: bundle_test.sh closure|dry_run ROOT OUT_DIR"; exit 2 ;;
esac
