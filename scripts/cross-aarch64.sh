#!/usr/bin/env bash
# Cross-builds Slipstream for 64-bit ARM routers: a static aarch64-unknown-linux-musl release
# binary of slipstreamd (and of the `slipstream` CLI once crates/cli exists), stripped, its size
# checked against the 4 MB budget and smoke-run under qemu-user; then the unit and integration
# tests of the core crates (wire, control, engine, config), built for aarch64 and run under qemu.
# Usage: sudo scripts/cross-aarch64.sh   (installs what it needs; idempotent)
# Output: target/cross/dist/{slipstreamd,slipstream} (build tree: target/cross, apart from the
# host build's target/ so neither invalidates the other).
#
# How, and why this way:
# - `rustup target add aarch64-unknown-linux-musl` needs static.rust-lang.org, which this machine
#   (and CI) cannot reach: only package registries are. So there is no prebuilt std for the
#   target, and std is built from source with cargo's `-Z build-std`.
# - -Z build-std needs the library sources of exactly the compiler that builds them. rustup's
#   stable (1.95) has no rust-src component here and the 1.97 nightly has none either; Debian 12
#   (bookworm updates) ships a matching pair: rustc-web + cargo-web 1.96.0+dfsg1-1~deb12u2 and
#   rust-web-src (the same version's library/ under /usr/src/rustc-1.96.0, which that rustc finds
#   as its sysroot's lib/rustlib/src/rust). RUSTC_BOOTSTRAP=1 unlocks -Z on this stable
#   compiler. Debian's cargo (/usr/bin/cargo) and rustc (/usr/bin/rustc) are called by full path
#   so rustup's toolchain stays the default for everything else. std's own dependencies
#   (library/Cargo.lock) come from crates.io.
# - Linking: the target's self-contained musl objects (crt1.o, libc.a, libunwind.a) normally come
#   with rustup's rust-std, so they are missing too. zig (PyPI `ziglang` 0.17.1) bundles musl
#   and libunwind sources for every target and builds them on demand; cargo-zigbuild 0.24.1
#   (crates.io) wires `zig cc -target aarch64-linux-musl` in as linker and C compiler.
#   -Clink-self-contained=no makes rustc leave crt objects and libc to zig. Alternatives not
#   taken: gcc-aarch64-linux-gnu is a glibc toolchain (a musl link would need musl-dev:arm64 via
#   multiarch plus hand-made specs, and a libunwind.a from elsewhere); cross-rs and
#   `cargo zigbuild` with a rustup target both download toolchains.
# - Size: the workspace's [profile.release] (thin LTO, strip) already gives ~2.7 MB for
#   slipstreamd and ~0.9 MB for slipstream, under the 4 MB budget, so no dedicated profile is
#   needed; the check below fails the run if a change pushes a binary over it.
# - Time on 2 cores: installs ~75 s once (apt ~25 s, pip ~5 s, cargo install cargo-zigbuild
#   ~45 s); warm target/cross ~7 min (fat-LTO release build ~4 min, tests at opt-level 1
#   built and run under qemu ~3 min, the engine's household model ~25 s of it).
#   target/cross takes ~1.7 GB.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-unknown-linux-musl
MAX_BYTES=4000000
ZIGLANG_VERSION=0.17.1
ZIGBUILD_VERSION=0.24.1
CORE_CRATES=(slipstream-wire slipstream-control slipstream-engine slipstream-config)

have() { command -v "$1" >/dev/null 2>&1; }
step() { echo "cross-aarch64: $*"; }

# --- Install (apt, pip, cargo install; each skipped when already there) -------------------------
if ! have cargo; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$d/cargo" ] && export PATH="$d:$PATH"
  done
fi
apt_pkgs=()
[ -x /usr/bin/rustc ] && /usr/bin/rustc --version 2>/dev/null | grep -q '^rustc 1\.96\.' || apt_pkgs+=(rustc-web)
[ -x /usr/bin/cargo ] && /usr/bin/cargo --version 2>/dev/null | grep -q '^cargo 1\.96\.' || apt_pkgs+=(cargo-web)
[ -d /usr/lib/rustlib/src/rust/library/std ] || apt_pkgs+=(rust-web-src)
have qemu-aarch64-static || apt_pkgs+=(qemu-user-static)
have file || apt_pkgs+=(file)
have llvm-strip || have aarch64-linux-gnu-strip || apt_pkgs+=(binutils-aarch64-linux-gnu)
# ziglang from PyPI; where python3 has none, into target/cross/python with pip --target (Debian's
# own python3 refuses installs outside a venv, PEP 668), found through PYTHONPATH.
zig_py="$PWD/target/cross/python"
export PYTHONPATH="$zig_py${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import ziglang' 2>/dev/null || python3 -m pip --version >/dev/null 2>&1 ||
  apt_pkgs+=(python3-pip)
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  step "apt-get install ${apt_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
fi
if ! python3 -c 'import ziglang' 2>/dev/null; then
  step "pip install ziglang==$ZIGLANG_VERSION (into $zig_py)"
  python3 -m pip install -q --root-user-action=ignore --target "$zig_py" "ziglang==$ZIGLANG_VERSION"
fi
# cargo install puts cargo-zigbuild in ~/.cargo/bin, which is not on PATH where Debian's cargo is
# used; appended, so that rustup's proxies there cannot shadow the cargo in use.
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
case ":$PATH:" in *":$cargo_bin:"*) ;; *) export PATH="$PATH:$cargo_bin" ;; esac
if ! cargo-zigbuild --version 2>/dev/null | grep -q "$ZIGBUILD_VERSION"; then
  step "cargo install cargo-zigbuild $ZIGBUILD_VERSION"
  cargo install -q --locked cargo-zigbuild --version "$ZIGBUILD_VERSION"
fi
if have llvm-strip; then STRIP=llvm-strip; else STRIP=aarch64-linux-gnu-strip; fi

# --- Toolchain environment ----------------------------------------------------------------------
export CARGO=/usr/bin/cargo RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="$PWD/target/cross"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-Clink-self-contained=no"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64-static
unset RUSTFLAGS CARGO_BUILD_RUSTFLAGS RUSTC_WRAPPER
step "$("$RUSTC" --version), $("$CARGO" --version), zig $(python3 -m ziglang version), $(cargo-zigbuild --version)"

# --- Release binaries ---------------------------------------------------------------------------
pkgs=(-p slipstreamd)
bins=(slipstreamd)
if [ -f crates/cli/Cargo.toml ]; then
  pkgs+=(-p "$(sed -n 's/^name *= *"\(.*\)"/\1/p' crates/cli/Cargo.toml | head -n1)")
  bins+=(slipstream)
fi
start=$SECONDS
step "building ${bins[*]} for $TARGET (release)"
# The router binary is built with whole-program LTO and one codegen unit (the workspace's release
# profile uses thin LTO and 4 units for build time): about a fifth smaller (4.15 -> 3.39 MB), which keeps slipstreamd
# under its 4 MB budget with the eBPF loader and rules by name; the release build takes ~4 min.
CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  cargo-zigbuild zigbuild --release --locked "${pkgs[@]}" --target "$TARGET" -Zbuild-std=std,panic_abort
step "release build took $((SECONDS - start)) s"

dist="$CARGO_TARGET_DIR/dist"
mkdir -p "$dist"
too_big=0
for b in "${bins[@]}"; do
  out="$dist/$b"
  "$STRIP" -o "$out" "$CARGO_TARGET_DIR/$TARGET/release/$b"
  file "$out"
  file "$out" | grep -q 'ARM aarch64' || { echo "cross-aarch64: $b is not an aarch64 binary" >&2; exit 1; }
  file "$out" | grep -Eq 'statically linked|static-pie linked' || { echo "cross-aarch64: $b is not static" >&2; exit 1; }
  size=$(stat -c %s "$out")
  echo "$b: stripped size $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }') MiB; budget $MAX_BYTES bytes)"
  [ "$size" -le "$MAX_BYTES" ] || { echo "cross-aarch64: $b is over the size budget" >&2; too_big=1; }
done
[ "$too_big" -eq 0 ] || exit 1

# --- Smoke run under qemu-user ------------------------------------------------------------------
qemu-aarch64-static "$dist/slipstreamd" --version
qemu-aarch64-static "$dist/slipstreamd" --check-config config/slipstream.toml
if [ -f openwrt/files/slipstream.config ]; then  # the OpenWrt package's default (UCI syntax)
  qemu-aarch64-static "$dist/slipstreamd" --check-config openwrt/files/slipstream.config
fi
if [ -x "$dist/slipstream" ]; then
  qemu-aarch64-static "$dist/slipstream" --version
fi

# --- Core crates' tests for aarch64, run under qemu ---------------------------------------------
start=$SECONDS
test_pkgs=()
for c in "${CORE_CRATES[@]}"; do test_pkgs+=(-p "$c"); done
step "testing ${CORE_CRATES[*]} for $TARGET under qemu"
# --tests: unit tests (src/) and integration tests (tests/); doctests are host-only.
# opt-level 1 (debug assertions and overflow checks stay on): under qemu an unoptimised build
# ran the engine's household model for 590 s of a 1077 s step; at opt-level 1 it takes 20 s.
CARGO_PROFILE_DEV_OPT_LEVEL=1 cargo-zigbuild test --locked "${test_pkgs[@]}" --tests --target "$TARGET" -Zbuild-std
step "aarch64 tests took $((SECONDS - start)) s"
