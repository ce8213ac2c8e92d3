#!/usr/bin/env bash
# Installs what Slipstream's build, tests and demo need on a fresh Debian machine (run as root).
# Idempotent: skips what is already there.
set -euo pipefail

# dnsmasq-base: the dnsmasq binary without Debian's service (the rules-by-name test runs its own
# instances inside test namespaces); ipset and nftables: the sets dnsmasq fills; nodejs: the
# LuCI app's JavaScript checks (openwrt/tests/luci_app.sh). procps (sysctl,
# pgrep) is in every Debian install but a minimal one (debootstrap --variant=minbase).
# transmission-daemon, transmission-cli (create, show, remote) and opentracker: the uTP torrent
# swarm of the testbed and the lab (crates/testbed/src/torrent.rs); the packages' own services
# are not started (the testbed runs its instances inside its namespaces).
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
            dnsmasq:dnsmasq-base clang:clang sysctl:procps pgrep:procps node:nodejs \
            transmission-daemon:transmission-daemon transmission-create:transmission-cli \
            opentracker:opentracker; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  have "$cmd" || need_pkgs+=("$pkg")
done
# The live page's browser test (tests/page.rs): Debian's chromium and its WebDriver, driven by
# Debian's python3 with python3-selenium (not a pyenv or venv python: /usr/bin/python3).
have chromium || need_pkgs+=(chromium)
have chromedriver || need_pkgs+=(chromium-driver)
/usr/bin/python3 -c 'import selenium' >/dev/null 2>&1 || need_pkgs+=(python3-selenium)
# The tc eBPF program (crates/ebpf) includes libbpf's bpf_helpers.h.
[ -f /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
# MIPS uapi headers (headers_install for ARCH=mips, what OpenWrt's bpf-headers stages): the
# OpenWrt Makefile check builds the tc program against them, big- and little-endian. llvm:
# llvm-strip and llvm-objdump for that check (clang alone does not pull them in).
[ -f /usr/mips-linux-gnu/include/asm/byteorder.h ] || need_pkgs+=(linux-libc-dev-mips-cross)
have llvm-objdump || need_pkgs+=(llvm)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  apt_install "${need_pkgs[@]}"
  # Their Debian services are not wanted (the testbed starts its own inside its namespaces).
  case " ${need_pkgs[*]} " in
    *" transmission-daemon "*|*" opentracker "*)
      if [ -d /run/systemd/system ] && have systemctl; then
        systemctl disable --now transmission-daemon.service opentracker.service >/dev/null 2>&1 || true
      fi ;;
  esac
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

# Rust 1.88 or newer (proptest, a dev-dependency, needs 1.88; aya 1.87), with clippy and rustfmt
# for scripts/test.sh. An existing toolchain that is new enough is used as it is: rustup's
# (~/.cargo/bin, put on PATH here; scripts/test.sh sources this file) or any cargo on PATH. Else
# Debian's rustc-web/cargo-web with rust-web-clippy and rustfmt-web, all in /usr/bin, when apt
# offers them new enough (Debian 12's security updates carry 1.96; its plain rustc is 1.63, and
# bookworm's main alone has cargo-web 1.85, too old); else rustup from static.rust-lang.org
# (scripts/install-rustup.sh), pinned to 1.96 like Debian's, so that a newer stable's new clippy
# lints cannot fail scripts/test.sh. scripts/cross-aarch64.sh builds with Debian's 1.96 as well.
rust_min=1.88
rust_pin=1.96.0
rust_version() { { rustc --version 2>/dev/null || true; } | awk '{ print $2 }'; }
rust_ok() { [ -n "$1" ] && printf '%s\n%s\n' "$rust_min" "$1" | sort -V -C; }
for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
  if [ -x "$d/cargo" ] && ! { have cargo && rust_ok "$(rust_version)"; }; then export PATH="$d:$PATH"; fi
done
apt_candidate() {
  have apt-get || return 0
  [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
  { apt-cache policy "$1" 2>/dev/null || true; } | awk '/Candidate:/ && $2 != "(none)" { print $2 }'
}
apt_has() { [ -n "$(apt_candidate "$1")" ]; }
if ! { have cargo && rust_ok "$(rust_version)"; }; then
  found=$(rust_version)
  web=$(apt_candidate cargo-web)
  web=${web%%[+~-]*}
  if rust_ok "$web"; then
    echo "setup: no Rust $rust_min+ (found: ${found:-none}); installing Debian's rustc-web cargo-web $web with clippy and rustfmt"
    apt_install rustc-web cargo-web rust-web-clippy rustfmt-web
  elif have curl && curl -fsS --max-time 10 -o /dev/null https://static.rust-lang.org/rustup/release-stable.toml; then
    echo "setup: no Rust $rust_min+ (found: ${found:-none}; apt's cargo-web: ${web:-none}); installing Rust $rust_pin with rustup"
    "$(dirname "${BASH_SOURCE[0]}")/install-rustup.sh" --profile minimal --default-toolchain "$rust_pin" \
      --component clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
if ! { have cargo && rust_ok "$(rust_version)"; }; then
  echo "setup: Rust $rust_min or newer is needed (found: $(rust_version || true); apt's cargo-web: ${web:-none})." >&2
  echo "setup: on Debian 12, enable bookworm-security (cargo-web 1.96), or let this machine reach static.rust-lang.org for rustup" >&2
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
