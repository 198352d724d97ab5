#!/bin/sh
# `coconet run --backend cuda` on a machine without a GPU must say so plainly
# and exit 2. Skipped (77) where a GPU is visible. Usage: run_without_gpu.sh COCONET
coconet="$1"
if nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is visible; the no-GPU path is not reachable here"
  exit 77
fi
err=$("${coconet}" run adam --backend cuda --set N=64 2>&1 >/dev/null)
rc=$?
echo "exit ${rc}: ${err}"
[ "${rc}" -eq 2 ] || { echo "expected exit status 2"; exit 1; }
echo "${err}" | grep -q "needs an NVIDIA GPU" || { echo "expected a plain message"; exit 1; }
echo "${err}" | grep -q -- "--backend cpu" || { echo "expected the way out (--backend cpu)"; exit 1; }
