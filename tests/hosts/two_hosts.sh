#!/usr/bin/env bash
# coconet across two hosts, simulated on this machine: two Linux network
# namespaces joined by two veth pairs (a control network, which mpirun's
# daemons use, and a data network, which the ranks' MPI messages use), entered
# by mpirun's remote launcher (netns_agent.sh, standing for ssh: its own host
# name per host, a fresh environment). `coconet run --ranks N --hosts A,B`
# runs from host A, so that Open MPI places ranks on both hosts, each rank
# learns its node from its host, and the data crosses between hosts over
# Open MPI's TCP transport.
#
# Checks, each shown able to fail by a case of its own:
#   1. adam, every schedule, 2 ranks on 2 hosts: exit 0, "2 ranks on 2
#      nodes", and at least MIN_BYTES received on host B's data interface.
#   2. gpt3_pipeline (small sizes), every schedule, 4 ranks: a stage per host,
#      the send between stages crossing: the same three checks.
#   3. The checks of 1 fail for a run with both ranks on host A (one node, no
#      data on the veth): they are not satisfied by any passing run.
#   4. A run whose ranks cannot reach each other (host B's data interface
#      down) ends non-zero before the time limit, not as a pass.
#
# Skipped (exit 77, ctest SKIP_RETURN_CODE) with the reason where namespaces
# cannot be made: not root, no `ip` or `unshare`, no CAP_NET_ADMIN. The
# namespaces and everything started in them are removed on every exit.
#
# Usage: two_hosts.sh COCONET
set -uo pipefail

readonly SKIP=77
coconet="${1:?usage: two_hosts.sh COCONET}"
here="$(cd "$(dirname "$0")" && pwd)"

skip() { echo "SKIP: $*"; exit "$SKIP"; }
fail() { echo "FAIL: $*"; exit 1; }

# ---- can namespaces be made here? -----------------------------------------
[ "$(id -u)" -eq 0 ] || skip "not root: network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN (run make test as root)"
command -v ip >/dev/null || skip "no 'ip' command (iproute2; scripts/install-deps.sh installs it)"
command -v unshare >/dev/null || skip "no 'unshare' command (util-linux)"
command -v timeout >/dev/null || skip "no 'timeout' command (coreutils)"

# Names unique to this run: several checkouts may run make test at once.
tag="$$"
ns_a="coconet-2h-a-$tag"
ns_b="coconet-2h-b-$tag"
host_a="h2a"
host_b="h2b"
# Interface names inside each namespace (the same in both; at most 15 characters).
ctl_if="cc-ctl"
data_if="cc-data"
# Private subnets (RFC 1918), seen only inside the two namespaces.
ctl_a=10.213.1.1 ctl_b=10.213.1.2 data_a=10.213.2.1 data_b=10.213.2.2
work="$(mktemp -d "${TMPDIR:-/tmp}/coconet-2h-XXXXXX")" || fail "cannot make a temporary folder"

cleanup() {
  local ns pid
  for ns in "$ns_a" "$ns_b"; do
    # Whatever this test started in the namespace and is still there.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Namespaces an earlier run left when it was killed outright (SIGKILL runs no
# trap): their names end in the pid of a test that no longer runs.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^coconet-2h-[ab]-[0-9]+$'); do
  kill -0 "${ns##*-}" 2>/dev/null || ip netns del "$ns" 2>/dev/null
done

if ! err=$(ip netns add "$ns_a" 2>&1); then
  skip "cannot make a network namespace ($err): this process lacks CAP_NET_ADMIN or CAP_SYS_ADMIN (a container without them?)"
fi
ip netns add "$ns_b" || fail "ip netns add $ns_b"
for pair in "$ctl_if $ctl_a $ctl_b" "$data_if $data_a $data_b"; do
  set -- $pair
  ip link add "$1" netns "$ns_a" type veth peer name "$1" netns "$ns_b" || fail "cannot make the veth pair $1"
  ip -n "$ns_a" addr add "$2/24" dev "$1" && ip -n "$ns_b" addr add "$3/24" dev "$1" || fail "addresses on $1"
  ip -n "$ns_a" link set "$1" up && ip -n "$ns_b" link set "$1" up || fail "cannot bring $1 up"
done
ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || fail "cannot bring lo up"
echo "$ns_a" >"$work/$host_a"
echo "$ns_b" >"$work/$host_b"

# mpirun (run by coconet inside host A) reaches both hosts through the agent;
# its daemons talk over the control network, the ranks over the data network.
export NETNS_AGENT_DIR="$work"
export OMPI_MCA_plm_rsh_agent="$here/netns_agent.sh"
export OMPI_MCA_oob_tcp_if_include="$ctl_if"
export OMPI_MCA_btl_tcp_if_include="$data_if"
# A job that cannot start or stalls ends well inside ctest's limit.
export COCONET_LAUNCH_TIMEOUT_S=30
readonly RUN_LIMIT_S=45      # each coconet command, whole: 4 x 45 s stays inside ctest's 240 s
readonly WATCHDOG_S=30       # coconet's --timeout: seconds without progress

rx_bytes() { ip netns exec "$ns_b" cat "/sys/class/net/$data_if/statistics/rx_bytes"; }

# Runs coconet from host A; prints its output; sets rc and out.
run_on_a() {
  echo "+ coconet $*"
  out=$(timeout -k 5 "$RUN_LIMIT_S" ip netns exec "$ns_a" "$coconet" "$@" --timeout "$WATCHDOG_S" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  echo "exit code: $rc"
}

# Whether the last run crossed hosts: exit 0, the ranks on `nodes` nodes,
# at least `min_bytes` received on host B's data interface since `before`.
# Prints why not and returns 1 when it did not.
crossed() {
  local nodes="$1" min_bytes="$2" before="$3" after
  after=$(rx_bytes)
  echo "host $host_b received $((after - before)) bytes on $data_if (at least $min_bytes expected)"
  [ "$rc" -eq 0 ] || { echo "not crossed: exit $rc"; return 1; }
  # Here-strings, not pipes: under pipefail, grep -q closing the pipe early fails printf with SIGPIPE.
  grep -Eq "ranks on $nodes nodes" <<<"$out" || { echo "not crossed: no 'on $nodes nodes' in the header"; return 1; }
  [ $((after - before)) -ge "$min_bytes" ] || { echo "not crossed: too few bytes on $data_if"; return 1; }
  return 0
}

start=$SECONDS

# 1. adam, every schedule, one rank per host. The gradient is N f16 values: a
# reduce-scatter (or an allreduce) over 2 ranks sends each rank at least half
# of them, N/2 x 2 bytes per step, so N bytes is a floor no run that crossed
# can miss.
n=65536
before=$(rx_bytes)
run_on_a run adam --backend cpu --ranks 2 --hosts "$host_a,$host_b" --schedule all --set N=$n --iters 2 --warmup 1
crossed 2 "$n" "$before" || fail "adam across two hosts"

# 2. gpt3_pipeline, every schedule: 4 ranks, ranks 0-1 (stage 0) on host A,
# 2-3 (stage 1) on host B; the stage boundary's send of B*S*H f16 values
# (2 bytes each) crosses.
b=1 s=16 h=64
before=$(rx_bytes)
run_on_a run gpt3_pipeline --backend cpu --ranks 4 --hosts "$host_a,$host_b" --schedule all \
  --set B=$b --set S=$s --set H=$h --iters 2 --warmup 1
crossed 2 $((b * s * h * 2)) "$before" || fail "gpt3_pipeline across two hosts"

# 3. The same checks on a run that stays on host A must fail.
before=$(rx_bytes)
run_on_a run adam --backend cpu --ranks 2 --hosts "$host_a" --schedule AR-C --set N=$n --iters 1 --warmup 0
[ "$rc" -eq 0 ] || fail "adam on one host (the control case) exited $rc"
if crossed 2 "$n" "$before"; then fail "the checks pass a run that never left host A"; fi
echo "ok: the checks reject a run on one host"

# 4. Host B's data network down: the ranks cannot reach each other; the run
# must end non-zero within the limit (124 would be the limit, a hang).
ip -n "$ns_b" link set "$data_if" down || fail "cannot take $data_if down"
run_on_a run adam --backend cpu --ranks 2 --hosts "$host_a,$host_b" --schedule AR-C --set N=$n --iters 1 --warmup 0
[ "$rc" -ne 0 ] || fail "a run whose ranks cannot reach each other passed"
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "a run whose ranks cannot reach each other hung until the ${RUN_LIMIT_S} s limit"
# Open MPI's words for it (ompi/mca/bml/r2: "unable to reach each other").
grep -q "unable to reach each other" <<<"$out" || fail "the failed run does not say the ranks could not reach each other"
echo "ok: unreachable ranks end the run with exit $rc"

echo "PASS ($((SECONDS - start)) s)"
