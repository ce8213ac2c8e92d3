#!/usr/bin/env bash
# The demo: builds a namespace testbed (server - ISP with a 10 Mbit/s, 100 ms bottleneck - router
# running slipstreamd with config/slipstream.toml - LAN client), runs a best-effort and a
# background download beside each other, and prints what each got. Usage: sudo scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo build --release --workspace --bins
exec target/release/slipstream-demo --config config/slipstream.toml "$@"
