'use strict';
'require view';
'require form';
'require uci';
'require tools.widgets as widgets';
'require slipstream.common as ss';

// The global options: `config slipstream 'main'` of /etc/config/slipstream (docs/configuration.md,
// "Global settings"). Empty fields keep the daemon's default, shown as the placeholder.

return view.extend({
	load: function() {
		return uci.load('slipstream');
	},

	render: function() {
		var m, s, o;

		m = new form.Map('slipstream', _('Slipstream: settings'),
			_('Slipstream makes background TCP flows (downloads, backups, game updates) yield to everything else on the internet link by lowering the receive window in the ACKs the router forwards. Which flows are background is decided on the Rules page.'));

		if (!uci.get('slipstream', 'main'))
			uci.add('slipstream', 'slipstream', 'main');

		s = m.section(form.NamedSection, 'main', 'slipstream');
		s.tab('general', _('General'));
		s.tab('datapath', _('Datapath'));
		s.tab('names', _('Rules by name'));
		s.tab('limits', _('Limits and monitoring'));

		o = s.taboption('general', form.Flag, 'enabled', _('Enabled'),
			_('Off: the daemon does not run, and no flow is slowed down.'));
		o.default = '1';
		o.rmempty = false;

		o = s.taboption('general', widgets.DeviceSelect, 'lan_interface', _('LAN interfaces'),
			_('Interfaces facing the household. A trailing "+" is a wildcard (wlan+). Default: br-lan.'));
		o.multiple = true;
		o.noaliases = true;
		o.nocreate = false;
		o.placeholder = 'br-lan';

		o = s.taboption('general', form.ListValue, 'engine', _('Datapath engine'),
			_('nfqueue: every packet of a background flow passes the daemon. ebpf: tc eBPF programs on the LAN interfaces lower the windows in the kernel (needs kmod-sched-bpf; works with software flow offloading; a change needs a restart). auto: ebpf where it loads, else nfqueue.'));
		o.value('nfqueue', 'nfqueue');
		o.value('ebpf', 'ebpf');
		o.value('auto', 'auto');
		o.default = 'nfqueue';

		o = s.taboption('general', form.ListValue, 'hook', _('Traffic'),
			_('forward: traffic the router forwards between the LAN and the internet; local: the router\'s own traffic; both.'));
		o.value('forward', _('forwarded (router)'));
		o.value('local', _('this machine\'s own'));
		o.value('both', _('both'));
		o.default = 'forward';

		o = s.taboption('general', form.Flag, 'ipv6', _('IPv6'), _('Also handle IPv6 flows.'));
		o.default = '1';

		o = s.taboption('datapath', form.ListValue, 'firewall', _('Firewall tool'),
			_('auto: nftables when its queue statement works (kmod-nft-queue), else iptables-legacy.'));
		o.value('auto', 'auto');
		o.value('nftables', 'nftables');
		o.value('iptables', 'iptables');
		o.default = 'auto';

		o = s.taboption('datapath', form.Value, 'ack_queue', _('ACK queue'), _('NFQUEUE number for handshakes and ACKs.'));
		o.datatype = 'range(0,65535)';
		o.placeholder = '8470';

		o = s.taboption('datapath', form.Value, 'data_queue', _('Data queue'), _('NFQUEUE number for data packets; must differ from the ACK queue.'));
		o.datatype = 'range(0,65535)';
		o.placeholder = '8471';

		o = s.taboption('datapath', form.Value, 'queue_max_len', _('Queue length'), _('Packets per kernel queue; when full, further packets skip the daemon.'));
		o.datatype = 'uinteger';
		o.placeholder = '4096';

		o = s.taboption('datapath', form.Value, 'data_copy_bytes', _('Bytes copied per data packet'), _('65535: whole packets, so ACKs carrying data can be rewritten; 128: headers only.'));
		o.datatype = 'range(100,65535)';
		o.placeholder = '65535';

		o = s.taboption('datapath', form.Value, 'ack_max_len', _('Largest ACK'), _('Packets up to this IP length (IPv4; IPv6 adds 20) go to the ACK queue.'));
		o.datatype = 'range(40,65515)';
		o.placeholder = '128';

		o = s.taboption('datapath', form.Value, 'mark_mask', _('Mark bits'), _('Connmark bits Slipstream owns (one run of at least 8 bits). Change it if mwan3, SQM or another package uses these.'));
		o.placeholder = '0x00ff0000';

		o = s.taboption('names', form.Value, 'set_timeout', _('Address lifetime'), _('How long an address dnsmasq resolved for a rule\'s names stays in the rule\'s set (a duration: 1h, 30m). A change needs a restart.'));
		o.placeholder = '1h';

		o = s.taboption('names', form.Value, 'dnsmasq_conf', _('dnsmasq snippet'), _('Where the daemon writes the dnsmasq lines for rules by name; empty keeps the default.'));
		o.placeholder = '/tmp/dnsmasq.d/slipstream.conf';

		o = s.taboption('names', form.DynamicList, 'dhcp_leases', _('Lease files'), _('Read for rules by LAN host name. Default: /tmp/dhcp.leases and /tmp/hosts/odhcpd.'));
		o.placeholder = '/tmp/dhcp.leases';

		o = s.taboption('names', form.Value, 'lease_poll', _('Lease check interval'), _('How often the lease files are checked for changes.'));
		o.placeholder = '5s';

		o = s.taboption('limits', form.Value, 'max_flows', _('Most flows tracked'), _('Background flows tracked at once.'));
		o.datatype = 'range(1,1000000)';
		o.placeholder = '4096';

		o = s.taboption('limits', form.Value, 'idle_timeout', _('Idle timeout'), _('A flow without packets this long is forgotten.'));
		o.placeholder = '120s';

		o = s.taboption('limits', form.Value, 'evict_idle_after', _('Evict after idle'), _('When the table is full, a new flow may replace one idle at least this long.'));
		o.placeholder = '10s';

		o = s.taboption('limits', form.Value, 'metrics_listen', _('Metrics and live page address'), _('address:port of the Prometheus endpoint (/metrics). 127.0.0.1 keeps it on the router; 0.0.0.0 serves the LAN (read-only, unauthenticated).'));
		o.placeholder = '127.0.0.1:9617';

		o = s.taboption('limits', form.Value, 'top_flows', _('Flows with their own series'), _('How many of the busiest flows get per-flow metrics.'));
		o.datatype = 'range(0,1000)';
		o.placeholder = '32';

		o = s.taboption('limits', form.Value, 'control_socket', _('Control socket'), _('The local socket `slipstream status` and this page use.'));
		o.placeholder = '/var/run/slipstream.sock';

		this.map = m;
		ss.attachServerErrors(m);
		return m.render();
	},

	handleSaveApply: function(ev, mode) {
		return ss.saveCheckApply(this, ev, mode);
	}
});
