#!/usr/bin/env bash
# Run Weir's whole test suite: formatting and lints (warnings are errors),
# unit tests, doctests, the integration tests (tests/all) and the CLI tests,
# after building the guest components; the Python SDK's tests with pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Build outputs live outside the clone so that repeated runs reuse them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
# One build per run: incremental compilation's bookkeeping would only cost.
export CARGO_INCREMENTAL=0
scripts/setup.sh
cargo build --release --target wasm32-wasip2 -p wordcount -p json-filter -p dead-letters -p windowed-counts -p fraud -p sessions -p mixed-rust -p test-guests -p bench-operators
# The Python and JavaScript SDKs' unit tests, and their examples' tests,
# natively (pytest, node's test runner; no WebAssembly).
root="$PWD"
python="${WEIR_TOOLCHAINS:-$HOME/.cache/weir/toolchains}/python/bin/python"
(cd sdk/python && "$python" -m pytest -q)
for example in examples/python-wordcount examples/mixed/python; do
    (cd "$example" && PYTHONPATH="$root/sdk/python" "$python" -m pytest -q -p no:cacheprovider)
done
node --test sdk/js/test/*.test.js
for example in examples/js-fraud examples/mixed/js; do
    # The SDK as the examples' `weir` package: a link, made offline.
    [ -e "$example/node_modules/weir" ] || npm ci --prefix "$example" --no-audit --no-fund --loglevel=error
    (cd "$example" && node --test)
done
cargo fmt --all --check
# Clippy only checks, and links nothing: pointing RocksDB's build at a
# library directory spares it a second build of RocksDB's C++ (the tests'
# build makes the one that is linked).
mkdir -p "$CARGO_TARGET_DIR/clippy-rocksdb"
ROCKSDB_LIB_DIR="$CARGO_TARGET_DIR/clippy-rocksdb" ROCKSDB_STATIC=1 \
    cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
