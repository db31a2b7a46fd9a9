#!/usr/bin/env bash
# The long fault-injection run: the harness of cli/tests/faults.rs (a
# coordinator and three workers on this machine, a followed file, RocksDB
# state and the exactly-once file sink) through FAULTS faults (default
# 100) of a seeded schedule. Needs root (a worker runs in a network
# namespace of its own). Prints the seed, every fault, and the summary:
# faults injected and survived, records checked, lost 0, duplicated 0.
#   bench/faults/run.sh [FAULTS [SEED]]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
export CARGO_INCREMENTAL=0
scripts/setup.sh demo
cargo build --release --target wasm32-wasip2 -p wordcount
export WEIR_FAULTS="${1:-100}"
export WEIR_FAULT_SEED="${2:-$(date +%s)}"
log="${TMPDIR:-/tmp}/weir-faults-$WEIR_FAULT_SEED.log"
status=0
cargo test --workspace --test faults -- --nocapture >"$log" 2>&1 || status=$?
grep -E "^fault|^test |panicked" "$log" || true
echo "the whole log: $log"
exit "$status"
