#!/usr/bin/env bash
# Idempotent set-up for building and testing Weir on a fresh machine:
# the wasm32-wasip2 target that operator components are built for.
set -euo pipefail
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
# The dashboard's browser test: Debian's Chromium, and Playwright (the npm
# package only, pinned in tests/browser/package-lock.json; it drives the
# system's Chromium and downloads no browser).
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    else
        sudo apt-get update -qq
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    fi
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
    npm ci --prefix tests/browser --no-audit --no-fund
fi
