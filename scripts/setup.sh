#!/usr/bin/env bash
# Idempotent set-up for building and testing Weir on a fresh machine:
# the wasm32-wasip2 target that operator components are built for.
set -euo pipefail
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
