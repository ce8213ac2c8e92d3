#!/bin/sh
# Tests openwrt/files/slipstream.init without OpenWrt: the script is sourced with stand-ins for
# rc.common and procd.sh / functions.sh that record each call, and the recorded calls are
# checked. Also a syntax check (sh -n, dash -n, bash -n, busybox ash -n) and shellcheck when
# installed. OpenWrt runs init scripts with busybox ash: `busybox sh openwrt/tests/init_script.sh`
# runs the whole test (the sourced init script included) under it, as scripts/test.sh does.
# Usage: sh openwrt/tests/init_script.sh   (exit status 0 when every check passes)
# The stand-ins are called by the sourced init script, which shellcheck does not follow.
# shellcheck disable=SC2317,SC2034
set -u
cd "$(dirname "$0")/../.." || exit 1
INIT=openwrt/files/slipstream.init
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1"; }
check() { # check DESCRIPTION COMMAND...
  desc=$1; shift
  if "$@"; then ok "$desc"; else fail "$desc"; fi
}
has_line() { grep -qxF -- "$2" "$1"; }
lacks_line() { ! grep -qxF -- "$2" "$1"; }
lacks_prefix() { ! grep -q "^$2" "$1"; }

# run LOG ENABLED RUNNING ACTION...: sources the init script in a subshell with stand-ins and
# runs ACTION (an rc.common verb or a function of the script); every stand-in call goes to LOG
# as one line, "name arg arg ...". ENABLED is the value of slipstream.main.enabled ("" = unset),
# RUNNING is 0 when procd reports the instance running.
PROCD_STATE=$TMP/procd-instance
UCI_DB=$TMP/uci-db
: >"$UCI_DB"
run() {
  log=$1 uci_enabled=$2 running=$3; shift 3
  : >"$log"
  (
    rec() { echo "$*" >>"$log"; }
    # functions.sh: config_get_bool with libuci's booleans and the default for unset/unknown.
    config_load() { rec config_load "$@"; }
    config_get_bool() {
      rec config_get_bool "$@"
      _v=
      [ "$2.$3" = main.enabled ] && _v=$uci_enabled
      case "$_v" in
        1|on|true|yes|enabled) _v=1 ;;
        0|off|false|no|disabled) _v=0 ;;
        *) _v=${4:-0} ;;
      esac
      eval "$1=\$_v"
    }
    # procd.sh
    # procd.sh, with procd's handling of an updated instance (service/instance.c,
    # instance_update): a running instance whose params changed (command, or the md5 of a
    # `file` param) gets reload_signal if it has one, else a restart. The params of the last
    # instance are kept in $PROCD_STATE (one instance: slipstream's).
    procd_open_instance() { rec procd_open_instance "$@"; _params=; _reload_signal=; }
    procd_set_param() {
      rec procd_set_param "$@"
      case "$1" in
        reload_signal) _reload_signal=$2 ;;
        file) _params="$_params file $2 $(md5sum <"$2" 2>/dev/null)" ;;
        *) _params="$_params $*" ;;
      esac
    }
    procd_add_jail() { rec procd_add_jail "$@"; }
    procd_close_instance() {
      rec procd_close_instance "$@"
      if [ "$running" -eq 0 ] && [ -e "$PROCD_STATE" ] && [ "$(cat "$PROCD_STATE")" != "$_params" ]; then
        if [ -n "$_reload_signal" ]; then rec "procd signals instance $_reload_signal"; else rec "procd restarts instance"; fi
      fi
      printf '%s' "$_params" >"$PROCD_STATE"
    }
    procd_send_signal() { rec procd_send_signal "$@"; [ "${3:-}" != HUP ] || rec "procd signals instance HUP"; }
    procd_add_reload_trigger() { rec procd_add_reload_trigger "$@"; }
    procd_running() { rec procd_running "$@"; return "$running"; }
    procd_kill() { rec procd_kill "$@"; }
    # uci on a flat file ($UCI_DB, "package.section[.option]=value" lines, values quoted as
    # given; lists are repeated lines): get, show, delete, set, add_list, batch, commit.
    uci() {
      [ "$1" = -q ] && shift
      case "$1" in
        get) sed -n "s/^$2=//p" "$UCI_DB" | tr -d "'" | head -n1 ;;
        show) grep "^$2[.=]" "$UCI_DB" ;;
        delete)
          grep -q "^$2[.=]" "$UCI_DB" || return 1
          grep -v "^$2[.=]" "$UCI_DB" >"$UCI_DB.new"; mv "$UCI_DB.new" "$UCI_DB" ;;
        set)
          grep -v "^${2%%=*}=" "$UCI_DB" >"$UCI_DB.new"; mv "$UCI_DB.new" "$UCI_DB"
          echo "$2" >>"$UCI_DB" ;;
        add_list) echo "$2" >>"$UCI_DB" ;;
        batch) while read -r _c _a; do [ -z "$_c" ] || uci "$_c" "$_a"; done ;;
        commit) rec uci commit "$2" ;;
      esac
    }
    # busybox and friends
    pidof() { rec pidof "$@"; return 1; }
    sleep() { rec sleep "$@"; }
    logger() { while read -r _l; do rec "logger $* $_l"; done; }
    extra_command() { rec extra_command "$@"; }
    # rc.common (USE_PROCD) as it calls the script's functions.
    start() { rec start; start_service; }
    stop() {
      rec stop
      if type stop_service >/dev/null 2>&1; then stop_service; fi
      procd_kill slipstream
      if type service_stopped >/dev/null 2>&1; then service_stopped; fi
    }
    reload() { rec reload; if type reload_service >/dev/null 2>&1; then reload_service; else start; fi; }
    # shellcheck disable=SC1090
    . "./$INIT"
    [ -z "${FAKE_PROG:-}" ] || PROG=$FAKE_PROG
    [ -z "${FAKE_DNSMASQ:-}" ] || DNSMASQ_INIT=$FAKE_DNSMASQ
    [ -z "${FAKE_CONF:-}" ] || CONF=$FAKE_CONF
    "$@"
  )
}

# --- Syntax ------------------------------------------------------------------------------------
check "sh -n" sh -n "$INIT"
if command -v dash >/dev/null 2>&1; then check "dash -n" dash -n "$INIT"; fi
if command -v bash >/dev/null 2>&1; then check "bash -n" bash -n "$INIT"; fi
if command -v busybox >/dev/null 2>&1; then check "busybox ash -n" busybox ash -n "$INIT"; fi
if command -v shellcheck >/dev/null 2>&1; then
  # rc.common defines START/STOP/USE_PROCD's readers and the functions' callers: SC2034 (unused
  # variables) and SC2317 (unreachable functions) do not apply to an init script, nor SC3043:
  # busybox ash, which runs it, has `local`.
  check "shellcheck" shellcheck -s sh -e SC2034,SC2317,SC3043 "$INIT"
else
  echo "skip: shellcheck not installed"
fi
check "rc.common shebang" test "$(head -n1 "$INIT")" = "#!/bin/sh /etc/rc.common"
check "USE_PROCD=1" grep -qx 'USE_PROCD=1' "$INIT"
check "START=95" grep -qx 'START=95' "$INIT"
check "STOP=10" grep -qx 'STOP=10' "$INIT"

# --- start, enabled by default -----------------------------------------------------------------
L=$TMP/start-default
run "$L" "" 1 start
check "start reads the slipstream config" has_line "$L" "config_load slipstream"
check "start reads main.enabled, default 1" has_line "$L" "config_get_bool enabled main enabled 1"
check "one instance" test "$(grep -c '^procd_open_instance' "$L")" -eq 1
check "instance closed" has_line "$L" "procd_close_instance"
check "command line" has_line "$L" \
  "procd_set_param command /usr/sbin/slipstreamd --config /etc/config/slipstream"
check "respawn threshold/timeout/retry" has_line "$L" "procd_set_param respawn 3600 5 5"
check "stdout to logd" has_line "$L" "procd_set_param stdout 1"
check "stderr to logd" has_line "$L" "procd_set_param stderr 1"
# One SIGHUP per reload comes from reload_service: procd must not add its own for a changed file.
check "no file param (procd would signal a changed config too)" lacks_prefix "$L" "procd_set_param file"
check "no reload_signal (one HUP per reload, from reload_service)" lacks_prefix "$L" "procd_set_param reload_signal"
check "SIGTERM grace period" has_line "$L" "procd_set_param term_timeout 10"
check "capabilities from /etc/capabilities/slipstream.json" has_line "$L" \
  "procd_set_param capabilities /etc/capabilities/slipstream.json"
check "no_new_privs" has_line "$L" "procd_set_param no_new_privs 1"
# procd applies capabilities and no_new_privs only to a jailed instance (through ujail); the jail
# must have no mounts or namespaces (no options), or the daemon would lose the router's files.
check "a jail without mounts or namespaces" has_line "$L" "procd_add_jail slipstream"
check "one jail" test "$(grep -c '^procd_add_jail' "$L")" -eq 1
check "no jail mounts" lacks_prefix "$L" "procd_add_jail_mount"
check "params set inside the instance" test \
  "$(sed -n '/^procd_open_instance/,/^procd_close_instance/p' "$L" | grep -c '^procd_set_param\|^procd_add_jail')" \
  -eq "$(grep -c '^procd_set_param\|^procd_add_jail' "$L")"

# --- The capability file the instance names ----------------------------------------------------
# ujail's format (OCI process.capabilities): five lists of names; a set left out means "all".
CAPS=openwrt/files/slipstream.json
# At start: CAP_BPF and CAP_PERFMON to load the tc programs (datapath.engine "ebpf"/"auto"),
# CAP_SETPCAP to shrink the bounding set; the daemon drops all three once set up and keeps
# CAP_NET_ADMIN and CAP_NET_RAW, the only two its children (the firewall programs) inherit.
START='[ "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF", "CAP_PERFMON", "CAP_SETPCAP" ]'
KEPT='[ "CAP_NET_ADMIN", "CAP_NET_RAW" ]'
caps_set() { grep -qxF "	\"$1\": $2," "$CAPS" || grep -qxF "	\"$1\": $2" "$CAPS"; }
for set in bounding effective permitted; do
  check "$CAPS: $set is NET_ADMIN, NET_RAW, BPF, PERFMON, SETPCAP" caps_set "$set" "$START"
done
for set in inheritable ambient; do
  check "$CAPS: $set is CAP_NET_ADMIN and CAP_NET_RAW" caps_set "$set" "$KEPT"
done
check "$CAPS: no other capability (no CAP_SYS_ADMIN)" test \
  "$(grep -o 'CAP_[A-Z_]*' "$CAPS" | sort -u | tr '\n' ' ')" = \
  "CAP_BPF CAP_NET_ADMIN CAP_NET_RAW CAP_PERFMON CAP_SETPCAP "
check "$CAPS: five sets, nothing else" test "$(grep -c '^	"[a-z]*": \[' "$CAPS")" -eq 5
if command -v python3 >/dev/null 2>&1; then
  check "$CAPS: valid JSON" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$CAPS"
fi

for v in 1 yes on true enabled; do
  run "$TMP/start-$v" "$v" 1 start
  check "enabled=$v: an instance" has_line "$TMP/start-$v" "procd_open_instance"
done

# --- enabled=0: no instance --------------------------------------------------------------------
for v in 0 no off false disabled; do
  L=$TMP/start-off-$v
  run "$L" "$v" 1 start
  check "enabled=$v: no instance" lacks_prefix "$L" "procd_open_instance"
  check "enabled=$v: no params" lacks_prefix "$L" "procd_set_param"
done

# --- reload ------------------------------------------------------------------------------------
L=$TMP/reload-running
run "$L" 1 0 reload
check "reload re-evaluates the instance" has_line "$L" "start"
check "reload of a running daemon: SIGHUP" has_line "$L" "procd_send_signal slipstream * HUP"
check "reload: signal after the instance update" test \
  "$(grep -n '^procd_send_signal' "$L" | cut -d: -f1)" -gt "$(grep -n '^procd_close_instance' "$L" | cut -d: -f1)"

# One reload, one SIGHUP, whether the config file changed (uci commit slipstream + reload_config)
# or not (a firewall reload): counted as the daemon would see them, procd's and the script's.
hups() { grep -c '^procd signals instance HUP$' "$1"; }
CONF_FILE=$TMP/slipstream.conf
echo "config slipstream 'main'" >"$CONF_FILE"
rm -f "$PROCD_STATE"
FAKE_CONF=$CONF_FILE run "$TMP/reload-0" 1 1 start
echo "	option set_timeout '10m'" >>"$CONF_FILE"
L=$TMP/reload-changed
FAKE_CONF=$CONF_FILE run "$L" 1 0 reload
check "reload after a config change: one SIGHUP ($(hups "$L"))" test "$(hups "$L")" -eq 1
check "reload after a config change: no restart" lacks_line "$L" "procd restarts instance"
L=$TMP/reload-unchanged
FAKE_CONF=$CONF_FILE run "$L" 1 0 reload
check "reload with the config as it was: one SIGHUP ($(hups "$L"))" test "$(hups "$L")" -eq 1

L=$TMP/reload-stopped
run "$L" 1 1 reload
check "reload with no daemon: starts it" has_line "$L" "procd_open_instance"
check "reload with no daemon: no signal (no handler yet)" lacks_prefix "$L" "procd_send_signal"

L=$TMP/reload-disabled
run "$L" 0 0 reload
check "reload after enabled=0: no instance (procd stops it)" lacks_prefix "$L" "procd_open_instance"

# --- triggers ----------------------------------------------------------------------------------
L=$TMP/triggers
run "$L" 1 1 service_triggers
check "reload on slipstream and firewall config changes" has_line "$L" \
  "procd_add_reload_trigger slipstream firewall"

# --- Rules by name: dhcp ipset sections ---------------------------------------------------------
# The daemon stand-in prints the batch in $TMP/batch for --dnsmasq-uci (as slipstreamd does), the
# dnsmasq init stand-in records its calls; $UCI_DB stands for /etc/config/dhcp on flash, kept
# from one run to the next as across a reboot.
printf '#!/bin/sh\necho "dnsmasq $*" >>"%s"\n' "$TMP/dnsmasq-calls" >"$TMP/dnsmasq-init"
chmod +x "$TMP/dnsmasq-init"
printf '#!/bin/sh\ncase "$*" in --help) echo "  --dnsmasq-uci" ;; *--dnsmasq-uci*) cat "%s" ;; *) echo "ran $*" ;; esac\n' \
  "$TMP/batch" >"$TMP/daemon-uci"
chmod +x "$TMP/daemon-uci"
batch() { # batch N: N sections, each with one domain
  : >"$TMP/batch"
  _i=1
  while [ "$_i" -le "$1" ]; do
    printf "set dhcp.slipstream_%s=ipset\nadd_list dhcp.slipstream_%s.name='ss_dst_r%s_4'\nadd_list dhcp.slipstream_%s.domain='r%s.example.com'\n" \
      "$_i" "$_i" "$_i" "$_i" "$_i" >>"$TMP/batch"
    _i=$((_i + 1))
  done
}
uci_start() { # uci_start NAME ENABLED: a start with the daemon and dnsmasq stand-ins
  rm -f "$TMP/dnsmasq-calls"
  FAKE_PROG=$TMP/daemon-uci FAKE_DNSMASQ=$TMP/dnsmasq-init run "$TMP/$1" "$2" 1 start
}
dnsmasq_reloads() { cat "$TMP/dnsmasq-calls" 2>/dev/null | grep -c '^dnsmasq reload$'; }
echo "dhcp.lan=dhcp" >"$UCI_DB"
batch 3
uci_start uci-first 1
check "first start: the sections in dhcp" has_line "$UCI_DB" "dhcp.slipstream_3.domain='r3.example.com'"
check "first start: dhcp committed" has_line "$TMP/uci-first" "uci commit dhcp"
check "first start: dnsmasq reloaded once" test "$(dnsmasq_reloads)" -eq 1
check "first start: the digest kept" test -n "$(sed -n 's/^dhcp.slipstream.digest=//p' "$UCI_DB")"
check "first start: the instance starts" has_line "$TMP/uci-first" "procd_close_instance"
cp "$UCI_DB" "$TMP/uci-db-after-first"
uci_start uci-boot 1
check "boot with nothing changed: dhcp not committed" lacks_line "$TMP/uci-boot" "uci commit dhcp"
check "boot with nothing changed: dnsmasq left alone" test ! -e "$TMP/dnsmasq-calls"
check "boot with nothing changed: dhcp as it was" cmp -s "$UCI_DB" "$TMP/uci-db-after-first"
# A section left by a hand edit past a gap (slipstream_2 deleted by hand, slipstream_3 kept).
grep -v "^dhcp.slipstream_2[.=]" "$UCI_DB" >"$UCI_DB.new" && mv "$UCI_DB.new" "$UCI_DB"
batch 1
uci_start uci-fewer 1
check "fewer sections: one past a gap deleted too" lacks_prefix "$UCI_DB" "dhcp.slipstream_3"
check "fewer sections: the others deleted" lacks_prefix "$UCI_DB" "dhcp.slipstream_2"
check "fewer sections: the one left" has_line "$UCI_DB" "dhcp.slipstream_1.domain='r1.example.com'"
check "fewer sections: dnsmasq reloaded once" test "$(dnsmasq_reloads)" -eq 1
check "other dhcp sections untouched" has_line "$UCI_DB" "dhcp.lan=dhcp"
: >"$TMP/batch"
uci_start uci-none 1
check "no rule by domain: no section left" lacks_prefix "$UCI_DB" "dhcp.slipstream"
check "no rule by domain: dnsmasq reloaded once" test "$(dnsmasq_reloads)" -eq 1
uci_start uci-none-again 1
check "no rule by domain, again: dnsmasq left alone" test ! -e "$TMP/dnsmasq-calls"
batch 2
uci_start uci-back 1
uci_start uci-disabled 0
check "disabled: the sections removed" lacks_prefix "$UCI_DB" "dhcp.slipstream"
check "disabled: dnsmasq reloaded once" test "$(dnsmasq_reloads)" -eq 1
batch 2
uci_start uci-before-unset 1
rm -f "$TMP/dnsmasq-calls"
FAKE_PROG=$TMP/daemon-uci FAKE_DNSMASQ=$TMP/dnsmasq-init run "$TMP/uci-unset" 1 0 unset_dnsmasq
check "unset_dnsmasq (package removal): the sections removed" lacks_prefix "$UCI_DB" "dhcp.slipstream"
check "unset_dnsmasq: dnsmasq reloaded once" test "$(dnsmasq_reloads)" -eq 1
check "unset_dnsmasq: a command of the script" has_line "$TMP/uci-unset" \
  "extra_command unset_dnsmasq Take the rules by name out of dnsmasq's config (dhcp sections)"
printf '#!/bin/sh\ncase "$*" in --help) echo "  --dnsmasq-uci" ;; *) exit 2 ;; esac\n' >"$TMP/daemon-bad"
chmod +x "$TMP/daemon-bad"
batch 1
uci_start uci-again 1
cp "$UCI_DB" "$TMP/uci-db-before-bad"
rm -f "$TMP/dnsmasq-calls"
FAKE_PROG=$TMP/daemon-bad FAKE_DNSMASQ=$TMP/dnsmasq-init run "$TMP/uci-bad" 1 1 start
check "a daemon that fails (bad config): dhcp untouched" cmp -s "$UCI_DB" "$TMP/uci-db-before-bad"
check "a daemon that fails: dnsmasq left alone" test ! -e "$TMP/dnsmasq-calls"

# --- stop and the --cleanup safety net ---------------------------------------------------------
cat >"$TMP/daemon-old" <<'EOF'
#!/bin/sh
case "$1" in --help) echo "Usage: slipstreamd [OPTIONS]"; echo "  --config <PATH>" ;; *) echo "ran $*" ;; esac
EOF
cat >"$TMP/daemon-new" <<'EOF'
#!/bin/sh
case "$1" in --help) echo "Usage: slipstreamd [OPTIONS]"; echo "  --cleanup  Remove leftover rules" ;; *) echo "ran $*" ;; esac
EOF
chmod +x "$TMP/daemon-old" "$TMP/daemon-new"

L=$TMP/stop-old
FAKE_PROG=$TMP/daemon-old run "$L" 1 0 stop
check "stop: procd kills the instance" has_line "$L" "procd_kill slipstream"
check "stop: waits for the process to go" has_line "$L" "pidof slipstreamd"
check "stop: no --cleanup on a daemon without it" lacks_prefix "$L" "logger -t slipstream ran"

L=$TMP/stop-new
FAKE_PROG=$TMP/daemon-new run "$L" 1 0 stop
check "stop: --cleanup --config after procd_kill" has_line "$L" \
  "logger -t slipstream ran --cleanup --config /etc/config/slipstream"
check "stop: cleanup runs after the kill" test \
  "$(grep -n '^logger' "$L" | cut -d: -f1)" -gt "$(grep -n '^procd_kill' "$L" | cut -d: -f1)"

echo "init_script: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
