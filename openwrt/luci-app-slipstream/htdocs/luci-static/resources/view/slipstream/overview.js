'use strict';
'require view';
'require rpc';
'require uci';
'require ui';
'require poll';
'require dom';
'require slipstream.common as ss';

// Is Slipstream doing its job: the daemon running, the datapath engine in use, its firewall rules
// in place, the config it runs and the last reload, and what keeps it from working (flow
// offloading, dnsmasq without set support for rules by name), each with its fix.

var callRcList = rpc.declare({ object: 'rc', method: 'list', params: ['name'], expect: { '': {} } });
var callRcInit = rpc.declare({ object: 'rc', method: 'init', params: ['name', 'action'] });

function row(label, value) {
	return E('tr', { 'class': 'tr' }, [
		E('td', { 'class': 'td left', 'width': '33%' }, label),
		E('td', { 'class': 'td left' }, value)
	]);
}

function yesNo(ok, yes, no) {
	return E('span', { 'style': 'color:' + (ok ? 'green' : '#c00') + ';font-weight:bold' }, ok ? yes : no);
}

function fmtTime(unix) {
	return unix ? new Date(unix * 1000).toLocaleString() : '-';
}

// The engine the daemon reports (a daemon that predates the field reports none: then the
// configured one, said as such).
function engineText(st) {
	var e = st && (st.engine || (st.datapath && st.datapath.engine) || st.datapath_engine);
	if (e)
		return String(e);
	var conf = uci.get('slipstream', 'main', 'engine') || 'nfqueue';
	return _('%s (configured; this daemon does not report the engine in use)').format(conf);
}

// Rules that classify by DNS name (presets, domains) and so need dnsmasq's set support.
function nameRules() {
	var out = [];
	uci.sections('slipstream', 'rule', function(s) {
		if (s.enabled == '0')
			return;
		if (L.toArray(s.preset).length || L.toArray(s.domain).length)
			out.push(s.name || s['.name']);
	});
	return out;
}

return view.extend({
	load: function() {
		return Promise.all([
			uci.load('slipstream'),
			L.resolveDefault(uci.load('firewall'), null)
		]);
	},

	fetch: function() {
		return Promise.all([
			L.resolveDefault(ss.callStatus(), { running: false, error: _('no answer from rpcd (luci.slipstream)') }),
			L.resolveDefault(ss.callEnvironment(), {}),
			L.resolveDefault(ss.callCheckConfig(), {}),
			L.resolveDefault(callRcList('slipstream'), {})
		]);
	},

	// Warnings, each with what to do about it.
	warnings: function(st, env) {
		var w = [];
		var engine = uci.get('slipstream', 'main', 'engine') || 'nfqueue';
		var d = uci.sections('firewall', 'defaults')[0] || {};
		var sw = d.flow_offloading == '1', hw = d.flow_offloading_hw == '1';
		if (hw || (sw && engine == 'nfqueue')) {
			w.push({
				text: hw ? _('Hardware flow offloading is on: offloaded flows skip the router\'s CPU, so Slipstream cannot slow them down, and the daemon refuses to start.')
					: _('Software flow offloading is on: with the nfqueue engine established flows skip netfilter, so the daemon refuses to start. (The ebpf engine works with software offloading.)'),
				fix: _('Turn flow offloading off (Network → Firewall → Routing/NAT Offloading), or:'),
				cmd: "uci set firewall.@defaults[0].flow_offloading='0'; uci set firewall.@defaults[0].flow_offloading_hw='0'; uci commit firewall; /etc/init.d/firewall restart",
				button: [_('Turn offloading off'), L.bind(this.handleOffloadOff, this, d['.name'])]
			});
		}
		var named = nameRules();
		if (named.length && env.dnsmasq && env.dnsmasq != 'full') {
			var fw3 = env.firewall == 'fw3';
			w.push({
				text: _('Rules by name (%s) need dnsmasq with %s support, which the installed dnsmasq lacks: those rules match nothing.')
					.format(named.join(', '), fw3 ? 'ipset' : 'nftset'),
				fix: _('Replace dnsmasq with dnsmasq-full:'),
				cmd: fw3 ? 'opkg update && opkg remove dnsmasq && opkg install dnsmasq-full ipset kmod-ipt-ipset'
					: 'opkg update && opkg remove dnsmasq && opkg install dnsmasq-full   # apk: apk del dnsmasq && apk add dnsmasq-full'
			});
		}
		if (st.running && st.status && st.status.firewall && !st.status.firewall.installed) {
			w.push({
				text: _('The daemon\'s firewall rules are not in place: no flow is slowed down. The watchdog re-applies them within seconds.'),
				fix: _('If this stays, see the firewall error above and: logread -e slipstream')
			});
		}
		if (st.running && st.status && st.status.last_reload_error) {
			w.push({
				text: _('The last reload was refused; the daemon still runs the configuration it had before.'),
				fix: _('Correct the configuration (the check below names the field), then Save & Apply.')
			});
		}
		if (st.running && st.status && (st.status.restart_needed || []).length) {
			w.push({
				text: _('Changed settings that take effect only after a restart: %s.').format(st.status.restart_needed.join(', ')),
				fix: _('Restart the service:'),
				button: [_('Restart'), L.bind(this.handleInit, this, 'restart')]
			});
		}
		return w;
	},

	handleOffloadOff: function(sid) {
		uci.set('firewall', sid, 'flow_offloading', '0');
		uci.set('firewall', sid, 'flow_offloading_hw', '0');
		return uci.save().then(function() {
			ui.changes.apply(true);
		});
	},

	handleInit: function(action) {
		return callRcInit('slipstream', action).then(function() {
			window.setTimeout(function() { location.reload(); }, 1500);
		});
	},

	renderContent: function(data) {
		var st = data[0] || {}, env = data[1] || {}, check = data[2] || {}, rc = (data[3] || {}).slipstream || {};
		var s = st.status || {};
		var rows = [];

		if (st.running) {
			rows.push(row(_('Daemon'), [yesNo(true, _('running'), ''),
				' ', _('version %s, pid %d, up %s').format(s.version, s.pid, ss.fmtDuration(s.uptime_secs || 0))]));
		} else {
			rows.push(row(_('Daemon'), [yesNo(false, '', _('not running')), ' ', E('small', {}, st.error || ''),
				' ', E('button', { 'class': 'cbi-button cbi-button-apply', 'click': ui.createHandlerFn(this, 'handleInit', 'start') }, _('Start'))]));
		}
		rows.push(row(_('Start at boot'), rc.enabled ? _('yes') : _('no')));
		rows.push(row(_('Engine in use'), st.running ? engineText(s) : '-'));
		if (st.running) {
			var fw = s.firewall || {};
			rows.push(row(_('Firewall rules'), [yesNo(fw.installed, _('in place'), _('missing')),
				' (%s; %s)'.format(fw.backend || '?', _('checked %s, re-applied %d times').format(fmtTime(fw.last_check_unix), fw.reapplied || 0)),
				fw.last_error ? E('div', { 'style': 'color:#c00' }, fw.last_error) : '']));
			rows.push(row(_('Configuration in force'), _('loaded %s; %d reloads, %d refused').format(fmtTime(s.config_loaded_unix), s.reloads_ok || 0, s.reloads_failed || 0)));
			rows.push(row(_('Last reload error'), s.last_reload_error ? E('span', { 'style': 'color:#c00' }, s.last_reload_error) : _('none')));
			rows.push(row(_('Rules'), (s.rules || []).filter(function(r) { return !r.removed; }).map(function(r) {
				return '%s: %d'.format(r.name, r.active_flows);
			}).join(', ') || '-'));
			rows.push(row(_('Flows'), _('%d of at most %d tracked; %d packets, %d rewritten').format(
				s.flows_active || 0, s.flows_max || 0, s.packets || 0, s.packets_rewritten || 0)));
		}
		if (check.valid != null) {
			var label = (check.source == 'staged') ? _('Configuration, with any unsaved changes') : _('Configuration file');
			rows.push(row(label, check.valid ? yesNo(true, check.summary || _('valid'), '')
				: E('span', { 'style': 'color:#c00' }, (check.section ? '%s %s%s: '.format(check.section_type, check.section, check.option ? ', option ' + check.option : '') : '') + (check.message || check.error))));
		}
		rows.push(row('dnsmasq', env.dnsmasq == 'full' ? _('with set support (rules by name work)')
			: env.dnsmasq == 'basic' ? _('without set support (rules by name do not work)') : _('not installed')));

		var warnings = this.warnings(st, env).map(function(w) {
			return E('div', { 'class': 'alert-message warning' }, [
				E('p', {}, E('strong', {}, w.text)),
				E('p', {}, w.fix),
				w.cmd ? E('pre', { 'style': 'white-space:pre-wrap' }, w.cmd) : '',
				w.button ? E('button', { 'class': 'cbi-button cbi-button-action', 'click': ui.createHandlerFn(this, w.button[1]) }, w.button[0]) : ''
			]);
		}, this);

		return E('div', { 'id': 'slipstream-overview' }, [
			warnings.length ? E('div', { 'class': 'cbi-section' }, [E('h3', {}, _('Needs attention'))].concat(warnings)) : '',
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Status')),
				E('table', { 'class': 'table' }, rows)
			])
		]);
	},

	render: function() {
		var self = this;
		var root = E('div', {}, [
			E('h2', {}, _('Slipstream')),
			E('div', { 'class': 'cbi-map-descr' }, _('Background downloads, backups and updates yield to everything else on the internet link.')),
			E('div', { 'id': 'slipstream-overview-body' }, E('em', { 'class': 'spinning' }, _('Asking the daemon…')))
		]);
		var refresh = function() {
			return self.fetch().then(function(data) {
				dom.content(root.querySelector('#slipstream-overview-body'), self.renderContent(data));
			});
		};
		poll.add(refresh, 10);
		refresh();
		return root;
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
