#!/bin/sh
# Check of openwrt/Makefile without an OpenWrt build tree: GNU make reads it against stand-ins
# for the SDK's rules.mk, package.mk and bpf.mk and the packages feed's rust-package.mk and
# rust-values.mk (laid out as in an SDK, the package linked into package/ as README.md says),
# then runs its Build/Prepare, Build/Compile and Package/slipstream/install recipes as the SDK
# would, into scratch trees, for three builds:
#
# - aarch64 (little-endian), eBPF on: the default package;
# - mips (big-endian, CONFIG_BIG_ENDIAN=y), eBPF on: the tc program must come out big-endian;
# - SLIPSTREAM_EBPF=0: the NFQUEUE-only package, no BPF toolchain.
#
# `cargo` is a stand-in on PATH that records the command line and the environment the Makefile
# and rust-package.mk give it (the SDK's release profile, the BPF toolchain variables), then does
# the part of the build that depends on them for real: it runs crates/ebpf/build.rs (compiled
# here with rustc, as cargo would) in the prepared tree with that environment, so the tc program
# is compiled by clang for the Makefile's BPF target against the stand-in bpf-headers (Debian's
# MIPS uapi headers, linux-libc-dev-mips-cross, as bpf-headers stages them; libbpf's headers
# from libbpf-dev), with none of the host's headers. Its ELF byte order is read back with
# readelf, and a probe compiled the same way shows that struct tcphdr's bit-fields follow it.
# The Rust compile itself is not run here (minutes, and the SDK's Rust toolchain); README.md
# gives the SDK-profile binary's measured size and speed.
#
# Usage: sh openwrt/tests/makefile_check.sh   (exit status 0 when every check passes; ~5 s)
# Needs: make, rustc, clang, llvm-strip, llvm-objdump, readelf, linux-libc-dev-mips-cross,
# libbpf-dev (scripts/setup.sh installs them).
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else fail "$desc"; fi; }

for tool in make rustc clang llvm-strip llvm-objdump readelf; do
  command -v "$tool" >/dev/null 2>&1 || { echo "makefile check: $tool not installed (scripts/setup.sh)"; exit 1; }
done
MIPS_UAPI=/usr/mips-linux-gnu/include
[ -f "$MIPS_UAPI/asm/byteorder.h" ] || { echo "makefile check: $MIPS_UAPI missing (linux-libc-dev-mips-cross)"; exit 1; }
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "makefile check: libbpf's headers missing (libbpf-dev)"; exit 1; }

# --- An SDK-shaped tree of stand-ins ------------------------------------------------------------
SDK=$TMP/sdk
mkdir -p "$SDK/include" "$SDK/package" "$SDK/feeds/packages/lang/rust" "$SDK/build" "$TMP/bin"
ln -s "$REPO/openwrt" "$SDK/package/slipstream"
cat >"$SDK/rules.mk" <<'EOF'
INCLUDE_DIR:=$(TOPDIR)/include
BUILD_DIR:=$(TOPDIR)/build/$(ARCH)$(if $(CONFIG_BIG_ENDIAN),-be)$(if $(filter 0,$(SLIPSTREAM_EBPF)),-nfqueue)
STAGING_DIR:=$(TOPDIR)/staging_dir/target
LN:=ln -sf
EOF
cat >"$SDK/include/package.mk" <<'EOF'
PKG_BUILD_DIR:=$(BUILD_DIR)/$(PKG_NAME)-$(PKG_VERSION)
PKG_INSTALL_DIR:=$(PKG_BUILD_DIR)/ipkg-install
INSTALL_DIR:=install -d -m0755
INSTALL_BIN:=install -m0755
INSTALL_CONF:=install -m0600
INSTALL_DATA:=install -m0644
CP:=cp -fpR
BuildPackage=$(eval PACKAGES+=$(1))
EOF
# bpf.mk's variables as OpenWrt's include/bpf.mk defines them (CLANG and LLVM_STRIP: the
# host's, as with CONFIG_USE_LLVM_HOST). BPF_CFLAGS is its LLVM-IR pipeline's, exported here as
# if the SDK leaked it: the tc program's build must not pick it up.
cat >"$SDK/include/bpf.mk" <<'EOF'
BPF_DEPENDS := @HAS_BPF_TOOLCHAIN +@NEED_BPF_TOOLCHAIN
CLANG:=$(shell command -v clang)
LLVM_STRIP:=$(shell command -v llvm-strip)
BPF_TARGET:=bpf$(if $(CONFIG_BIG_ENDIAN),eb,el)
BPF_HEADERS_DIR:=$(STAGING_DIR)/bpf-headers
export BPF_CFLAGS:=-O2 -emit-llvm -Xclang -disable-llvm-passes
EOF
# bpf-headers as it is staged: user_headers/include (headers_install for ARCH=mips) and
# tools/lib/bpf (libbpf's headers).
mkdir -p "$SDK/staging_dir/target/bpf-headers/user_headers" "$SDK/staging_dir/target/bpf-headers/tools/lib"
ln -s "$MIPS_UAPI" "$SDK/staging_dir/target/bpf-headers/user_headers/include"
ln -s /usr/include/bpf "$SDK/staging_dir/target/bpf-headers/tools/lib/bpf"
# The packages feed's lang/rust: rust-values.mk's cargo environment for packages (the release
# profile's values are the same on openwrt-23.05, openwrt-24.10 and master) and
# rust-package.mk's Build/Compile/Cargo, shaped as the real ones.
cat >"$SDK/feeds/packages/lang/rust/rust-values.mk" <<'EOF'
RUSTC_TARGET_ARCH:=$(ARCH)-unknown-linux-musl
RUST_ARCH_DEPENDS:=@(aarch64||arm||i386||loongarch64||mips||mips64||mips64el||mipsel||powerpc||powerpc64||riscv64||x86_64)
CARGO_PKG_CONFIG_VARS= \
	CARGO_BUILD_TARGET=$(RUSTC_TARGET_ARCH) \
	CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
	CARGO_PROFILE_RELEASE_DEBUG=false \
	CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=false \
	CARGO_PROFILE_RELEASE_LTO=true \
	CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
	CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
	CARGO_PROFILE_RELEASE_PANIC=unwind \
	CARGO_PROFILE_RELEASE_RPATH=false
CARGO_PKG_PROFILE:=release
EOF
cat >"$SDK/feeds/packages/lang/rust/rust-package.mk" <<'EOF'
include $(dir $(lastword $(MAKEFILE_LIST)))rust-values.mk
CARGO_PKG_VARS= $(CARGO_PKG_CONFIG_VARS) CC=cc
define Build/Compile/Cargo
	+$(CARGO_PKG_VARS) \
	cargo install -v \
		--profile $(CARGO_PKG_PROFILE) \
		$(if $(strip $(RUST_PKG_FEATURES)),--features "$(strip $(RUST_PKG_FEATURES))") \
		--root $(PKG_INSTALL_DIR) \
		--path "$(PKG_BUILD_DIR)/$(strip $(1))" \
		--locked \
		$(2)
endef
define RustBinPackage
  ifndef Package/$(1)/install
    define Package/$(1)/install
	echo RustBinPackage-default-install
    endef
  endif
endef
EOF
# The tc program's build script, compiled as cargo compiles it.
BUILD_SCRIPT=$TMP/ebpf-build-script
if rustc --edition 2021 -O crates/ebpf/build.rs -o "$BUILD_SCRIPT" 2>"$TMP/rustc.log"; then
  ok "crates/ebpf/build.rs compiles"
else
  fail "crates/ebpf/build.rs compiles"; cat "$TMP/rustc.log"
fi
# cargo: records its call, runs the tc program's build script where cargo would (in the prepared
# tree's crates/ebpf, OUT_DIR its own) unless the eBPF feature is off, and leaves slipstreamd.
cat >"$TMP/bin/cargo" <<'EOF'
#!/bin/sh
{
  echo "cargo $*"
  env | grep -E '^(CARGO_BUILD_TARGET|CARGO_PROFILE_|SLIPSTREAM_BPF_)' | sort
} >>"$CARGO_LOG"
root= path= ebpf=1
while [ $# -gt 0 ]; do
  case $1 in
    --root) root=$2; shift ;;
    --path) path=$2; shift ;;
    --no-default-features) ebpf=0 ;;
  esac
  shift
done
if [ "$ebpf" = 1 ]; then
  mkdir -p "$BPF_OUT_DIR"
  (cd "$path/../ebpf" && OUT_DIR=$BPF_OUT_DIR "$BUILD_SCRIPT") >>"$CARGO_LOG" 2>&1 || exit 1
fi
mkdir -p "$root/bin"
printf '#!/bin/sh\n' >"$root/bin/slipstreamd"
EOF
chmod +x "$TMP/bin/cargo"
export PATH="$TMP/bin:$PATH" BUILD_SCRIPT
cat >"$TMP/driver.mk" <<'EOF'
include Makefile
.PHONY: vars prepare compile install
vars:
	@echo "PKG_NAME=$(PKG_NAME)"
	@echo "PKG_VERSION=$(PKG_VERSION)"
	@echo "PKG_RELEASE=$(PKG_RELEASE)"
	@echo "PKG_BUILD_DEPENDS=$(strip $(PKG_BUILD_DEPENDS))"
	@echo "PKG_LICENSE=$(PKG_LICENSE)"
	@echo "PKG_LICENSE_FILES=$(PKG_LICENSE_FILES)"
	@echo "PKG_MAINTAINER=$(PKG_MAINTAINER)"
	@echo "PACKAGES=$(strip $(PACKAGES))"
	@echo "CONFFILES=$(strip $(Package/slipstream/conffiles))"
	@echo "DEPENDS=$(strip $(call Package/slipstream,DEPENDS))"
	@echo "SRC_DIR=$(SLIPSTREAM_SRC_DIR)"
	@echo "BUILD_DIR=$(PKG_BUILD_DIR)"
prepare:
	$(Build/Prepare)
compile:
	$(Build/Compile)
install:
	$(call Package/slipstream/install,$(DEST))
EOF
ws_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)

# --- Static checks of the Makefile's text -------------------------------------------------------
check "includes the feed's rust-package.mk" grep -q 'lang/rust/rust-package.mk' openwrt/Makefile
# shellcheck disable=SC2016 # literal make expressions
check "includes bpf.mk" grep -qxF '  include $(INCLUDE_DIR)/bpf.mk' openwrt/Makefile
# shellcheck disable=SC2016 # a literal make expression
check "RustBinPackage call" grep -qxF '$(eval $(call RustBinPackage,slipstream))' openwrt/Makefile
for k in kmod-nfnetlink-queue kmod-nft-queue kmod-nf-conntrack kmod-nf-conntrack-netlink kmod-nft-core kmod-ipt-nfqueue \
         iptables-mod-nfqueue kmod-ipt-conntrack-extra kmod-ipt-ipopt kmod-sched-core kmod-sched-bpf; do
  check "DEPENDS names $k" grep -q "+\(PACKAGE_[a-z0-9]*:\)\?$k\b" openwrt/Makefile
done
# Recipe lines of a define must start with a tab (a space breaks the build in the SDK).
check "recipes indented with tabs" sh -c "! sed -n '/^define Package\/slipstream\/install/,/^endef/p;/^define Build\//,/^endef/p' openwrt/Makefile | grep -q '^ '"

# --- One build: variables, prepare, compile, install --------------------------------------------
# build NAME MAKE-ARGS...: runs the Makefile's recipes for one configuration; the results are
# left in $TMP/NAME.* ($TMP/NAME.root: the installed tree; $TMP/NAME.cargo: cargo's calls).
build() {
  name=$1; shift
  export CARGO_LOG="$TMP/$name.cargo" BPF_OUT_DIR="$TMP/$name.bpf"
  mk="make -s --no-print-directory -C $SDK/package/slipstream -f $TMP/driver.mk TOPDIR=$SDK DEST=$TMP/$name.root $*"
  if $mk vars >"$TMP/$name.vars" 2>"$TMP/$name.err"; then ok "$name: make reads the Makefile"; else
    fail "$name: make reads the Makefile"; cat "$TMP/$name.err"; fi
  v() { sed -n "s/^$1=//p" "$TMP/$name.vars"; }
  check "$name: PKG_NAME is slipstream" test "$(v PKG_NAME)" = slipstream
  check "$name: PKG_VERSION matches the workspace ($ws_version)" test "$(v PKG_VERSION)" = "$ws_version"
  check "$name: PKG_RELEASE is set" test -n "$(v PKG_RELEASE)"
  check "$name: PKG_MAINTAINER is set" test -n "$(v PKG_MAINTAINER)"
  check "$name: PKG_LICENSE matches Cargo.toml's (MIT OR Apache-2.0)" test "$(v PKG_LICENSE)" = "MIT Apache-2.0"
  for f in $(v PKG_LICENSE_FILES); do check "$name: license file $f exists" test -s "$f"; done
  check "$name: BuildPackage slipstream" test "$(v PACKAGES)" = slipstream
  check "$name: conffile /etc/config/slipstream" test "$(v CONFFILES)" = /etc/config/slipstream
  check "$name: source dir is the workspace root" test "$(v SRC_DIR)" = "$REPO"
  BUILD=$(v BUILD_DIR)
  if $mk prepare >"$TMP/$name.prepare" 2>&1; then ok "$name: Build/Prepare"; else
    fail "$name: Build/Prepare"; cat "$TMP/$name.prepare"; fi
  check "$name: prepared tree has the workspace and the license files" test -f "$BUILD/Cargo.toml" -a \
    -f "$BUILD/Cargo.lock" -a -f "$BUILD/crates/daemon/Cargo.toml" -a -f "$BUILD/LICENSE-MIT" -a -f "$BUILD/LICENSE-APACHE"
  if $mk compile >"$TMP/$name.compile" 2>&1; then ok "$name: Build/Compile"; else
    fail "$name: Build/Compile"; cat "$TMP/$name.compile" "$CARGO_LOG" 2>/dev/null; fi
  check "$name: one cargo install, of crates/daemon" \
    test "$(grep -c '^cargo install' "$CARGO_LOG")" = 1 -a -n "$(grep "^cargo install .*--path $BUILD/crates/daemon" "$CARGO_LOG")"
  check "$name: cargo install with the SDK's release profile, locked" grep -q -- '--profile release .*--locked' "$CARGO_LOG"
  for p in OPT_LEVEL=z LTO=true CODEGEN_UNITS=1 OVERFLOW_CHECKS=true PANIC=unwind; do
    check "$name: cargo gets rust-values.mk's CARGO_PROFILE_RELEASE_$p" grep -qx "CARGO_PROFILE_RELEASE_$p" "$CARGO_LOG"
  done
  if $mk install >"$TMP/$name.install" 2>&1; then ok "$name: Package/slipstream/install"; else
    fail "$name: Package/slipstream/install"; cat "$TMP/$name.install"; fi
  R=$TMP/$name.root
  check "$name: /usr/sbin/slipstreamd executable" test -x "$R/usr/sbin/slipstreamd" -a ! -L "$R/usr/sbin/slipstreamd"
  check "$name: /usr/bin/slipstream a symlink to it" test "$(readlink "$R/usr/bin/slipstream")" = ../sbin/slipstreamd
  check "$name: the symlink resolves in the installed tree" test "$(cd "$R/usr/bin" && readlink -f slipstream)" = "$(readlink -f "$R/usr/sbin/slipstreamd")"
  check "$name: /etc/init.d/slipstream is the init script" cmp -s "$R/etc/init.d/slipstream" openwrt/files/slipstream.init
  check "$name: /etc/config/slipstream is the default config" cmp -s "$R/etc/config/slipstream" openwrt/files/slipstream.config
  check "$name: /etc/capabilities/slipstream.json is the capability file, mode 0644" \
    sh -c "cmp -s '$R/etc/capabilities/slipstream.json' openwrt/files/slipstream.json && test \"\$(stat -c %a '$R/etc/capabilities/slipstream.json')\" = 644"
  check "$name: the init script names the installed capability file" \
    grep -qF "capabilities /etc/capabilities/slipstream.json" "$R/etc/init.d/slipstream"
  check "$name: nothing else installed" test "$(cd "$R" && find . ! -type d | sort | tr '\n' ' ')" = \
    "./etc/capabilities/slipstream.json ./etc/config/slipstream ./etc/init.d/slipstream ./usr/bin/slipstream ./usr/sbin/slipstreamd "
}

# ebpf_checks NAME TARGET ENDIAN: the eBPF build's variables and its tc program.
ebpf_checks() {
  name=$1 target=$2 endian=$3
  v() { sed -n "s/^$1=//p" "$TMP/$name.vars"; }
  check "$name: PKG_BUILD_DEPENDS is rust/host bpf-headers" test "$(v PKG_BUILD_DEPENDS)" = "rust/host bpf-headers"
  check "$name: DEPENDS has \$(BPF_DEPENDS)" sh -c "echo '$(v DEPENDS)' | grep -qF '@HAS_BPF_TOOLCHAIN +@NEED_BPF_TOOLCHAIN'"
  check "$name: the eBPF feature stays on" sh -c "! grep -q -- --no-default-features '$TMP/$name.cargo'"
  check "$name: SLIPSTREAM_BPF_TARGET=$target" grep -qx "SLIPSTREAM_BPF_TARGET=$target" "$TMP/$name.cargo"
  check "$name: SLIPSTREAM_BPF_CLANG is bpf.mk's clang" grep -qx "SLIPSTREAM_BPF_CLANG=$(command -v clang)" "$TMP/$name.cargo"
  headers=$SDK/staging_dir/target/bpf-headers
  check "$name: SLIPSTREAM_BPF_INCLUDE is bpf-headers' uapi and libbpf directories" \
    grep -qx "SLIPSTREAM_BPF_INCLUDE=$headers/user_headers/include $headers/tools/lib" "$TMP/$name.cargo"
  obj=$TMP/$name.bpf/slipstream.bpf.o
  check "$name: the build script built the tc program" test -s "$obj"
  check "$name: the tc program is BPF, $endian endian" sh -c \
    "readelf -h '$obj' | grep -q 'Machine: *Linux BPF' && readelf -h '$obj' | grep -q 'Data: .*$endian endian'"
  check "$name: the tc program keeps BTF, has no DWARF (llvm-strip -g)" sh -c \
    "readelf -S '$obj' | grep -q '\.BTF ' && ! readelf -S '$obj' | grep -q '\.debug_info'"
  # struct tcphdr { ... doff:4 ... }: doff is the high nibble of byte 12 in either byte order
  # when the headers' bit-field order matches the target's (1 << 4 = 16); 1 when it does not.
  printf '#include <linux/tcp.h>\nint doff_byte(void) { struct tcphdr t = { 0 }; t.doff = 1; return ((unsigned char *)&t)[12]; }\n' \
    >"$TMP/probe.c"
  # shellcheck disable=SC2046 # the include directories, split as build.rs splits them
  clang -O2 -target "$target" -Icrates/ebpf/src/bpf/include -nostdlibinc \
    $(sed -n 's/^SLIPSTREAM_BPF_INCLUDE=/-I/p' "$TMP/$name.cargo" | sed 's/ / -I/g') \
    -c "$TMP/probe.c" -o "$TMP/$name.probe.o"
  check "$name: with these headers struct tcphdr's bit-fields follow the $endian-endian target" \
    sh -c "llvm-objdump -d '$TMP/$name.probe.o' | grep -q 'r0 = 16\$'"
}

build aarch64 ARCH=aarch64
ebpf_checks aarch64 bpfel little
check "aarch64: cargo builds for aarch64-unknown-linux-musl" grep -qx CARGO_BUILD_TARGET=aarch64-unknown-linux-musl "$TMP/aarch64.cargo"

build mips-be ARCH=mips CONFIG_BIG_ENDIAN=y
ebpf_checks mips-be bpfeb big

build nfqueue-only ARCH=aarch64 SLIPSTREAM_EBPF=0
v() { sed -n "s/^$1=//p" "$TMP/nfqueue-only.vars"; }
check "nfqueue-only: PKG_BUILD_DEPENDS is rust/host" test "$(v PKG_BUILD_DEPENDS)" = rust/host
check "nfqueue-only: no BPF toolchain or cls_bpf in DEPENDS" sh -c \
  "! echo '$(v DEPENDS)' | grep -qE 'BPF_TOOLCHAIN|kmod-sched-bpf'"
check "nfqueue-only: cargo install --no-default-features" grep -q '^cargo install .*--no-default-features' "$TMP/nfqueue-only.cargo"
check "nfqueue-only: no BPF variables passed" sh -c "! grep -q '^SLIPSTREAM_BPF_' '$TMP/nfqueue-only.cargo'"
check "nfqueue-only: no tc program built" test ! -e "$TMP/nfqueue-only.bpf"

echo "openwrt_makefile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
