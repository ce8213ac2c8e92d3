#!/bin/sh
# Runs OpenWrt's own dnsmasq init script (package/network/services/dnsmasq/files/dnsmasq.init of
# the release to check, not kept in this repository) for one instance, with the `dhcp` ipset
# sections slipstreamd prints (--dnsmasq-uci), and checks what it makes of them: the lines in the
# instance's generated config, its conf-dir, the jail mounts, and that this machine's dnsmasq
# accepts the config (--test). A check to run by hand against each release's script:
#
#   sh openwrt/tests/dnsmasq_init.sh PATH/TO/dnsmasq.init BATCH_FILE [FEATURES]
#
# BATCH_FILE: the output of `slipstreamd --config FILE --dnsmasq-uci`. FEATURES: the dnsmasq
# build to pretend for the init's feature check ("ipset nftset", "no-ipset nftset" as
# dnsmasq-full, "no-ipset no-nftset" as the plain dnsmasq). Needs root (a private mount
# namespace with tmpfs on /tmp and /var: the script writes /var/etc, /tmp/dnsmasq.*.d,
# /tmp/resolv.conf) and busybox, which runs the init script as OpenWrt does. OpenWrt's
# functions.sh, network.sh and procd.sh are stood in for: the config functions below read the
# dhcp config given as `config`/`option`/`list` calls, as `config_load` does with `uci export`.
set -u
[ $# -ge 2 ] || { echo "usage: $0 DNSMASQ_INIT BATCH_FILE [FEATURES]" >&2; exit 2; }
FEATURES=${3:-no-ipset nftset}
# Outside /tmp and /var, which the namespace covers with empty tmpfs.
OUT=$(mktemp -d /run/dnsmasq-init.XXXXXX) || exit 1
cp "$1" "$OUT/dnsmasq.init" && cp "$2" "$OUT/batch" || exit 1
INIT=$OUT/dnsmasq.init BATCH=$OUT/batch
export INIT BATCH FEATURES OUT
# (No `set -u` in there: the init script reads unset variables.)
unshare -m busybox sh -c '
mount -t tmpfs none /tmp && mount -t tmpfs none /var || exit 1
mkdir -p /tmp/resolv.conf.d /var/run /tmp/stub
# dnsmasq --version as the pretended build reports it (the init reads its "Compile time options").
cat >/tmp/stub/dnsmasq <<EOF
#!/bin/sh
[ "\$1" = --version ] && { echo "Dnsmasq version 2.90"; echo "Compile time options: IPv6 GNU-getopt no-DBus UBus DHCP DHCPv6 $FEATURES auth"; exit 0; }
exec /usr/sbin/dnsmasq "\$@"
EOF
chmod +x /tmp/stub/dnsmasq
PATH=/tmp/stub:$PATH

# functions.sh stand-ins (this file'"'"'s own; same calling conventions as OpenWrt'"'"'s).
CONFIG_SECTIONS=""
config() { _cs=$2; CONFIG_SECTIONS="$CONFIG_SECTIONS $_cs"; eval "CONFIG_${_cs}_TYPE=\$1"; }
option() { eval "CONFIG_${_cs}_$1=\$2"; }
list() {
  eval "_ln=\${CONFIG_${_cs}_$1_LENGTH:-0}"; _ln=$((_ln + 1))
  eval "CONFIG_${_cs}_$1_ITEM$_ln=\$2; CONFIG_${_cs}_$1_LENGTH=$_ln"
  eval "CONFIG_${_cs}_$1=\"\${CONFIG_${_cs}_$1:+\${CONFIG_${_cs}_$1} }\$2\""
}
config_load() { :; }
config_get() {
  case $# in
    2) eval "echo \"\${CONFIG_$1_$2:-}\"" ;;
    *) eval "$1=\${CONFIG_$2_$3:-\${4:-}}" ;;
  esac
}
config_get_bool() {
  config_get _cb "$2" "$3" "${4:-}"
  case "$_cb" in 1|on|true|yes|enabled) _cb=1 ;; 0|off|false|no|disabled) _cb=0 ;; *) _cb=${4:-0} ;; esac
  eval "$1=\$_cb"
}
config_list_foreach() {
  _ls=$1 _lo=$2 _lf=$3; shift 3
  eval "_lnum=\${CONFIG_${_ls}_${_lo}_LENGTH:-0}"
  _li=1
  while [ "$_li" -le "$_lnum" ]; do
    eval "_lv=\${CONFIG_${_ls}_${_lo}_ITEM$_li}"
    $_lf "$_lv" "$@"
    _li=$((_li + 1))
  done
}
config_foreach() {
  _ff=$1 _ft=$2; shift 2
  for _fs in $CONFIG_SECTIONS; do
    eval "[ \"\${CONFIG_${_fs}_TYPE}\" = \"$_ft\" ]" && $_ff "$_fs" "$@"
  done
}
append() { eval "$1=\${$1:+\${$1}\${3:- }}\$2"; }
uci_get() { echo "${3:-}"; }
# network.sh and procd.sh stand-ins: no interface is up; procd calls are recorded.
network_get_device() { return 1; }
network_get_ipaddr() { return 1; }
network_get_ipaddrs6() { return 1; }
procd_open_instance() { echo "procd_open_instance $*" >>"$OUT/procd"; }
procd_set_param() { echo "procd_set_param $*" >>"$OUT/procd"; }
procd_add_jail() { echo "procd_add_jail $*" >>"$OUT/procd"; }
procd_add_jail_mount() { echo "procd_add_jail_mount $*" >>"$OUT/procd"; }
procd_add_jail_mount_rw() { echo "procd_add_jail_mount_rw $*" >>"$OUT/procd"; }
procd_close_instance() { echo "procd_close_instance" >>"$OUT/procd"; }
logger() { echo "logger $*" >>"$OUT/procd"; }

. "$INIT"
# OpenWrt'"'"'s default dhcp config (one anonymous dnsmasq section, as `uci show` names it) and
# the sections of the batch, turned into config/option/list calls.
config dnsmasq cfg01411c
option domainneeded 1
option localise_queries 1
option rebind_protection 1
option local /lan/
option domain lan
option expandhosts 1
option leasefile /tmp/dhcp.leases
option resolvfile /tmp/resolv.conf.d/resolv.conf.auto
option localservice 1
eval "$(sed -e "s/^set dhcp\.\([A-Za-z0-9_]*\)=\(.*\)$/config \2 \1/" \
            -e "s/^set dhcp\.[A-Za-z0-9_]*\.\([a-z_]*\)=\(.*\)$/option \1 \2/" \
            -e "s/^add_list dhcp\.[A-Za-z0-9_]*\.\([a-z_]*\)=\(.*\)$/list \1 \2/" "$BATCH")"
dnsmasq_start cfg01411c
cp /var/etc/dnsmasq.conf.cfg01411c "$OUT/instance.conf"
ls -d /tmp/dnsmasq*.d >"$OUT/confdirs"
/usr/sbin/dnsmasq --test -C /var/etc/dnsmasq.conf.cfg01411c >"$OUT/test" 2>&1; echo "exit $?" >>"$OUT/test"
'
echo "== generated /var/etc/dnsmasq.conf.cfg01411c:"; cat "$OUT/instance.conf"
echo "== conf-dirs made:"; cat "$OUT/confdirs"
echo "== procd:"; grep -v "^logger" "$OUT/procd"
echo "== dnsmasq --test:"; cat "$OUT/test"
fail=0
grep -q '^conf-dir=' "$OUT/instance.conf" || { echo "FAIL: no conf-dir"; fail=1; }
grep -q '^nftset=' "$OUT/instance.conf" || case "$FEATURES" in *no-nftset*) ;; *) echo "FAIL: no nftset line"; fail=1 ;; esac
case "$FEATURES" in *no-nftset*) ! grep -q '^nftset=' "$OUT/instance.conf" || { echo "FAIL: nftset kept without nftset"; fail=1; } ;; esac
case "$FEATURES" in *no-ipset*) ! grep -q '^ipset=' "$OUT/instance.conf" || { echo "FAIL: ipset kept without ipset"; fail=1; } ;; esac
# Every nft target with its family, read from the set's name (no nft asked, no "Cannot infer").
! grep '^nftset=' "$OUT/instance.conf" | tr '/,' '\n\n' | grep -q '^inet#' || { echo "FAIL: an nft target without family"; fail=1; }
! grep -q 'Cannot infer' "$OUT/procd" || { echo "FAIL: the init could not infer a family"; fail=1; }
grep -q "procd_add_jail_mount /var/etc/dnsmasq.conf.cfg01411c" "$OUT/procd" || { echo "FAIL: the config not mounted in the jail"; fail=1; }
grep -q '^exit 0$' "$OUT/test" || { echo "FAIL: dnsmasq --test"; fail=1; }
rm -rf "$OUT"
[ "$fail" -eq 0 ] && echo "dnsmasq_init: ok" || echo "dnsmasq_init: FAILED"
[ "$fail" -eq 0 ]
