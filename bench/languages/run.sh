#!/usr/bin/env bash
# Operators in Rust, Python and JavaScript side by side on this machine, and
# PyFlink's Python UDF as the yardstick, in one run: builds Weir, the
# benchmark's operators in each language (bench/operators,
# bench/languages/{python,js}) and weir-bench in release mode, installs
# Flink through PyFlink once (as bench/flink/run.sh does; skip it with
# --no-flink), runs bench/languages/run.py and writes its tables into
# docs/benchmarks.md. Other arguments go to run.py (e.g. --events 200000
# --runs 1 for a quick look).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
FLINK_VERSION=2.3.0
VENV="${WEIR_FLINK_VENV:-$HOME/.cache/weir/flink/venv-$FLINK_VERSION}"
flink=(--flink-python "$VENV/bin/python")
if [ "${1:-}" = --no-flink ]; then
    flink=()
    shift
elif ! "$VENV/bin/python" -c "import pyflink" 2>/dev/null; then
    command -v java >/dev/null || { echo "Flink needs Java (17): install a JDK, or pass --no-flink" >&2; exit 1; }
    echo "installing apache-flink==$FLINK_VERSION into $VENV (~3 minutes, ~850 MB)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "apache-flink==$FLINK_VERSION"
fi

scripts/setup.sh languages
cargo build --release -p weir -p weir-bench
cargo build --release --target wasm32-wasip2 -p bench-operators -p wordcount
weir="$CARGO_TARGET_DIR/release/weir"
"$weir" build bench/languages/python > /dev/null
"$weir" build bench/languages/js > /dev/null
# The same JavaScript on StarlingMonkey, to compare the engines.
sm="$(mktemp -d)/bench-js-starlingmonkey"
mkdir -p "$sm"
cp bench/languages/js/ops.js bench/languages/js/weir.toml "$sm/"
sed 's/"main": "ops.js"/"main": "ops.js",\n  "weir": { "engine": "starlingmonkey" }/' bench/languages/js/package.json > "$sm/package.json"
"$weir" build "$sm" > /dev/null

python3 bench/languages/run.py \
    --weir "$weir" \
    --weir-bench "$CARGO_TARGET_DIR/release/weir-bench" \
    --rust "$CARGO_TARGET_DIR/wasm32-wasip2/release/bench_operators.wasm" \
    --rust-wordcount "$CARGO_TARGET_DIR/wasm32-wasip2/release/wordcount.wasm" \
    --python bench/languages/python/.weir/component.wasm \
    --js bench/languages/js/.weir/component.wasm \
    --js-starlingmonkey "$sm/.weir/component.wasm" \
    "${flink[@]}" \
    --docs docs/benchmarks.md \
    "$@"
rm -rf "$(dirname "$sm")"
