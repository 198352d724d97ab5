#!/bin/sh
# The prediction-only Python module stands alone (DESIGN.md, folders): it links
# no MPI library and none of the CPU kernels (Eigen, the cpu backend's code).
# Usage: python_links_alone.sh MODULE.so
module="$1"
[ -f "$module" ] || { echo "FAIL: no module at $module"; exit 1; }
if ldd "$module" | grep -i "libmpi"; then
  echo "FAIL: $module links an MPI library"
  exit 1
fi
if nm -C "$module" | grep -E "coconet::kernels::|Eigen::" | head -5 | grep -q .; then
  nm -C "$module" | grep -E "coconet::kernels::|Eigen::" | head -5
  echo "FAIL: $module holds code of kernels/ (CPU kernels, Eigen)"
  exit 1
fi
echo PASS
