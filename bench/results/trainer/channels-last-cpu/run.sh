#!/bin/bash
# Alternating before/after: the same bench trainer command with the binary of 5a28e59 and the new one.
set -u
eval "$(cargo xtask env 2>/dev/null)"
before=target-before/release/easeml  # the binary of 5a28e59
after=target/release/easeml
for round in 1 2; do
  for side in before after; do
    bin=${!side}
    for width in 0.25 1; do
      out=OUT/$side-w$width-r$round
      timeout 900 $bin bench trainer --device cpu --size 32,64 --width $width --peer eager --no-memory --rounds 2 --out $out > $out.log 2>&1
      echo "$side width $width round $round: rc=$?"
    done
  done
done
