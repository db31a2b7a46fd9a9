#!/usr/bin/env bash
# The demo: start the embedded mini-cluster (`weir local`: a coordinator and
# two workers in one process), submit the word count of a text shipped in the
# repository at parallelism 2 over its REST API, wait for it, and print the
# most frequent words. `scripts/demo.sh --keep` leaves the cluster running
# afterwards, to look at the job in the dashboard.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
scripts/setup.sh demo
# The demo needs neither RocksDB nor the Kafka connector: without them (and
# their C and C++ libraries) a cold build takes half the time. Its binary is
# kept apart (the `demo` profile); `cargo build --release` makes the whole
# `weir`.
cargo build --profile demo -p weir --no-default-features
weir="$CARGO_TARGET_DIR/demo/weir"
work="$(mktemp -d)"
out="$work/counts.jsonl"

"$weir" local --listen 127.0.0.1:0 --data-dir "$work/data" --allow-dir "$PWD/examples" --allow-dir "$work" \
    > "$work/local.log" 2>&1 &
local_pid=$!
stop() { kill "$local_pid" 2> /dev/null || true; }
[ "${1:-}" = "--keep" ] || trap stop EXIT
url=""
for _ in $(seq 1 300); do
    url="$(grep -o 'http://[^ ,]*' "$work/local.log" | head -n 1 || true)"
    [ -n "$url" ] && break
    kill -0 "$local_pid" 2> /dev/null || { cat "$work/local.log"; exit 1; }
    sleep 0.2
done
[ -n "$url" ] || { echo "weir local did not start"; cat "$work/local.log"; exit 1; }
echo "weir local: REST API and dashboard on $url"

"$weir" submit examples/wordcount --coordinator "$url" --parallelism 2 --wait \
    --param "input=$PWD/examples/wordcount/data/sample.txt" \
    --param "output=$out"
echo
echo "Top words (from $out):"
# Each line is {"word":w,"count":c}; a word's largest count is its total.
awk -F'"' '{ c = $7; gsub(/[:,}]/, "", c); if (c + 0 > best[$4]) best[$4] = c + 0 }
           END { for (w in best) printf "%6d  %s\n", best[w], w }' "$out" | sort -rn | head -10
if [ "${1:-}" = "--keep" ]; then
    echo
    echo "The cluster keeps running: open $url in a browser; stop it with: kill $local_pid"
fi
