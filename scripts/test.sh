#!/usr/bin/env bash
# Runs every check and test of Slipstream: formatting, lints, unit and property tests, and the
# end-to-end tests in network namespaces (those need root). Usage: sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The end-to-end tests start the real binaries (slipstreamd, slipstream-delay): build them first.
cargo build --workspace --bins
cargo test --workspace -- --test-threads=1
