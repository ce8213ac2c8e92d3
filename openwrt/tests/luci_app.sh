#!/bin/sh
# Checks of openwrt/luci-app-slipstream without LuCI, rpcd or an OpenWrt build tree:
#
# - the rpcd backend (root/usr/libexec/rpcd/luci.slipstream) run as rpcd runs it (`list`, and
#   `call <method>` with the arguments on stdin) with OpenWrt's userland (busybox's sed, awk, tr,
#   ... first on PATH) and the real slipstreamd and slipstream binaries: config checks of good and
#   bad files (the section and option each error names), presets, environment, a stopped daemon;
#   as root also a real daemon in a network namespace of its own (status, flows, history);
# - the views, menu and ACL (tests/luci_app.js, under node): syntax, requires, each view run
#   against a recording stand-in of LuCI's form/uci/rpc API fed the backend's real answers, every
#   UCI option they edit accepted by slipstreamd (as a list where it takes one), rpc methods in
#   backend and ACL, menu entries and files;
# - the package Makefile read by GNU make against stand-ins for rules.mk and the LuCI feed's
#   luci.mk, and its installed tree.
#
# What needs LuCI itself (the pages in a browser, LuCI's form widgets, rpcd's ACL enforcement,
# uci's staged changes) is not checked here: README.md of the app says what.
# Usage: sh openwrt/tests/luci_app.sh   (SLIPSTREAMD_BIN as scripts/test.sh sets it, or built
# binaries under $CARGO_TARGET_DIR or target/); exit status 0 when every check passes.
set -u
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
APP=$REPO/openwrt/luci-app-slipstream
BACKEND=$APP/root/usr/libexec/rpcd/luci.slipstream
TMP=$(mktemp -d)
NS=""
DAEMON_PID=""
cleanup() {
	[ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null
	[ -n "$NS" ] && ip netns del "$NS" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else fail "$desc"; fi; }

# --- Tools and binaries -------------------------------------------------------------------------
for t in node make; do
	command -v "$t" >/dev/null 2>&1 || { echo "luci_app: $t not installed (scripts/setup.sh installs it)"; exit 1; }
done
find_bin() {
	for d in ${SLIPSTREAMD_BIN:+"$(dirname "$SLIPSTREAMD_BIN")"} "${CARGO_TARGET_DIR:-$REPO/target}/release" \
		"${CARGO_TARGET_DIR:-$REPO/target}/debug"; do
		[ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
	done
	return 1
}
SLIPSTREAMD=$(find_bin slipstreamd) || { echo "luci_app: no slipstreamd built (cargo build --bins)"; exit 1; }
# One multicall binary: `slipstream` is slipstreamd under another name (the package installs a
# symlink); a separately built CLI is used only where one sits beside it.
CLI=$(find_bin slipstream) || CLI=$SLIPSTREAMD
echo "luci_app: slipstreamd $SLIPSTREAMD, slipstream $CLI"

# The backend's PATH: the two binaries, busybox's applets where busybox is installed (OpenWrt's
# userland; the backend's sed -E, awk and tr must work with them), and a stand-in for OpenWrt's
# `uci` that answers `get slipstream.@slipstream[0].<option>` from the config file (and nothing
# else: `export` of staged changes fails, so check_config falls back to the committed file).
BIN=$TMP/bin
mkdir -p "$BIN"
ln -s "$SLIPSTREAMD" "$BIN/slipstreamd"
ln -s "$CLI" "$BIN/slipstream"
if command -v busybox >/dev/null 2>&1; then
	for a in sed awk tr head cat mktemp cp rm; do ln -s "$(command -v busybox)" "$BIN/$a"; done
fi
# $RUN ARGS...: the backend under OpenWrt's shell (busybox ash) where busybox is installed.
RUN=$TMP/run-backend
if command -v busybox >/dev/null 2>&1; then
	printf '#!/bin/sh\nexec busybox sh "%s" "$@"\n' "$BACKEND" >"$RUN"
else
	printf '#!/bin/sh\nexec sh "%s" "$@"\n' "$BACKEND" >"$RUN"
fi
chmod +x "$RUN"
if [ -n "${LUCI_APP_UCI:-}" ]; then
	# OpenWrt's real uci (built from openwrt/uci by hand; Debian has none): the staged path too.
	printf '#!/bin/sh\nexec "%s" "$@"\n' "$LUCI_APP_UCI" >"$BIN/uci"
else
	cat >"$BIN/uci" <<'EOF'
#!/bin/sh
	# Stand-in for OpenWrt's uci: `uci -q -c DIR get slipstream.@slipstream[0].OPTION` only.
	dir=/etc/config
	while [ $# -gt 0 ]; do
		case "$1" in
		-q) shift ;;
		-c) dir=$2; shift 2 ;;
		-t) shift 2 ;;
		get) opt=${2##*.}; sed -n "/^config slipstream/,/^config /s/^[[:space:]]*option $opt '\(.*\)'/\1/p" "$dir/slipstream" 2>/dev/null | head -n 1; exit 0 ;;
		*) exit 1 ;;
		esac
	done
	exit 1
EOF
fi
chmod +x "$BIN/uci"
CONF_DIR=$TMP/etc
mkdir -p "$CONF_DIR"
# call METHOD [ARGS-JSON]: the backend as rpcd runs it; its stdout in $TMP/out.json.
call() {
	printf '%s' "${2:-{\}}" | env PATH="$BIN:$PATH" SLIPSTREAM_CONF_DIR="$CONF_DIR" "$RUN" call "$1" >"$TMP/out.json" 2>"$TMP/err"
}
# js EXPR: evaluates EXPR with `a` = the last answer (parsed); true when it is truthy.
js() {
	node -e "const a = JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8')); process.exit(($1) ? 0 : 1)" "$TMP/out.json"
}
valid_json() { node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$TMP/out.json" 2>/dev/null; }
# answer NAME: keeps the last answer for the views' run.
answer() { cp "$TMP/out.json" "$TMP/answer.$1.json"; }

# --- The backend: syntax ------------------------------------------------------------------------
check "backend executable (git mode 100755)" test "$(git ls-files -s "$BACKEND" | cut -c1-6)" = 100755 -o \
	-z "$(git ls-files "$BACKEND")" -a -x "$BACKEND"
check "backend: sh -n" sh -n "$BACKEND"
command -v busybox >/dev/null 2>&1 && check "backend: busybox ash -n" busybox ash -n "$BACKEND"
if command -v shellcheck >/dev/null 2>&1; then
	check "backend: shellcheck" shellcheck -s sh -e SC3043 "$BACKEND"
fi

# --- list ---------------------------------------------------------------------------------------
env PATH="$BIN:$PATH" "$RUN" list >"$TMP/out.json" 2>"$TMP/err"
check "list: a JSON object" valid_json
cp "$TMP/out.json" "$TMP/backend-list.json"
check "list: the seven methods" js 'Object.keys(a).sort().join() == "check_config,environment,flows,history,hosts,presets,status"'
check "list: history takes since as a 64-bit integer, flows top" js 'a.history.since === 64 && a.flows.top === 32'

# --- check_config -------------------------------------------------------------------------------
cp openwrt/files/slipstream.config "$CONF_DIR/slipstream"
call check_config '{"ubus_rpc_session":"00000000000000000000000000000000"}'
check "check_config: shipped config valid" js 'a.valid === true && a.summary == "valid (3 rules)" && a.source == "committed"'
answer check_config
if [ -n "${LUCI_APP_UCI:-}" ]; then
	# A change staged in a session's delta directory (as rpcd keeps them), not committed: the
	# check sees it; without the session it checks the committed file.
	sid=0123456789abcdef0123456789abcdef
	mkdir -p "$TMP/rpcd/uci-$sid"
	"$LUCI_APP_UCI" -c "$CONF_DIR" -t "$TMP/rpcd/uci-$sid" set slipstream.bittorrent.remote_port='6999-6881'
	printf '{"ubus_rpc_session":"%s"}' "$sid" | env PATH="$BIN:$PATH" SLIPSTREAM_CONF_DIR="$CONF_DIR" \
		SLIPSTREAM_SESSION_DELTA_PREFIX="$TMP/rpcd/uci-" "$RUN" call check_config >"$TMP/out.json"
	check "check_config (real uci): a staged change is checked" \
		js "a.valid === false && a.source == 'staged' && a.section == 'bittorrent' && a.option == 'remote_port' && a.message.includes('reversed')"
	call check_config
	check "check_config (real uci): without the session, the committed file" js 'a.valid === true && a.source == "committed"'
fi
# bad FILE-EDIT TYPE SECTION OPTION MESSAGE-PART: the config with one edit (a sed script or
# a whole file), and what the answer must name.
bad() {
	what=$1 edit=$2 stype=$3 section=$4 option=$5 part=$6
	case "$edit" in
	s/*) sed "$edit" openwrt/files/slipstream.config >"$CONF_DIR/slipstream" ;;
	*) printf '%b' "$edit" >"$CONF_DIR/slipstream" ;;
	esac
	call check_config
	check "check_config: $what: valid JSON" valid_json
	check "check_config: $what: names $stype '$section' option '$option', says '$part'" \
		js "a.valid === false && a.section_type == '$stype' && a.section == '$section' && a.option == '$option' && a.message.includes('$part') && a.error.includes('$CONF_DIR/slipstream')"
}
bad "reversed port range" "s/6881-6999'/6999-6881'/" rule bittorrent remote_port "is reversed"
bad "unknown option" "s/option hook 'forward'/option hook_typo 'forward'/" slipstream main hook_typo "unknown option"
bad "household gain 2" "s/option gain '0.5'/option gain '2'/" household household gain "not 2"
bad "list for a single value" "s/option ack_queue '8470'/list ack_queue '8470'/" slipstream main ack_queue "takes a single value"
bad "anonymous rule without a name" "config rule\n\toption remote_port '80'\n" rule "@rule[0]" "" "anonymous rule section"
bad "syntax error" "config rule 'a'\n\toption remote_port '80\n" "" "" "" "unterminated"
# Quotes and a backslash in the daemon's message come back intact through the JSON escaping.
printf "config slipstream 'main'\n\toption hook \"a'b\\\\\\\\\\\\\"c\"\n" >"$CONF_DIR/slipstream"
call check_config
check "check_config: quotes and backslashes escaped (valid JSON)" valid_json
want=$("$SLIPSTREAMD" --check-config "$CONF_DIR/slipstream" 2>&1)
# shellcheck disable=SC2016 # $0 is expanded by the inner sh
check "check_config: quotes and backslashes round-trip (the error is the daemon's, byte for byte)" \
	env WANT="${want#error: }" sh -c 'node -e "const a = JSON.parse(require(\"fs\").readFileSync(process.argv[1], \"utf8\")); process.exit(a.error === process.env.WANT && a.option == \"hook\" ? 0 : 1)" "$0"' "$TMP/out.json"

# --- status, flows, history, hosts without a daemon ---------------------------------------------
cp openwrt/files/slipstream.config "$CONF_DIR/slipstream"
sed -i "s|option control_socket '.*'|option control_socket '$TMP/none.sock'|; s|option metrics_listen '.*'|option metrics_listen '127.0.0.1:9'|" \
	"$CONF_DIR/slipstream"
call status
check "status, no daemon: running false, the error names the configured socket" \
	js "a.running === false && a.error.includes('$TMP/none.sock')"
call flows
check "flows, no daemon: running false" js 'a.running === false && typeof a.error == "string"'
call history '{"since": 1764316800000}'
check "history, no listener: available false, the URL asked with since" \
	js 'a.available === false && a.error.includes("http://127.0.0.1:9/api/history?since=1764316800000")'
call hosts
check "hosts, no listener: available false" js 'a.available === false'

# --- presets, environment, an unknown method ----------------------------------------------------
call presets
answer presets
n_cli=$("$BIN/slipstream" presets | awk 'NR > 1 && /^$/ { exit } NR > 1 { n++ } END { print n }')
check "presets: the CLI's $n_cli presets, steam first with its description" \
	js "a.presets.length == $n_cli && a.presets[0].name == 'steam' && a.presets[0].names > 0 && a.presets[0].description.startsWith('Steam')"
call environment
answer environment
check "environment: valid JSON with dnsmasq, firewall, the daemon's version" \
	js "['full','basic','missing'].includes(a.dnsmasq) && ['fw4','fw3','none'].includes(a.firewall) && a.slipstreamd == '$("$SLIPSTREAMD" --version | head -n 1)'"
# A dnsmasq without set support (OpenWrt's default package) is reported as such.
mkdir -p "$TMP/bin2"
printf '#!/bin/sh\necho "Dnsmasq version 2.90"\necho "Compile time options: IPv6 GNU-getopt no-DBus UBus no-i18n no-IDN DHCP DHCPv6 no-Lua TFTP no-conntrack no-ipset no-nftset auth no-cryptohash no-DNSSEC loop-detect inotify dumpfile"\n' \
	>"$TMP/bin2/dnsmasq"
chmod +x "$TMP/bin2/dnsmasq"
printf '{}' | env PATH="$TMP/bin2:$BIN:$PATH" SLIPSTREAM_CONF_DIR="$CONF_DIR" "$RUN" call environment >"$TMP/out.json"
check "environment: dnsmasq without nftset/ipset is basic" js 'a.dnsmasq == "basic"'
# flows keeps the `top` busiest of the CLI's pretty JSON (serde_json's layout: two-space
# indentation, as JSON.stringify(x, null, 2)); a stand-in CLI prints three flows, one with a
# nested object.
mkdir -p "$TMP/bin3"
node -e 'const f = i => ({ rule: "r" + i, endpoints: ["192.168.1.2:" + i, "1.2.3.4:80"], sender: null,
	piv: i == 1 ? { sum_ms: 1.5, positive_ratio: 0.5, count: 3 } : null, goodput_bps: 10 - i, held: false });
	console.log(JSON.stringify({ active: 3, max: 4096, flows: [f(0), f(1), f(2)] }, null, 2));' >"$TMP/flows3.json"
printf '#!/bin/sh\ncat "%s"\n' "$TMP/flows3.json" >"$TMP/bin3/slipstream"
chmod +x "$TMP/bin3/slipstream"
for top in 1 2 3 9; do
	printf '{"top": %s}' "$top" | env PATH="$TMP/bin3:$BIN:$PATH" SLIPSTREAM_CONF_DIR="$CONF_DIR" "$RUN" call flows >"$TMP/out.json"
	n=$((top < 3 ? top : 3))
	check "flows top $top: the $n busiest, active still 3" \
		js "a.running === true && a.flows.active == 3 && a.flows.flows.map(f => f.rule).join() == ['r0','r1','r2'].slice(0, $n).join() && (a.flows.flows[1] ? a.flows.flows[1].piv.count == 3 : true)"
done
printf '{}' | env PATH="$BIN:$PATH" SLIPSTREAM_CONF_DIR="$CONF_DIR" "$RUN" call nosuch >"$TMP/out.json"
check "unknown method: exit status 1" test $? -eq 1

# --- A real daemon (root: a network namespace of its own) ---------------------------------------
if [ "$(id -u)" -eq 0 ] && ip netns add "sslu$$" 2>/dev/null; then
	NS=sslu$$
	ip -n "$NS" link set lo up
	ip -n "$NS" link add br-lan type veth peer name br-peer && ip -n "$NS" link set br-lan up
	sed "s|option control_socket '.*'|option control_socket '$TMP/ctl.sock'|; s|option metrics_listen '.*'|option metrics_listen '127.0.0.1:9617'|" \
		openwrt/files/slipstream.config >"$CONF_DIR/slipstream"
	ip netns exec "$NS" "$SLIPSTREAMD" --config "$CONF_DIR/slipstream" --allow-flow-offload >"$TMP/daemon.log" 2>&1 &
	DAEMON_PID=$!
	i=0
	while [ "$i" -lt 100 ] && ! [ -S "$TMP/ctl.sock" ]; do sleep 0.1; i=$((i + 1)); done
	check "real daemon: control socket up within 10 s" test -S "$TMP/ctl.sock"
	# ncall METHOD [ARGS]: the backend inside the daemon's namespace (its loopback HTTP listener).
	ncall() {
		printf '%s' "${2:-{\}}" | ip netns exec "$NS" env PATH="$BIN:$PATH" SLIPSTREAM_CONF_DIR="$CONF_DIR" \
			"$RUN" call "$1" >"$TMP/out.json" 2>"$TMP/err"
	}
	ncall status
	answer status
	check "real daemon: status running, the three shipped rules, its pid" \
		js "a.running === true && a.status.rules.filter(r => !r.removed).map(r => r.name).join() == 'bittorrent,bittorrent-incoming,dscp-background' && a.status.pid == $DAEMON_PID"
	check "real daemon: status reports its firewall rules in place" js 'a.status.firewall.installed === true'
	ncall flows
	answer flows
	check "real daemon: flows answered (no traffic: none active)" js 'a.running === true && a.flows.active === 0 && Array.isArray(a.flows.flows)'
	ncall history
	answer history
	# A daemon with the live page answers with its history; one without it (404) is reported
	# unavailable, and the live view keeps its own history.
	if curl -fsS -o /dev/null -m 3 "http://127.0.0.1:9617/api/history" 2>/dev/null ||
		ip netns exec "$NS" curl -fsS -o /dev/null -m 3 "http://127.0.0.1:9617/api/history" 2>/dev/null; then
		check "real daemon: history from its live page API" js 'a.available === true && Array.isArray(a.history.samples)'
	else
		check "real daemon without /api/history: history unavailable" js 'a.available === false'
	fi
	ncall hosts
	answer hosts
	check "real daemon: hosts answered as JSON" valid_json
	kill "$DAEMON_PID" && wait "$DAEMON_PID"
	check "real daemon: exits cleanly on SIGTERM" test $? -eq 0
	DAEMON_PID=""
else
	echo "skip: the real daemon part needs root and ip netns"
	call status && answer status
	call flows && answer flows
	call history && answer history
	call hosts && answer hosts
fi

# --- The views, menu and ACL (node) -------------------------------------------------------------
for f in "$APP"/root/usr/share/luci/menu.d/*.json "$APP"/root/usr/share/rpcd/acl.d/*.json; do
	check "JSON valid: ${f#"$APP"/}" node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$f"
done
# The backend's real answers (above) and sample answers of LuCI's own objects, for the views.
node -e '
const fs = require("fs"), d = process.argv[1], r = n => JSON.parse(fs.readFileSync(d + "/answer." + n + ".json", "utf8"));
const a = { "luci.slipstream": {}, "luci-rpc": {}, "rc": {} };
for (const m of ["status", "flows", "history", "hosts", "presets", "check_config", "environment"]) a["luci.slipstream"][m] = r(m);
a["luci-rpc"].getHostHints = { "aa:bb:cc:dd:ee:ff": { name: "steam-deck", ipaddrs: ["192.168.1.20"], ip6addrs: [] } };
a["luci-rpc"].getDHCPLeases = { dhcp_leases: [{ hostname: "steam-deck", ipaddr: "192.168.1.20", macaddr: "aa:bb:cc:dd:ee:ff", expires: 3600 }], dhcp6_leases: [] };
a.rc.list = { slipstream: { start: 95, stop: 10, enabled: true, running: true } };
a.rc.init = {};
fs.writeFileSync(d + "/answers.json", JSON.stringify(a));
' "$TMP"
if node openwrt/tests/luci_app.js "$APP" "$SLIPSTREAMD" "$TMP/backend-list.json" "$TMP/answers.json" >"$TMP/js.log" 2>&1; then
	[ -n "${LUCI_APP_VERBOSE:-}" ] && cat "$TMP/js.log"
	ok "views, menu and ACL (openwrt/tests/luci_app.js: $(tail -n 1 "$TMP/js.log"))"
else
	grep -v '^ok: ' "$TMP/js.log"
	fail "views, menu and ACL (openwrt/tests/luci_app.js)"
fi

# --- The package Makefile -----------------------------------------------------------------------
SDK=$TMP/sdk
mkdir -p "$SDK/package" "$SDK/feeds/luci" "$SDK/include"
ln -s "$APP" "$SDK/package/luci-app-slipstream"
# shellcheck disable=SC2016 # a make expression
printf 'INCLUDE_DIR:=$(TOPDIR)/include\n' >"$SDK/rules.mk"
# Stand-in for the LuCI feed's luci.mk: the package name from the directory, and its install
# (htdocs/ to /www, root/ to /) as the real one does it.
cat >"$SDK/feeds/luci/luci.mk" <<'EOF'
LUCI_NAME?=$(notdir ${CURDIR})
PKG_NAME?=$(LUCI_NAME)
define Package/$(PKG_NAME)/install
	mkdir -p $(1)/www $(1)/
	cp -pR ./htdocs/* $(1)/www/
	cp -pR ./root/* $(1)/
endef
EOF
cat >"$TMP/driver.mk" <<'EOF'
include Makefile
.PHONY: vars install
vars:
	@echo "PKG_NAME=$(PKG_NAME)"
	@echo "LUCI_TITLE=$(LUCI_TITLE)"
	@echo "LUCI_DEPENDS=$(LUCI_DEPENDS)"
	@echo "LUCI_PKGARCH=$(LUCI_PKGARCH)"
	@echo "PKG_LICENSE=$(PKG_LICENSE)"
	@echo "LUCI_MK=$(LUCI_MK)"
install:
	$(call Package/luci-app-slipstream/install,$(DEST))
EOF
MK="make -s --no-print-directory -C $SDK/package/luci-app-slipstream -f $TMP/driver.mk TOPDIR=$SDK DEST=$TMP/root"
if $MK vars >"$TMP/vars" 2>"$TMP/vars.err"; then ok "make reads the Makefile"; else fail "make reads the Makefile"; cat "$TMP/vars.err"; fi
var() { sed -n "s/^$1=//p" "$TMP/vars"; }
check "PKG_NAME is luci-app-slipstream (from the directory, as luci.mk does)" test "$(var PKG_NAME)" = luci-app-slipstream
check "LUCI_DEPENDS has +luci-base and +slipstream" sh -c "echo '$(var LUCI_DEPENDS)' | grep -q '+luci-base' && echo '$(var LUCI_DEPENDS)' | grep -q '+slipstream'"
check "LUCI_PKGARCH is all (no compiled code)" test "$(var LUCI_PKGARCH)" = all
check "LUCI_TITLE and PKG_LICENSE set" test -n "$(var LUCI_TITLE)" -a -n "$(var PKG_LICENSE)"
check "luci.mk found in the luci feed" test "$(var LUCI_MK)" = "$SDK/feeds/luci/luci.mk"
check "includes ../../luci.mk first (its place in the LuCI feed)" grep -q 'wildcard ../../luci.mk' "$APP/Makefile"
if $MK install >"$TMP/install.log" 2>&1; then ok "Package install"; else fail "Package install"; cat "$TMP/install.log"; fi
R=$TMP/root
for v in overview live rules household settings; do
	check "installed /www/luci-static/resources/view/slipstream/$v.js" test -f "$R/www/luci-static/resources/view/slipstream/$v.js"
done
check "installed /www/luci-static/resources/slipstream/common.js" test -f "$R/www/luci-static/resources/slipstream/common.js"
check "installed menu.d and acl.d" test -f "$R/usr/share/luci/menu.d/luci-app-slipstream.json" \
	-a -f "$R/usr/share/rpcd/acl.d/luci-app-slipstream.json"
check "installed /usr/libexec/rpcd/luci.slipstream executable" test -x "$R/usr/libexec/rpcd/luci.slipstream"

echo "luci_app: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
