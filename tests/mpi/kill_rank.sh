#!/bin/sh
# The dead-rank test of a real `coconet run --ranks N` job: starts COMMAND (it
# becomes mpirun), waits until mpirun has started its rank processes and they
# have run for a moment, SIGKILLs one of them, and passes when the whole job
# then exits non-zero within BOUND seconds (no rank left hanging in a
# collective). With MODE `none` nothing is killed: the same checks must then
# fail (the job exits 0), which shows the test can fail.
# Usage: kill_rank.sh kill|none BOUND_S SETTLE_S -- COMMAND...
mode="$1"; bound="$2"; settle="$3"; shift 4
log=$(mktemp); trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1 &
job=$!

ranks=""
i=0
while [ $i -lt 200 ]; do  # up to 20 s for mpirun to start its ranks
  ranks=$(pgrep -P "$job")
  [ "$(printf '%s\n' "$ranks" | grep -c .)" -ge 2 ] && break
  sleep 0.1; i=$((i + 1))
done
[ -n "$ranks" ] || { cat "$log"; echo "FAIL: mpirun (pid $job) started no rank processes"; kill -9 "$job"; exit 1; }
sleep "$settle"
victim=$(printf '%s\n' "$ranks" | tail -n 1)
if [ "$mode" = kill ]; then
  kill -0 "$job" 2>/dev/null || { cat "$log"; echo "FAIL: the job ended before a rank could be killed"; exit 1; }
  kill -9 "$victim" && echo "killed rank process $victim (children of mpirun $job: $(echo $ranks))"
fi

start=$(date +%s)
while kill -0 "$job" 2>/dev/null; do
  if [ $(( $(date +%s) - start )) -ge "$bound" ]; then
    cat "$log"
    echo "FAIL: the job still runs ${bound} s after the kill (a rank hangs)"
    for p in $(pgrep -P "$job"); do kill -9 "$p"; done
    kill -9 "$job"
    exit 1
  fi
  sleep 0.2
done
wait "$job"; rc=$?
cat "$log"
echo "exit code: $rc after $(( $(date +%s) - start )) s"
[ "$rc" -ne 0 ] || { echo "FAIL: expected a non-zero exit"; exit 1; }
echo PASS
