#!/bin/sh
# Sanity check of openwrt/Makefile without an OpenWrt build tree: GNU make reads it against
# stand-ins for rules.mk, package.mk and the packages feed's rust-package.mk (laid out as in an
# SDK, the package linked into package/ as README.md says), then runs its Build/Prepare,
# Build/Compile (cargo replaced by a recorder) and Package/slipstream/install recipes into a
# scratch root, and checks the variables, the cargo calls and the installed tree.
# Usage: sh openwrt/tests/makefile_check.sh   (exit status 0 when every check passes)
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

command -v make >/dev/null 2>&1 || { echo "makefile check: make not installed"; exit 1; }

# --- An SDK-shaped tree of stand-ins ------------------------------------------------------------
SDK=$TMP/sdk
mkdir -p "$SDK/include" "$SDK/package" "$SDK/feeds/packages/lang/rust" "$SDK/build"
ln -s "$REPO/openwrt" "$SDK/package/slipstream"
cat >"$SDK/rules.mk" <<'EOF'
INCLUDE_DIR:=$(TOPDIR)/include
BUILD_DIR:=$(TOPDIR)/build
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
# The real rust-package.mk runs `cargo install --root $(PKG_INSTALL_DIR) --path <member>`; this
# one records the member and leaves the binaries that member's Cargo.toml declares.
cat >"$SDK/feeds/packages/lang/rust/rust-package.mk" <<'EOF'
RUST_ARCH_DEPENDS:=@(aarch64||arm||x86_64)
define Build/Compile/Cargo
	echo "cargo install --path $(PKG_BUILD_DIR)/$(strip $(1))" >>$(CARGO_LOG)
	test -f $(PKG_BUILD_DIR)/$(strip $(1))/Cargo.toml
	mkdir -p $(PKG_INSTALL_DIR)/bin
	for b in $$(sed -n 's/^name *= *"\(.*\)"/\1/p' $(PKG_BUILD_DIR)/$(strip $(1))/Cargo.toml); do \
		case "$$b" in slipstreamd|slipstream) printf '#!/bin/sh\n' >$(PKG_INSTALL_DIR)/bin/$$b;; esac; \
	done
endef
define RustBinPackage
  ifndef Package/$(1)/install
    define Package/$(1)/install
	echo RustBinPackage-default-install
    endef
  endif
endef
EOF
cat >"$TMP/driver.mk" <<'EOF'
include Makefile
.PHONY: vars prepare compile install
vars:
	@echo "PKG_NAME=$(PKG_NAME)"
	@echo "PKG_VERSION=$(PKG_VERSION)"
	@echo "PKG_RELEASE=$(PKG_RELEASE)"
	@echo "PKG_BUILD_DEPENDS=$(PKG_BUILD_DEPENDS)"
	@echo "PACKAGES=$(strip $(PACKAGES))"
	@echo "CONFFILES=$(strip $(Package/slipstream/conffiles))"
	@echo "DEPENDS=$(strip $(call Package/slipstream,DEPENDS))"
	@echo "SRC_DIR=$(SLIPSTREAM_SRC_DIR)"
prepare:
	$(Build/Prepare)
compile:
	$(Build/Compile)
install:
	$(call Package/slipstream/install,$(DEST))
EOF
MK="make -s --no-print-directory -C $SDK/package/slipstream -f $TMP/driver.mk TOPDIR=$SDK CARGO_LOG=$TMP/cargo.log DEST=$TMP/root"

# --- Variables ----------------------------------------------------------------------------------
if $MK vars >"$TMP/vars" 2>"$TMP/vars.err"; then ok "make reads the Makefile"; else
  fail "make reads the Makefile"; cat "$TMP/vars.err"; fi
var() { sed -n "s/^$1=//p" "$TMP/vars"; }
check "PKG_NAME is slipstream" test "$(var PKG_NAME)" = slipstream
ws_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
check "PKG_VERSION matches the workspace ($ws_version)" test "$(var PKG_VERSION)" = "$ws_version"
check "PKG_RELEASE is set" test -n "$(var PKG_RELEASE)"
check "PKG_BUILD_DEPENDS has rust/host" test "$(var PKG_BUILD_DEPENDS)" = rust/host
check "BuildPackage slipstream" test "$(var PACKAGES)" = slipstream
check "conffile /etc/config/slipstream" test "$(var CONFFILES)" = /etc/config/slipstream
check "source dir is the workspace root" test "$(var SRC_DIR)" = "$REPO"
check "includes the feed's rust-package.mk" grep -q 'lang/rust/rust-package.mk' openwrt/Makefile
# shellcheck disable=SC2016 # a literal make expression
check "RustBinPackage call" grep -qxF '$(eval $(call RustBinPackage,slipstream))' openwrt/Makefile
for k in kmod-nfnetlink-queue kmod-nft-queue kmod-nf-conntrack kmod-nf-conntrack-netlink kmod-nft-core kmod-ipt-nfqueue \
         iptables-mod-nfqueue kmod-ipt-conntrack-extra kmod-ipt-ipopt kmod-sched-core kmod-sched-bpf; do
  check "DEPENDS names $k" grep -q "+\(PACKAGE_[a-z0-9]*:\)\?$k\b" openwrt/Makefile
done
# Recipe lines of a define must start with a tab (a space breaks the build in the SDK).
check "recipes indented with tabs" sh -c "! sed -n '/^define Package\/slipstream\/install/,/^endef/p;/^define Build\//,/^endef/p' openwrt/Makefile | grep -q '^ '"

# --- Prepare, compile, install ------------------------------------------------------------------
if $MK prepare >"$TMP/prepare.log" 2>&1; then ok "Build/Prepare"; else fail "Build/Prepare"; cat "$TMP/prepare.log"; fi
BUILD=$SDK/build/slipstream-$(var PKG_VERSION)
check "prepared tree has the workspace" test -f "$BUILD/Cargo.toml" -a -f "$BUILD/Cargo.lock" \
  -a -f "$BUILD/crates/daemon/Cargo.toml"
if $MK compile >"$TMP/compile.log" 2>&1; then ok "Build/Compile"; else fail "Build/Compile"; cat "$TMP/compile.log"; fi
check "cargo install of crates/daemon" grep -qx "cargo install --path $BUILD/crates/daemon" "$TMP/cargo.log"
if [ -f crates/cli/Cargo.toml ]; then
  check "cargo install of crates/cli" grep -qx "cargo install --path $BUILD/crates/cli" "$TMP/cargo.log"
fi
if $MK install >"$TMP/install.log" 2>&1; then ok "Package/slipstream/install"; else
  fail "Package/slipstream/install"; cat "$TMP/install.log"; fi
R=$TMP/root
check "/usr/sbin/slipstreamd executable" test -x "$R/usr/sbin/slipstreamd"
if [ -f crates/cli/Cargo.toml ]; then
  check "/usr/bin/slipstream executable" test -x "$R/usr/bin/slipstream"
fi
check "/etc/init.d/slipstream executable" test -x "$R/etc/init.d/slipstream"
check "/etc/init.d/slipstream is the init script" cmp -s "$R/etc/init.d/slipstream" openwrt/files/slipstream.init
check "/etc/config/slipstream is the default config" cmp -s "$R/etc/config/slipstream" openwrt/files/slipstream.config
check "/etc/capabilities/slipstream.json is the capability file" \
  cmp -s "$R/etc/capabilities/slipstream.json" openwrt/files/slipstream.json
check "/etc/capabilities/slipstream.json mode 0644" \
  test "$(stat -c %a "$R/etc/capabilities/slipstream.json")" = 644
check "the init script names the installed capability file" \
  grep -qF "capabilities /etc/capabilities/slipstream.json" "$R/etc/init.d/slipstream"
expected="./etc/capabilities/slipstream.json ./etc/config/slipstream ./etc/init.d/slipstream "
[ -f crates/cli/Cargo.toml ] && expected="$expected./usr/bin/slipstream "
expected="$expected./usr/sbin/slipstreamd "
check "nothing else installed" test "$(cd "$R" && find . -type f | sort | tr '\n' ' ')" = "$expected"

echo "openwrt_makefile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
