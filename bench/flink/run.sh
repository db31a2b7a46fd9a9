#!/usr/bin/env bash
# Weir and Apache Flink side by side on this machine, in one run: installs
# Flink 2.3 through PyFlink (once, into a cache outside the clone), builds
# Weir and the benchmark's Wasm operators in release mode, runs every
# workload on both at parallelism 1 and 2, then Weir's latency at half of
# its peak rate, and writes both tables into docs/benchmarks.md. Arguments go to compare.py (e.g. --events 1000000
# --runs 1 for a quick look).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
FLINK_VERSION=2.3.0
VENV="${WEIR_FLINK_VENV:-$HOME/.cache/weir/flink/venv-$FLINK_VERSION}"

if ! "$VENV/bin/python" -c "import pyflink" 2>/dev/null; then
    command -v java >/dev/null || { echo "Flink needs Java (17): install a JDK first" >&2; exit 1; }
    echo "installing apache-flink==$FLINK_VERSION into $VENV (~3 minutes, ~850 MB)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "apache-flink==$FLINK_VERSION"
fi

scripts/setup.sh demo
cargo build --release -p weir
cargo build --release --target wasm32-wasip2 -p bench-operators

python3 bench/flink/compare.py \
    --weir "$CARGO_TARGET_DIR/release/weir" \
    --operators "$CARGO_TARGET_DIR/wasm32-wasip2/release/bench_operators.wasm" \
    --flink-python "$VENV/bin/python" \
    --docs docs/benchmarks.md \
    "$@"

# Weir's latency at half of its peak rate (Weir only).
python3 bench/flink/latency.py \
    --weir "$CARGO_TARGET_DIR/release/weir" \
    --operators "$CARGO_TARGET_DIR/wasm32-wasip2/release/bench_operators.wasm" \
    --docs docs/benchmarks.md
