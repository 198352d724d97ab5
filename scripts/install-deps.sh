#!/usr/bin/env bash
# Installs the Debian packages coconet builds and tests with, when they are missing.
# Idempotent: does nothing when everything is present. Not root: prints the command.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libyaml-cpp-dev libcli11-dev libeigen3-dev libfmt-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev libfuzzer-14-dev   # make sanitize / make fuzz (ASan, UBSan, libFuzzer)
  python3-dev pybind11-dev python3-pybind11       # make python: the Python module (python/)
  patchelf                                        # scripts/gpu-bundle.sh: the bundle's rpath $ORIGIN/lib
  ccache                                          # compiler cache (CMakeLists.txt COCONET_CCACHE)
  ninja-build                                     # the generator make build uses for a new build folder (Makefile)
  iproute2 util-linux                             # tests/hosts/two_hosts.sh: ip netns, unshare (two simulated hosts)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "coconet needs these packages; run as root:" >&2
  echo "  apt-get update && $cmd" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
