#!/bin/sh
# The dead-rank test of a real `coconet run --ranks N` job: starts COMMAND
# (coconet, which starts mpirun and watches it), waits until mpirun has started
# its rank processes and one has reached a stage, SIGKILLs it after SETTLE_S, and
# passes when the whole job then exits non-zero within BOUND seconds (no rank
# left hanging in a collective) with coconet's message naming the rank, the
# signal and the stage it was running. With MODE `none` nothing is killed: the
# same checks must then fail (the job exits 0), which shows the test can fail.
# With MODE `interrupt` coconet itself gets SIGINT (Ctrl-C): the job must end
# within BOUND seconds with exit 130, "coconet: interrupted" said once, and no
# rank or mpirun left behind.
# Usage: kill_rank.sh kill|none|interrupt BOUND_S SETTLE_S -- COMMAND...
mode="$1"; bound="$2"; settle="$3"; shift 4
log=$(mktemp); trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1 &
job=$!

ranks=""
i=0
while [ $i -lt 200 ]; do  # up to 20 s for mpirun to start its ranks
  mpirun=$(pgrep -P "$job" | head -n 1)
  [ -n "$mpirun" ] && ranks=$(pgrep -P "$mpirun")
  [ "$(printf '%s\n' "$ranks" | grep -c .)" -ge 2 ] && break
  sleep 0.1; i=$((i + 1))
done
[ -n "$ranks" ] || { cat "$log"; echo "FAIL: mpirun (pid $job) started no rank processes"; kill -9 "$job"; exit 1; }
victim=$(printf '%s\n' "$ranks" | tail -n 1)
# Up to 60 s for the victim to reach its first stage (its setup, inputs and
# reference, takes seconds on a loaded machine; a rank killed before it says
# only "started"): its status file, in the folder the supervisor hands every
# rank (COCONET_RANK_STATUS_DIR, exec/rank_status.h), names the stage.
if [ "$mode" = kill ]; then
  dir=$(tr '\0' '\n' <"/proc/$victim/environ" 2>/dev/null | sed -n 's/^COCONET_RANK_STATUS_DIR=//p')
  rank=$(tr '\0' '\n' <"/proc/$victim/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  i=0
  while [ -n "$dir" ] && [ $i -lt 600 ] && ! grep -q ", stage " "$dir/rank-$rank" 2>/dev/null; do
    sleep 0.1; i=$((i + 1))
  done
fi
sleep "$settle"
if [ "$mode" = kill ]; then
  kill -0 "$job" 2>/dev/null || { cat "$log"; echo "FAIL: the job ended before a rank could be killed"; exit 1; }
  kill -9 "$victim" && echo "killed rank process $victim (children of mpirun $job: $(echo $ranks))"
fi
[ "$mode" = interrupt ] && kill -INT "$job" && echo "interrupted coconet $job" 

start=$(date +%s)
while kill -0 "$job" 2>/dev/null; do
  if [ $(( $(date +%s) - start )) -ge "$bound" ]; then
    cat "$log"
    echo "FAIL: the job still runs ${bound} s after the kill (a rank hangs)"
    for p in $ranks $mpirun; do kill -9 "$p"; done
    kill -9 "$job"
    exit 1
  fi
  sleep 0.2
done
wait "$job"; rc=$?
cat "$log"
echo "exit code: $rc after $(( $(date +%s) - start )) s"
[ "$rc" -ne 0 ] || { echo "FAIL: expected a non-zero exit"; exit 1; }
if [ "$mode" = interrupt ]; then
  [ "$rc" -eq 130 ] || { echo "FAIL: expected exit 130"; exit 1; }
  [ "$(grep -c '^coconet: interrupted$' "$log")" -eq 1 ] || { echo "FAIL: 'coconet: interrupted' not said once"; exit 1; }
  left=$(for p in $ranks $mpirun; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
  [ -z "$left" ] || { echo "FAIL: processes left: $left"; exit 1; }
  echo PASS; exit 0
fi
grep -Eq "^coconet: rank [0-9]+ died of signal 9 \(.*\) while running .*, stage " "$log" ||
  { echo "FAIL: no coconet message naming the dead rank, its signal and its stage"; exit 1; }
echo PASS
