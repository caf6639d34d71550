#!/bin/sh
# Best of three `easemlc check` wall times per program, in ms: `EASEMLC=PATH time_check.sh FILE.eml...`
# prints `name | bytes | exit status | ms | easemlc's last line`.
out=$(mktemp)
for f in "$@"; do
  best=999999
  for r in 1 2 3; do
    s=$(date +%s%N); "$EASEMLC" check "$f" > "$out" 2>&1; rc=$?; e=$(date +%s%N)
    t=$(( (e - s) / 1000000 )); [ $t -lt $best ] && best=$t
  done
  echo "$(basename "$f" .eml) | $(wc -c < "$f") | $rc | $best | $(tail -1 "$out" | cut -c1-70)"
done
rm -f "$out"
