#!/usr/bin/env bash
# Installs what Slipstream's build, tests and demo need on a fresh Debian machine (run as root).
# Idempotent: skips what is already there.
set -euo pipefail

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
for pair in ip:iproute2 iptables-legacy:iptables iperf3:iperf3 ping:iputils-ping ethtool:ethtool \
            conntrack:conntrack curl:curl modprobe:kmod cc:build-essential pkg-config:pkg-config \
            shellcheck:shellcheck busybox:busybox clang:clang; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  have "$cmd" || need_pkgs+=("$pkg")
done
# The tc eBPF program (crates/ebpf) includes libbpf's bpf_helpers.h.
[ -f /usr/include/bpf/bpf_helpers.h ] || need_pkgs+=(libbpf-dev)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# Prometheus (/usr/bin/prometheus) for the dashboard test, which runs its own instance inside a
# test namespace. Debian's service is not wanted: without recommends (no node exporter), and on a
# systemd machine the service the package enables is disabled and stopped again.
if ! have prometheus; then
  echo "setup: installing prometheus"
  export DEBIAN_FRONTEND=noninteractive
  [ ${#need_pkgs[@]} -gt 0 ] || apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  if [ -d /run/systemd/system ] && have systemctl; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
fi

if ! have cargo; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$d/cargo" ] && export PATH="$d:$PATH"
  done
fi
if ! have cargo; then
  echo "setup: cargo (Rust 1.85 or newer) is needed; install it with rustup" >&2
  exit 1
fi

# Kernel pieces the datapath and the testbed use; built-in modules make modprobe a no-op.
for m in nfnetlink_queue xt_NFQUEUE xt_connmark xt_CONNMARK xt_length xt_multiport xt_dscp \
         nf_conntrack sch_tbf veth; do
  modprobe -q "$m" 2>/dev/null || true
done
