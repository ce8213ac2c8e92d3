#!/usr/bin/env bash
# Runs every check and test of Slipstream: formatting, lints, unit and property tests, and the
# end-to-end tests in network namespaces (those need root). Usage: sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The end-to-end tests start the real binaries (slipstreamd, slipstream-delay): build them first,
# optimised as users run them (a debug daemon is slow enough to skew the upload test).
cargo build --release --workspace --bins
export SLIPSTREAMD_BIN="$PWD/target/release/slipstreamd"
export SLIPSTREAM_DELAY_BIN="$PWD/target/release/slipstream-delay"
# One test at a time: the namespace tests measure timing and must not load each other.
cargo test --workspace --exclude slipstream -- --test-threads=1
# The end-to-end test prints its measurements (goodputs, delays, the daemon's rwnd trace).
cargo test -p slipstream --test e2e -- --nocapture --test-threads=1
