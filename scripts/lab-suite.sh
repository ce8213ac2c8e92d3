#!/usr/bin/env bash
# Runs the lab's full suite as committed in docs/lab/README.md: every scenario at its documented
# length with every alternative, the short ones repeated, then gathers the report.
# About 7 hours on a 2-core machine. Needs root (network namespaces).
#
# Usage: sudo scripts/lab-suite.sh [extra slipstream-lab options, e.g. --scale 0.2]
# Environment: LAB_CPU=1 pins the lab (and everything it starts) to that CPU, so that other
# work on the machine disturbs its timing less; `datapath` runs first and never pinned (it
# measures what forwarding costs the whole machine: keep the machine idle while it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --workspace --bins
lab=(target/release/slipstream-lab)
if [ -n "${LAB_CPU:-}" ]; then
  lab=(taskset -c "$LAB_CPU" "${lab[@]}")
fi
target/release/slipstream-lab cleanup
target/release/slipstream-lab datapath --repeats 3 "$@"
"${lab[@]}" alone --repeats 3 "$@"
"${lab[@]}" cbr --repeats 3 "$@"
"${lab[@]}" cwnd "$@"
"${lab[@]}" onoff "$@"
"${lab[@]}" fairness "$@"
# Key et al. Fig. 6 runs on/off periods up to 150 s; at --scale 1 the scenario stops at 50 s.
"${lab[@]}" udp-square --set periods=1,5,15,50,150 "$@"
"${lab[@]}" web --repeats 2 "$@"
# Household control's own scenarios (their alternatives: household, no-control, htb-95, slipstream).
"${lab[@]}" home --alternatives household,no-control,slipstream,htb-95 "$@"
"${lab[@]}" no-timestamps "$@"
"${lab[@]}" many-flows "$@"
"${lab[@]}" weights "$@"
"${lab[@]}" link "$@"
"${lab[@]}" both "$@"
target/release/slipstream-lab report
