#!/usr/bin/env bash
# The demo: count the words of a text shipped in the repository with
# `weir run` at parallelism 2, and print the most frequent ones.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
scripts/setup.sh
cargo build --release -p weir
out="$(mktemp -d)/counts.jsonl"
"$CARGO_TARGET_DIR/release/weir" run examples/wordcount \
    --param input=examples/wordcount/data/sample.txt \
    --param "output=$out" \
    --parallelism 2
echo
echo "Top words (from $out):"
# Each line is {"word":w,"count":c}; a word's largest count is its total.
awk -F'"' '{ c = $7; gsub(/[:,}]/, "", c); if (c + 0 > best[$4]) best[$4] = c + 0 }
           END { for (w in best) printf "%6d  %s\n", best[w], w }' "$out" | sort -rn | head -10
