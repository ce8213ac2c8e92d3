#!/usr/bin/env bash
# Installs what Slipstream's build, tests and demo need on a fresh Debian machine (run as root).
# Idempotent: skips what is already there.
set -euo pipefail

# dnsmasq-base: the dnsmasq binary without Debian's service (the rules-by-name test runs its own
# instances inside test namespaces); ipset and nftables: the sets dnsmasq fills.
need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
apt_updated=
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$apt_updated" ] || apt-get update -qq
  apt_updated=1
  apt-get install -y -qq "$@" >/dev/null
}
for pair in ip:iproute2 iptables-legacy:iptables iperf3:iperf3 ping:iputils-ping ethtool:ethtool \
            conntrack:conntrack curl:curl modprobe:kmod cc:build-essential pkg-config:pkg-config \
            shellcheck:shellcheck busybox:busybox ipset:ipset nft:nftables getent:libc-bin \
            dnsmasq:dnsmasq-base clang:clang; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  have "$cmd" || need_pkgs+=("$pkg")
done
# The tc eBPF program (crates/ebpf) includes libbpf's bpf_helpers.h.
[ -f /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  apt_install "${need_pkgs[@]}"
fi

# Prometheus (/usr/bin/prometheus) for the dashboard test, which runs its own instance inside a
# test namespace. Debian's service is not wanted: without recommends (no node exporter), and on a
# systemd machine the service the package enables is disabled and stopped again.
if ! have prometheus; then
  echo "setup: installing prometheus"
  apt_install --no-install-recommends prometheus
  if [ -d /run/systemd/system ] && have systemctl; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
fi

# Rust (1.85 or newer, with clippy and rustfmt for scripts/test.sh). An existing toolchain is
# used as it is: rustup's (~/.cargo/bin, put on PATH here; scripts/test.sh sources this file) or
# any cargo on PATH. On a bare Debian: the distribution's rustc-web/cargo-web (Debian 12 ships Rust
# 1.96 under these names, its plain rustc is 1.63; scripts/cross-aarch64.sh builds with the same
# compiler) with rust-web-clippy and rustfmt-web, all in /usr/bin; elsewhere rustup, when
# static.rust-lang.org can be reached.
for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
  if ! have cargo && [ -x "$d/cargo" ]; then export PATH="$d:$PATH"; fi
done
apt_has() {
  have apt-get || return 1
  [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
  local c
  c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')
  [ -n "$c" ] && [ "$c" != "(none)" ]
}
if ! have cargo; then
  if apt_has cargo-web; then
    echo "setup: no cargo; installing Debian's rustc-web cargo-web rust-web-clippy rustfmt-web"
    apt_install rustc-web cargo-web rust-web-clippy rustfmt-web
  elif have curl && curl -fsS --max-time 10 -o /dev/null https://static.rust-lang.org/rustup/release-stable.toml; then
    echo "setup: no cargo; installing Rust with rustup"
    curl -fsS --proto '=https' --tlsv1.2 https://sh.rustup.rs |
      sh -s -- -y --quiet --profile minimal --component clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
if ! have cargo; then
  echo "setup: cargo (Rust 1.85 or newer) is needed: apt has no cargo-web here and rustup cannot be reached" >&2
  exit 1
fi
# clippy and rustfmt, when the toolchain found lacks them (scripts/test.sh runs both).
for tool in clippy:rust-web-clippy fmt:rustfmt-web; do
  sub=${tool%%:*}
  cargo "$sub" --version >/dev/null 2>&1 && continue
  if have rustup; then
    rustup component add "${sub/fmt/rustfmt}"
  elif [ "$(command -v cargo)" = /usr/bin/cargo ] && apt_has "${tool#*:}"; then
    apt_install "${tool#*:}"
  fi
  cargo "$sub" --version >/dev/null 2>&1 || echo "setup: warning: cargo $sub is missing" >&2
done

# Kernel pieces the datapath and the testbed use; built-in modules make modprobe a no-op.
for m in nfnetlink_queue xt_NFQUEUE xt_connmark xt_CONNMARK xt_length xt_multiport xt_dscp \
         nf_conntrack sch_tbf veth; do
  modprobe -q "$m" 2>/dev/null || true
done
