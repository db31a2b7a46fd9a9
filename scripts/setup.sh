#!/usr/bin/env bash
# Idempotent set-up for building and testing Weir on a fresh machine:
# the wasm32-wasip2 target that operator components are built for, and
# libclang (RocksDB's bindings are generated at build time). `setup.sh demo`
# stops there: the demo needs no browser. `setup.sh python`, `setup.sh js`
# and `setup.sh languages` (both) add the toolchains of operators in Python
# and JavaScript; plain `setup.sh` everything the tests need.
set -euo pipefail
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
apt_install() {
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    else
        sudo apt-get update -qq
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
    fi
}
if ! dpkg -s libclang-dev >/dev/null 2>&1; then
    apt_install libclang-dev
fi
if [ "${1:-}" = demo ]; then
    exit 0
fi
toolchains="${WEIR_TOOLCHAINS:-$HOME/.cache/weir/toolchains}"
# Python operators: componentize-py, which `weir build` runs, and pytest,
# pinned in sdk/python/requirements-build.txt, in a virtual environment
# outside the clone (installed again only when the pins change).
if [ "${1:-}" != js ]; then
    python_venv="$toolchains/python"
    if ! cmp -s sdk/python/requirements-build.txt "$python_venv/requirements.txt"; then
        rm -rf "$python_venv"
        python3 -m venv "$python_venv"
        "$python_venv/bin/pip" install -q --disable-pip-version-check -r sdk/python/requirements-build.txt
        cp sdk/python/requirements-build.txt "$python_venv/requirements.txt"
    fi
fi
# JavaScript operators: esbuild, jco and componentize-js, which `weir build`
# runs, pinned in sdk/js/toolchain/package-lock.json, outside the clone.
if [ "${1:-}" != python ]; then
    js_dir="$toolchains/js"
    if ! cmp -s sdk/js/toolchain/package-lock.json "$js_dir/package-lock.json"; then
        rm -rf "$js_dir"
        mkdir -p "$js_dir"
        cp sdk/js/toolchain/package.json sdk/js/toolchain/package-lock.json "$js_dir/"
        npm ci --prefix "$js_dir" --no-audit --no-fund --loglevel=error
    fi
fi
# `setup.sh python`, `setup.sh js` and `setup.sh languages` stop there.
case "${1:-}" in python | js | languages) exit 0 ;; esac
# The test suite checks formatting and lints.
for component in rustfmt clippy; do
    if ! rustup component list --installed | grep -q "^$component"; then
        rustup component add "$component"
    fi
done
# The dashboard's browser test: Debian's Chromium, and Playwright (the npm
# package only, pinned in tests/browser/package-lock.json; it drives the
# system's Chromium and downloads no browser).
if [ ! -x /usr/bin/chromium ]; then
    apt_install chromium
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
    npm ci --prefix tests/browser --no-audit --no-fund
fi
# The REST API's fuzz test: schemathesis and its dependencies, pinned in
# tests/schemathesis/requirements.txt, in a virtual environment outside the
# clone (installed again only when the pins change).
venv="${WEIR_SCHEMATHESIS_VENV:-$HOME/.cache/weir/schemathesis}"
if ! cmp -s tests/schemathesis/requirements.txt "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r tests/schemathesis/requirements.txt
    cp tests/schemathesis/requirements.txt "$venv/requirements.txt"
fi
# The Kafka connector's tests: tansu, a Kafka-protocol broker (Debian has
# none), built once from crates.io into a cache outside the clone (15-30
# minutes on two cores; the tests find it there, or at $WEIR_TANSU).
tansu_root="$HOME/.cache/weir/tansu-0.6.0"
if [ ! -x "$tansu_root/bin/tansu" ]; then
    CARGO_TARGET_DIR="$HOME/.cache/weir/tansu-build" CARGO_INCREMENTAL=0 \
        cargo install tansu --version 0.6.0 --locked --features dynostore,libsql --root "$tansu_root"
    rm -rf "$HOME/.cache/weir/tansu-build"
fi
