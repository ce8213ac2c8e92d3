'use strict';
'require baseclass';
'require rpc';
'require uci';
'require ui';

// What every Slipstream view shares: the rpcd calls (luci.slipstream, the rpcd exec plugin in
// /usr/libexec/rpcd), number formats, and the check of the config with
// `slipstreamd --check-config` before LuCI applies it.

var callStatus = rpc.declare({ object: 'luci.slipstream', method: 'status', expect: { '': {} } });
var callFlows = rpc.declare({ object: 'luci.slipstream', method: 'flows', expect: { '': {} } });
var callPresets = rpc.declare({ object: 'luci.slipstream', method: 'presets', expect: { presets: [] } });
var callCheckConfig = rpc.declare({ object: 'luci.slipstream', method: 'check_config', expect: { '': {} } });
var callEnvironment = rpc.declare({ object: 'luci.slipstream', method: 'environment', expect: { '': {} } });
// The daemon's live page API (its HTTP listener): {"available":true,"history":{...}} or
// {"available":false,"error":"..."}; `since` (a t_unix_ms) returns only later samples.
var callHistory = rpc.declare({ object: 'luci.slipstream', method: 'history', params: ['since'], expect: { '': {} } });
var callHosts = rpc.declare({ object: 'luci.slipstream', method: 'hosts', expect: { '': {} } });
var callHostHints = rpc.declare({ object: 'luci-rpc', method: 'getHostHints', expect: { '': {} } });
var callDHCPLeases = rpc.declare({ object: 'luci-rpc', method: 'getDHCPLeases', expect: { '': {} } });

// Errors the daemon found, keyed by '<section id>.<option>': shown by the field's own
// validation until its value changes, or until the next check.
var serverErrors = {};

// Forgets the daemon's errors and has the fields they marked validate again (a widget keeps its
// last verdict until it is validated again, and an invalid field blocks saving).
function clearServerErrors() {
	var marked = serverErrors;
	serverErrors = {};
	Object.keys(marked).forEach(function(k) {
		marked[k].option.triggerValidation(marked[k].sid);
	});
}

function fmtRate(bps) {
	if (bps == null || isNaN(bps))
		return '-';
	var units = [['Gbit/s', 1e9], ['Mbit/s', 1e6], ['kbit/s', 1e3]];
	for (var i = 0; i < units.length; i++)
		if (bps >= units[i][1])
			return (bps / units[i][1]).toFixed(bps >= 10 * units[i][1] ? 0 : 1) + ' ' + units[i][0];
	return Math.round(bps) + ' bit/s';
}

function fmtBytes(b) {
	if (b == null || isNaN(b))
		return '-';
	var units = [['GiB', 1073741824], ['MiB', 1048576], ['KiB', 1024]];
	for (var i = 0; i < units.length; i++)
		if (b >= units[i][1])
			return (b / units[i][1]).toFixed(1) + ' ' + units[i][0];
	return b + ' B';
}

function fmtMs(ms) {
	return (ms == null || isNaN(ms)) ? '-' : (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + ' ms';
}

function fmtDuration(secs) {
	var d = Math.floor(secs / 86400), h = Math.floor(secs / 3600) % 24,
		m = Math.floor(secs / 60) % 60, s = secs % 60;
	if (d) return d + 'd ' + h + 'h';
	if (h) return h + 'h ' + m + 'm';
	if (m) return m + 'm ' + s + 's';
	return s + 's';
}

// The address of 'addr:port' / '[v6]:port'.
function hostOf(endpoint) {
	var m = /^\[(.*)\]:\d+$/.exec(endpoint) || /^(.*):\d+$/.exec(endpoint);
	return m ? m[1] : endpoint;
}

// Private, loopback, link-local, CGNAT (v4); unique-local, link-local, loopback (v6): the
// same test as the CLI's (crates/inspect, render.rs).
function isLocal(addr) {
	var v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(addr);
	if (v4) {
		var a = +v4[1], b = +v4[2];
		return a == 10 || a == 127 || (a == 172 && b >= 16 && b < 32) || (a == 192 && b == 168) ||
			(a == 169 && b == 254) || (a == 100 && (b & 0xc0) == 64);
	}
	if (addr.indexOf(':') < 0)
		return false;
	var first = parseInt(addr.split(':')[0] || '0', 16);
	return addr == '::1' || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80;
}

// [LAN host endpoint, remote endpoint, 'down'|'up'|'?'], as `slipstream flows` decides.
function lanAndRemote(flow) {
	var a = flow.endpoints[0], b = flow.endpoints[1], lan, remote;
	var la = isLocal(hostOf(a)), lb = isLocal(hostOf(b));
	if (la && !lb) { lan = a; remote = b; }
	else if (lb && !la) { lan = b; remote = a; }
	else if (flow.receiver && flow.sender) { lan = flow.receiver; remote = flow.sender; }
	else { lan = a; remote = b; }
	var dir = (flow.receiver == lan) ? 'down' : (flow.sender == lan) ? 'up' : '?';
	return [lan, remote, dir];
}

// Why a flow is (or is not) slowed down, in words.
function flowWhy(flow) {
	if (flow.rule_removed)
		return _('rule removed: released until it ends');
	if (flow.unclamped)
		return _('not clamped: %s').format(flow.unclamped);
	if (flow.held)
		return _('waiting for its turn (window held)');
	if (flow.controller == 'household' && flow.allocation_bytes != null)
		return _('household share %s of the link budget').format(fmtBytes(flow.allocation_bytes));
	var parts = [];
	if (flow.mode) parts.push(flow.mode);
	if (flow.policy) parts.push(flow.policy);
	return parts.length ? parts.join(', ') : _('classed, waiting for data');
}

// Host hints (luci-rpc getHostHints) as { ip: name } for the LAN hosts with a name.
function namesByAddress(hints) {
	var out = {};
	Object.keys(hints || {}).forEach(function(mac) {
		var h = hints[mac];
		if (!h || !h.name)
			return;
		(h.ipaddrs || h.ipv4 || []).concat(h.ip6addrs || h.ipv6 || []).forEach(function(ip) {
			out[ip] = h.name;
		});
	});
	return out;
}

// Wraps the validation of every option of the map, so an error the daemon reported for a field
// shows next to it (LuCI's invalid-field style) until the value changes.
function attachServerErrors(map) {
	(map.children || []).forEach(function(section) {
		(section.children || []).forEach(function(option) {
			var own = option.validate;
			option.validate = function(section_id, value) {
				var e = serverErrors[section_id + '.' + option.option];
				if (e && String(value) === e.value)
					return e.message;
				return own.apply(this, arguments);
			};
		});
	});
}

// Shows a failed check: next to the field when this view has it, and at the top always.
function showCheckError(map, res) {
	var sid = null, where = '';
	if (res.section) {
		sid = (res.section.charAt(0) == '@') ? uci.resolveSID('slipstream', res.section) : res.section;
		where = res.option ? _('section %s, option %s').format(res.section, res.option) : _('section %s').format(res.section);
	}
	var shown = false;
	if (sid && res.option && map) {
		var found = map.lookupOption(res.option, sid);
		if (found) {
			var option = found[0], field = map.findElement('data-field', option.cbid(found[1]));
			serverErrors[found[1] + '.' + res.option] = {
				message: res.message,
				value: String(option.formvalue(found[1])),
				option: option,
				sid: found[1]
			};
			option.triggerValidation(found[1]);
			if (field && field.scrollIntoView)
				field.scrollIntoView({ block: 'center' });
			shown = true;
		}
	}
	ui.addNotification(_('slipstreamd --check-config refused this configuration; nothing was applied'), E('div', {}, [
		E('p', {}, where ? [E('strong', {}, where), ': ', res.message || res.error] : [res.error || res.message]),
		E('p', {}, shown ? _('The field is marked below. Fix it, then Save & Apply again.')
			: _('Fix it (or revert the unsaved changes), then Save & Apply again. The running daemon keeps its current configuration.'))
	]), 'danger');
}

return baseclass.extend({
	callStatus: callStatus,
	callFlows: callFlows,
	callPresets: callPresets,
	callCheckConfig: callCheckConfig,
	callEnvironment: callEnvironment,
	callHistory: callHistory,
	callHosts: callHosts,
	callHostHints: callHostHints,
	callDHCPLeases: callDHCPLeases,
	fmtRate: fmtRate,
	fmtBytes: fmtBytes,
	fmtMs: fmtMs,
	fmtDuration: fmtDuration,
	hostOf: hostOf,
	isLocal: isLocal,
	lanAndRemote: lanAndRemote,
	flowWhy: flowWhy,
	namesByAddress: namesByAddress,
	attachServerErrors: attachServerErrors,
	showCheckError: showCheckError,

	// The views' Save & Apply: stage the changes (uci.save through the map), have the daemon
	// check the result, and apply only a config it accepts.
	saveCheckApply: function(view, ev, mode) {
		var map = view.map;
		clearServerErrors();
		return view.handleSave(ev).then(function() {
			return callCheckConfig();
		}).then(function(res) {
			if (res && res.valid === false) {
				showCheckError(map, res);
				return;
			}
			ui.changes.apply(mode == '0');
		}).catch(function(e) {
			// A rejection without an error is LuCI's own "invalid values" (it has told the user).
			if (e)
				ui.addNotification(null, E('p', {}, _('Could not check the configuration: %s').format(e.message || e)), 'danger');
		});
	}
});
