#!/bin/sh
# mpirun's remote launcher for hosts simulated with network namespaces: what
# ssh is to a cluster. Open MPI runs it as `AGENT [OPTIONS] HOST COMMAND...`
# (OMPI_MCA_plm_rsh_agent); it runs COMMAND, as a shell command line the way
# sshd does, in HOST's network namespace (named in $NETNS_AGENT_DIR/HOST),
# with HOST as the host name (a UTS namespace of its own) and a fresh
# environment like an ssh login's, so nothing reaches a rank that mpirun does
# not forward itself.
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;  # ssh options mpirun may add (-x, -o ...)
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "netns_agent.sh: usage: netns_agent.sh HOST COMMAND..." >&2; exit 2; }
host="$1"
shift
map="${NETNS_AGENT_DIR:?netns_agent.sh: NETNS_AGENT_DIR (host -> namespace files) is not set}/$host"
[ -r "$map" ] || { echo "netns_agent.sh: unknown host '$host' (no $map)" >&2; exit 255; }
ns=$(cat "$map")
# ssh's login PATH (OpenSSH's default, _PATH_STDPATH) plus /usr/local.
login_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
exec ip netns exec "$ns" unshare --uts sh -c \
  'printf "%s\n" "$1" > /proc/sys/kernel/hostname && exec env -i PATH="$2" HOME="$3" sh -c "$4"' \
  netns_agent "$host" "$login_path" "${HOME:-/}" "$*"
