'use strict';
'require view';
'require form';
'require uci';
'require ui';
'require slipstream.common as ss';

// The rules: one `config rule '<name>'` section each, tried in file order, the first match wins
// (docs/configuration.md, "Rules"). The grid keeps that order; drag a row to change it.

// Starting points for a new rule: what the option lists of the new section hold.
var TEMPLATES = [
	{ id: 'game_downloads', title: _('Game downloads (Steam, Epic, Battle.net, consoles)'),
		set: { preset: ['steam', 'epic', 'battlenet', 'xbox', 'playstation', 'nintendo'] } },
	{ id: 'software_updates', title: _('Software updates (Windows, Apple, Google Play, Android)'),
		set: { preset: ['windows_update', 'apple_updates', 'google_play', 'android_ota'] } },
	{ id: 'cloud_backups', title: _('Cloud backups (iCloud, OneDrive, Google Photos)'),
		set: { preset: ['icloud_backup', 'onedrive', 'google_photos'] } },
	{ id: 'bittorrent', title: _('BitTorrent (usual ports, TCP and uTP)'),
		set: { remote_port: ['6881-6999', '51413'], protocol: 'both' } },
	{ id: 'dscp_background', title: _('Traffic marked as background (DSCP LE, CS1)'),
		set: { dscp: ['LE', 'CS1'] } }
];

// Rules by name (presets, domains) need dnsmasq-full; say so where they are edited.
function nameNote() {
	return _('Needs dnsmasq-full (nftset/ipset support); the Overview page checks it.');
}

return view.extend({
	load: function() {
		return Promise.all([
			uci.load('slipstream'),
			L.resolveDefault(ss.callPresets(), []),
			L.resolveDefault(ss.callDHCPLeases(), {}),
			L.resolveDefault(ss.callStatus(), {})
		]);
	},

	// A free section name from a template id: game_downloads, game_downloads_2, ...
	freeName: function(base) {
		var name = base, n = 1;
		while (uci.get('slipstream', name))
			name = base + '_' + (++n);
		return name;
	},

	handleAddTemplate: function(map, select) {
		var t = TEMPLATES.filter(function(x) { return x.id == select.value; })[0];
		if (!t)
			return;
		var name = this.freeName(t.id);
		// As Map.save does, but the form is parsed before the new section exists: parsing a
		// section the form has not drawn yet would remove its options.
		return map.parse().then(function() {
			var sid = uci.add('slipstream', 'rule', name);
			Object.keys(t.set).forEach(function(k) { uci.set('slipstream', sid, k, t.set[k]); });
			uci.set('slipstream', sid, 'controller', 'household');
			return uci.save();
		}).then(function() {
			return map.load();
		}).then(function() {
			return map.renderContents();
		});
	},

	render: function(data) {
		var presets = data[1] || [], leases = data[2] || {}, status = data[3] || {};
		var active = {};
		((status.status || {}).rules || []).forEach(function(r) { active[r.name] = r; });
		var m, s, o, self = this;

		m = new form.Map('slipstream', _('Slipstream: rules'),
			_('Each rule classes some TCP flows (and UDP flows, with its protocol) as background; all other traffic is left alone. A flow is classed by its first packets and keeps its class. Rules are tried from the top, the first match wins: drag the handle to reorder. Within a rule every criterion given must match; within a list any value matches.'));

		s = m.section(form.GridSection, 'rule', _('Rules'));
		s.sortable = true;
		s.addremove = true;
		s.anonymous = false;
		s.nodescriptions = true;
		s.addbtntitle = _('Add an empty rule');
		s.sectiontitle = function(sid) {
			return uci.get('slipstream', sid, 'name') || sid;
		};

		s.tab('match', _('Which flows'));
		s.tab('control', _('How they yield'));

		o = s.taboption('match', form.Flag, 'enabled', _('Enabled'));
		o.default = '1';
		o.editable = true;

		o = s.taboption('match', form.DummyValue, '_match', _('Matches'));
		o.modalonly = false;
		o.textvalue = function(sid) {
			var parts = [];
			[['preset', _('presets')], ['domain', _('names')], ['lan_hostname', _('devices')], ['lan_host', _('hosts')],
			 ['lan_mac', _('MACs')], ['remote_port', _('remote ports')], ['local_port', _('local ports')], ['dscp', 'DSCP'],
			 ['protocol', _('protocol')], ['quic', 'QUIC']
			].forEach(function(c) {
				var v = L.toArray(uci.get('slipstream', sid, c[0]));
				if (v.length)
					parts.push(c[1] + ': ' + v.join(' '));
			});
			return parts.length ? parts.join('; ') : _('(no criterion: the daemon will refuse this rule)');
		};

		o = s.taboption('match', form.DummyValue, '_flows', _('Flows now'));
		o.modalonly = false;
		o.textvalue = function(sid) {
			var r = active[uci.get('slipstream', sid, 'name') || sid];
			return r ? '%d (%d since start)'.format(r.active_flows, r.flows_started) : '-';
		};

		o = s.taboption('match', form.Value, 'name', _('Display name'),
			_('Shown in status and metrics; may contain - and . (default: the section name).'));
		o.modalonly = true;
		o.datatype = 'and(minlength(1),maxlength(64))';
		o.validate = function(sid, value) {
			return (value == '' || /^[A-Za-z0-9_.-]+$/.test(value)) ? true : _('Letters, digits, _ - and . only');
		};

		o = s.taboption('match', form.MultiValue, 'preset', _('Presets'),
			_('Built-in lists of the names downloads come from (slipstream presets). ') + nameNote());
		o.modalonly = true;
		o.display_size = 6;
		presets.forEach(function(p) { o.value(p.name, '%s: %s'.format(p.name, p.description)); });

		o = s.taboption('match', form.DynamicList, 'domain', _('Names'),
			_('DNS names the remote end is reached by (dl.example.com, *.example.com). ') + nameNote());
		o.modalonly = true;

		o = s.taboption('match', form.DynamicList, 'lan_hostname', _('LAN devices by name'),
			_('Host names from the DHCP leases; the rule follows the device when its address changes.'));
		o.modalonly = true;

		o = s.taboption('match', form.DynamicList, 'lan_host', _('LAN hosts'),
			_('Addresses or prefixes of LAN hosts (192.168.1.20, fd00::/64).'));
		o.modalonly = true;
		o.datatype = 'ipaddr';

		o = s.taboption('match', form.DynamicList, 'lan_mac', _('LAN MAC addresses'),
			_('MAC addresses of LAN hosts (router mode only).'));
		o.modalonly = true;
		o.datatype = 'macaddr';

		// Lease hosts as choices for the three LAN host lists.
		var seen = { lan_hostname: {}, lan_host: {}, lan_mac: {} };
		var hostOpts = s.children.filter(function(c) { return c.option in seen; });
		(leases.dhcp_leases || []).concat(leases.dhcp6_leases || []).forEach(function(l) {
			var name = l.hostname || '', ip = l.ipaddr || l.ip6addr || (l.ip6addrs || [])[0], mac = l.macaddr;
			hostOpts.forEach(function(opt) {
				var key = (opt.option == 'lan_hostname') ? name : (opt.option == 'lan_host') ? ip : mac;
				if (!key || seen[opt.option][key])
					return;
				seen[opt.option][key] = true;
				opt.value(key, (key == name || !name) ? key : '%s (%s)'.format(key, name));
			});
		});

		o = s.taboption('match', form.DynamicList, 'remote_port', _('Remote ports'),
			_('Ports of the far end: 6881 or a range 6881-6999. Port 443 is most web traffic: class the device instead.'));
		o.modalonly = true;
		o.datatype = 'portrange';

		o = s.taboption('match', form.DynamicList, 'local_port', _('Local ports'), _('Ports of the LAN host.'));
		o.modalonly = true;
		o.datatype = 'portrange';

		o = s.taboption('match', form.DynamicList, 'dscp', _('DSCP'), _('Values 0-63 or names: LE, CS1, AF11, EF, ...'));
		o.modalonly = true;
		['LE', 'CS1', 'AF11', 'AF12', 'AF13'].forEach(function(v) { o.value(v); });

		o = s.taboption('match', form.ListValue, 'protocol', _('Protocol'),
			_('Which flows the rule classes. UDP: uTP (BitTorrent), QUIC (HTTP/3) downloads. Automatic: TCP, and UDP too where a chosen preset\'s hosts also serve QUIC.'));
		o.modalonly = true;
		o.value('', _('automatic (TCP; UDP too for presets with QUIC)'));
		o.value('tcp', 'TCP');
		o.value('udp', 'UDP');
		o.value('both', _('TCP and UDP'));

		o = s.taboption('match', form.ListValue, 'quic', _('QUIC (UDP to port 443)'),
			_('control: classed like the rule\'s other UDP flows. refuse: rejected, so browsers fall back to TCP, where the window controls them (the rule\'s remote ports must include 443, or be empty).'));
		o.modalonly = true;
		o.value('control', _('control'));
		o.value('refuse', _('refuse (fall back to TCP)'));
		o.default = 'control';
		o.depends('protocol', 'udp');
		o.depends('protocol', 'both');
		o.depends('protocol', '');

		o = s.taboption('control', form.ListValue, 'controller', _('Controller'),
			_('household: the flows get a part of the household budget (works without TCP timestamps). vulture: each flow yields when the link\'s delay rises (needs TCP timestamps). fixed_window: a constant window.'));
		o.value('household', _('household'));
		o.value('vulture', _('vulture'));
		o.value('fixed_window', _('fixed window'));
		o.default = 'household';
		o.textvalue = function(sid) {
			var c = uci.get('slipstream', sid, 'controller') || 'household', parts = [c];
			if (c == 'household') {
				parts.push(_('weight %s').format(uci.get('slipstream', sid, 'weight') || '1'));
				var p = uci.get('slipstream', sid, 'priority');
				var r = uci.get('slipstream', sid, 'min_rate');
				if (p) parts.push(_('priority %s').format(p));
				if (r) parts.push(_('at least %s').format(r));
			}
			return parts.join(', ');
		};

		o = s.taboption('control', form.Value, 'weight', _('Weight'),
			_('1 to 1000: rules of the same priority share in proportion to their weights.'));
		o.modalonly = true;
		o.placeholder = '1';
		o.datatype = 'range(1,1000)';
		o.depends('controller', 'household');

		o = s.taboption('control', form.ListValue, 'priority', _('Priority'),
			_('Lower numbers are served first, up to what their flows use.'));
		o.modalonly = true;
		for (var p = 0; p <= 7; p++)
			o.value(String(p));
		o.default = '0';
		o.depends('controller', 'household');

		o = s.taboption('control', form.Value, 'min_rate', _('Minimum rate'),
			_('Kept together whatever the budget, also at the expense of best effort: keep it small. Bits per second with a unit: 500kbit, 2mbit.'));
		o.modalonly = true;
		o.placeholder = '0';
		o.depends('controller', 'household');

		o = s.taboption('control', form.Value, 'window_bytes', _('Window (bytes)'),
			_('Required with this controller: 65535 is about 5 Mbit/s at 100 ms round trip.'));
		o.modalonly = true;
		o.rmempty = false;
		o.default = '65535';
		o.datatype = 'uinteger';
		o.depends('controller', 'fixed_window');

		o = s.taboption('control', form.ListValue, 'variant', _('Vulture variant'));
		o.modalonly = true;
		o.value('slipstream', 'slipstream');
		o.value('paper', 'paper');
		o.default = 'slipstream';
		o.depends('controller', 'vulture');

		o = s.taboption('control', form.Value, 'queue_delay_limit', _('Queue delay limit'),
			_('Step back when the router\'s queueing delay exceeds this; off to ignore it.'));
		o.modalonly = true;
		o.placeholder = '10ms';
		o.depends('controller', 'vulture');

		[['psi', '20ms'], ['piv_resolution', '4ms'], ['conservative_low', '4ms'], ['conservative_high', '8ms'],
		 ['aggressive_low', '12ms'], ['aggressive_high', '20ms'], ['alpha', '0.875']].forEach(function(v) {
			o = s.taboption('control', form.Value, v[0], v[0], _('One of Vulture\'s thresholds (the paper\'s defaults).'));
			o.modalonly = true;
			o.placeholder = v[1];
			o.depends('controller', 'vulture');
		});

		this.map = m;
		ss.attachServerErrors(m);

		var select = E('select', { 'class': 'cbi-input-select' }, TEMPLATES.map(function(t) {
			return E('option', { 'value': t.id }, t.title);
		}));
		var bar = E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Add a rule from a preset')),
			E('div', { 'class': 'cbi-section-descr' }, _('Creates a rule with household control below the others; review it, then Save & Apply.')),
			E('div', { 'class': 'cbi-section-create' }, [select, ' ',
				E('button', { 'class': 'cbi-button cbi-button-add', 'click': ui.createHandlerFn(this, function() {
					return self.handleAddTemplate(m, select);
				}) }, _('Add'))])
		]);

		return m.render().then(function(node) {
			return E([], [node, bar]);
		});
	},

	handleSaveApply: function(ev, mode) {
		return ss.saveCheckApply(this, ev, mode);
	}
});
