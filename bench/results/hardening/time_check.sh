#!/bin/sh
# Best of three `easemlc check` wall times per program, in ms.
for f in "$@"; do
  best=999999
  for r in 1 2 3; do
    s=$(date +%s%N); "$EASEMLC" check "$f" > /tmp/h3gen/out.txt 2>&1; rc=$?; e=$(date +%s%N)
    t=$(( (e - s) / 1000000 )); [ $t -lt $best ] && best=$t
  done
  echo "$(basename "$f" .eml) | $(wc -c < "$f") | $rc | $best | $(tail -1 /tmp/h3gen/out.txt | cut -c1-70)"
done
