#!/bin/sh
# model/ depends on nothing else of coconet (DESIGN.md): no file in it includes
# a header from another folder of the repository. Usage: model_depends_on_nothing.sh ROOT
root="$1"
others=$(cd "$root" && for d in */; do d=${d%/}; [ "$d" != model ] && printf '%s|' "$d"; done)
others=${others%|}
if grep -rnE "#include \"($others)/" "$root/model"; then
  echo "FAIL: model/ includes a header of another folder ($others)"
  exit 1
fi
echo PASS
