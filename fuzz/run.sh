#!/usr/bin/env bash
# Fuzz each target for a bounded time (default 60 s each) from the seeds in
# fuzz/seeds/<target>, with a copy of them as the working corpus (the seeds
# stay as committed). Needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`); not part of scripts/test.sh.
#   fuzz/run.sh [seconds] [target...]
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame manifest bundle)
target_dir="${CARGO_TARGET_DIR:-$HOME/.cache/weir}/fuzz-target"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
    mkdir -p "$work/$t"
    cp -r "seeds/$t/." "$work/$t/"
    echo "== $t: ${seconds} s"
    cargo +nightly fuzz run --target-dir "$target_dir" "$t" "$work/$t" -- \
        -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048
done
