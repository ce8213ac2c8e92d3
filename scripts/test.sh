#!/usr/bin/env bash
# Runs every check and test of Slipstream: formatting, lints, unit and property tests, and the
# end-to-end tests in network namespaces (those need root). Usage: sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Every step's start and length go to the log, and a table of them at the end (where CI's time goes).
steps_log=$(mktemp)
step_start() { echo "scripts/test.sh: [$(date -u +%H:%M:%S), ${SECONDS} s] $*" >&2; }
step_end() { printf '%6d s  %s\n' "$1" "${*:2}" >>"$steps_log"; }
# shellcheck disable=SC2317 # called by the EXIT trap
steps_table() {
  echo "scripts/test.sh: steps (seconds), ${SECONDS} s in all:" >&2
  cat "$steps_log" >&2
  rm -f "$steps_log"
}
trap steps_table EXIT
# timed CMD...: runs a step and records its length.
timed() {
  local t0=$SECONDS rc=0
  step_start "$*"
  "$@" || rc=$?
  step_end $((SECONDS - t0)) "$*"
  return "$rc"
}

# Runs a step with a time limit, so a hung test fails the run with its name instead of stalling
# CI until its own limit (each limit is several times the step's time on the 2-core test VM).
bounded() {
  local secs=$1
  shift
  local rc=0 t0=$SECONDS
  step_start "$*"
  timeout --kill-after=30 "$secs" "$@" || rc=$?
  step_end $((SECONDS - t0)) "$*"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "scripts/test.sh: timed out after ${secs} s: $*" >&2
  fi
  return "$rc"
}

# Runs a step of measured tests (goodputs, delays and timings through real kernels on a shared
# 2-core VM, whose hypervisor now and then steals a third of its CPU) with a time limit, every test
# binary to its end (--no-fail-fast). Tests that failed run once more, by exact name, and the step
# passes only if each passes then: a controller or testbed that is wrong fails twice, a second of
# stolen CPU does not fail CI. Both runs stay in the log. Usage: measured SECS cargo test ARGS...
measured() {
  local secs=$1
  shift
  local out rc=0
  out=$(mktemp)
  bounded "$secs" "$1" "$2" --no-fail-fast "${@:3}" 2>&1 | tee "$out" || rc=$?
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    rm -f "$out"
    return "$rc"
  fi
  # The names listed under the last "failures:" of each failed test binary.
  local failed
  failed=$(awk '
    $0 == "failures:" { n = 0; delete names; next }
    /^    [^ ]+$/ { names[++n] = $1; next }
    /^test result: FAILED/ { for (i = 1; i <= n; i++) print names[i]; n = 0 }
  ' "$out" | sort -u)
  rm -f "$out"
  if [ -z "$failed" ]; then
    return "$rc"
  fi
  # shellcheck disable=SC2086 # one argument per test name
  echo "scripts/test.sh: running once more, the failed:" $failed >&2
  # shellcheck disable=SC2086
  bounded "$secs" "$@" --exact $failed
}

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
step_end "$SECONDS" "scripts/setup.sh (installs)"

# The lane: the steps that measure nothing and use no namespace, the aarch64 cross build (with
# its tests under qemu) and the fuzz pass, run in the background beside the host's build and unit
# tests (whose compiles leave a core idle in their single-threaded links and LTO), and are joined
# before the first measured step, so no measurement shares the CPU with them. Its output goes to
# a log printed at the join; its steps are in the table, marked "(lane)".
# lane_step SECS CMD...: a step of the lane with a time limit. --foreground keeps the command in
# the lane's process group (timeout otherwise makes a group of its own), so an early end of this
# script stops the whole lane (the EXIT trap below).
lane_step() {
  local secs=$1
  shift
  local rc=0 t0=$SECONDS
  step_start "(lane) $*"
  timeout --foreground --kill-after=30 "$secs" "$@" || rc=$?
  step_end $((SECONDS - t0)) "(lane) $*"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "scripts/test.sh: timed out after ${secs} s: $*" >&2
  fi
  return "$rc"
}
lane() {
  # The aarch64 static build for routers: size budget, a smoke run and the core crates' tests,
  # all under qemu-user (target/cross; ~10 min on a fresh machine alone, 1-1.5 min warm).
  lane_step 2400 scripts/cross-aarch64.sh
  # Fuzzing, a short pass: each cargo-fuzz target (packet parsing, the window rewrite, the
  # engine's whole handle_packet) for 10 s from the committed seeds; a panic or failed check
  # fails the run.
  lane_step 1500 scripts/fuzz.sh short
}
lane_log=$(mktemp)
set -m # job control: the lane gets a process group of its own
lane >"$lane_log" 2>&1 &
lane_pid=$!
set +m
# shellcheck disable=SC2317 # called by the EXIT trap
end_of_run() {
  kill -- "-$lane_pid" 2>/dev/null || true
  steps_table
}
trap end_of_run EXIT
# lane_join: waits for the lane, prints its log, and fails if a step of it failed.
lane_join() {
  local rc=0
  wait "$lane_pid" || rc=$?
  echo "scripts/test.sh: the lane's log (cross-aarch64, fuzz):"
  cat "$lane_log"
  rm -f "$lane_log"
  [ "$rc" = 0 ] || echo "scripts/test.sh: the lane failed (status $rc)" >&2
  return "$rc"
}
timed cargo fmt --all -- --check
timed cargo clippy --workspace --all-targets -- -D warnings
# The end-to-end tests start the real binaries (slipstreamd, slipstream-delay, slipstream-synflood):
# build them first, optimised as users run them (a debug daemon is slow enough to skew the upload
# test). Only these three: the lab, the demo and slipstream-quic in release are for the lab and
# the README's demo, not for these tests (the QUIC tests use the debug build `cargo test` makes).
timed cargo build --release -p slipstreamd -p slipstream-testbed \
  --bin slipstreamd --bin slipstream-delay --bin slipstream-synflood
export SLIPSTREAMD_BIN="$PWD/target/release/slipstreamd"
export SLIPSTREAM_DELAY_BIN="$PWD/target/release/slipstream-delay"
export SLIPSTREAM_SYNFLOOD_BIN="$PWD/target/release/slipstream-synflood"
# One test at a time: the namespace tests measure timing and must not load each other.
# Tests that need root and network namespaces are #[ignore]d (a plain `cargo test` lists them as
# ignored, with the reason); this script runs them (--ignored / --include-ignored), where a
# missing prerequisite fails the test. Measurements and long soaks stay out (--skip).
bounded 2400 cargo test --workspace --exclude slipstream -- --test-threads=1
# The NFQUEUE-only daemon (the OpenWrt package with SLIPSTREAM_EBPF=0, cargo feature `ebpf` off)
# builds, and its "auto" falls back to NFQUEUE (datapath::setup's tests_without_ebpf).
timed cargo test -p slipstreamd --no-default-features --bins -- --test-threads=1
# Every step from here on measures (goodputs, delays, timings): the lane ends first.
timed lane_join
# The crates' namespace tests: firewall rules and sets, NFQUEUE, conntrack, the daemon (control
# socket, reload, privileges, window updates), the tc eBPF program run by the kernel on crafted
# frames, the testbed itself (with a QUIC download and upload through it, 12 s, and a uTP torrent, 33 s),
# dnsmasq accepting the set lines; the lab's smoke run and Ctrl-C.
measured 1200 cargo test -p slipstream-firewall -p slipstream-nfqueue -p slipstream-conntrack -p slipstreamd -p slipstream-ebpf \
  -p slipstream-testbed -p slipstream-names -- --ignored --test-threads=1 --skip cost_of_timestamps_under_a_flood
measured 900 cargo test -p slipstream-lab --test smoke --test interrupt -- --ignored --test-threads=1
# The end-to-end test prints its measurements (goodputs, delays, the daemon's rwnd trace).
measured 1500 cargo test -p slipstream --test e2e -- --include-ignored --nocapture --test-threads=1
# Household control end to end: a LAN host without TCP timestamps, 16 background flows of two
# hosts beside best effort (goodput shares, per-host split, no connection failures) and 48
# time-shared uploads behind NAT (no stall), the last two also on the eBPF datapath.
measured 1500 cargo test -p slipstream --test household -- --include-ignored --nocapture --test-threads=1
# Restart without loss: kill -9 of the daemon under a background and a best-effort download, a
# few times (SLIPSTREAM_SOAK_CYCLES, default 3; the 100-cycle soak kill_and_restart_100_times is
# skipped here): no connection broken, no rule left, control back within 2 s of each restart;
# one restart on each datapath (the eBPF one seeds its map from conntrack).
measured 900 cargo test -p slipstream --test restart -- --include-ignored --nocapture --test-threads=1 \
  --skip kill_and_restart_100_times
# SQM beside Slipstream (issue 23): sqm-scripts' simple.qos shape (HTB egress, ingress qdisc with
# a mirred redirect to an IFB with HTB) on the router's LAN interface, started before and after
# the daemon, on both datapaths: SQM's rates hold and Slipstream's clamp shows in its metrics.
measured 600 cargo test -p slipstream --test sqm -- --include-ignored --nocapture --test-threads=1
measured 600 cargo test -p slipstream --test udp -- --include-ignored --nocapture --test-threads=1 --skip _ebpf
# Rules by name: real dnsmasq fills the rule's sets from its answers (fw3: ipset, with the daemon
# clamping the named download while the other name's download passes untouched; fw4: nftset and
# the kernel's classification), the set entry expires, and lan_hostnames follow a lease file.
measured 900 cargo test -p slipstream --test names -- --include-ignored --nocapture --test-threads=1
# Floods: 100 000 spoofed SYNs at 5 000/s, then as fast as possible, then at over twice the
# daemon's capacity, beside a best-effort download: none lost, flow table and memory bounded,
# best effort kept; fail-open bypass and CPU printed (1 000 000 SYNs: --ignored syn_flood_1m).
measured 900 cargo test -p slipstream --test flood -- --include-ignored --nocapture --test-threads=1 --skip syn_flood_1m
# The Grafana dashboard: a real Prometheus scrapes a real daemon under traffic, and every panel's
# query must return data through Prometheus' HTTP API.
measured 900 cargo test -p slipstream --test dashboard -- --include-ignored --nocapture --test-threads=1
# The live page in a real browser (Debian's chromium and chromium-driver, through python3-selenium):
# what it shows against the daemon's JSON and /metrics under a background and a best-effort
# download (the yield, engine, flow count, LAN host's name and rates, rule's bytes today, link
# budget), an update, no console errors, no overflow at 375 and 1280 px. About 40 s; the CPU
# measurement page_cpu_cost is skipped.
measured 300 cargo test -p slipstream --test page -- --include-ignored --nocapture --test-threads=1 --skip page_cpu_cost
# The OpenWrt package: its init script against stand-ins for procd (under dash and under
# busybox ash, OpenWrt's shell), its Makefile against stand-ins for the SDK.
timed sh openwrt/tests/init_script.sh
timed busybox sh openwrt/tests/init_script.sh   # OpenWrt's shell: busybox ash
timed sh openwrt/tests/makefile_check.sh
# luci-app-slipstream: its rpcd backend run as rpcd runs it (busybox userland, the release
# binaries, a real daemon in a namespace), its views run under node against a stand-in of LuCI's
# API, every UCI option and value they offer checked by slipstreamd --check-config, menu, ACL,
# Makefile (~16 s with the release binaries on a busy 2-core machine, 9 s of CPU).
bounded 300 sh openwrt/tests/luci_app.sh
# (The aarch64 build and the fuzz pass ran in the lane, above.)
