#!/bin/sh
# Runs a command and passes when it exits non-zero (or with exactly $1 when $1
# is a number) and its output matches the extended regex $2.
# Usage: expect_exit.sh nonzero|CODE REGEX -- COMMAND...
want="$1"; regex="$2"; shift 3
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
echo "exit code: $rc"
if [ "$want" = nonzero ]; then [ "$rc" -ne 0 ] || { echo "FAIL: expected a non-zero exit"; exit 1; }
else [ "$rc" -eq "$want" ] || { echo "FAIL: expected exit $want"; exit 1; }; fi
printf '%s\n' "$out" | grep -Eq "$regex" || { echo "FAIL: output does not match: $regex"; exit 1; }
echo PASS
