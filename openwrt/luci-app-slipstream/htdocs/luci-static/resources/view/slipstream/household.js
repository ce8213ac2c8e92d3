'use strict';
'require view';
'require form';
'require uci';
'require slipstream.common as ss';

// The household budget: `config household 'household'` (docs/configuration.md, "Household
// control"). Every rule with controller 'household' shares it: the bytes the household's
// background flows may have in flight together on each access link.

return view.extend({
	load: function() {
		return uci.load('slipstream');
	},

	render: function() {
		var m, s, o, sid = null;

		uci.sections('slipstream', 'household', function(section) {
			if (sid == null)
				sid = section['.name'];
		});

		m = new form.Map('slipstream', _('Slipstream: household budget'),
			_('All background flows of rules with household control share one budget per access link, so the household\'s background traffic as a whole yields to everything else, however many flows and devices it has. The budget controller decides how large the budget is; each rule\'s weight, priority and minimum rate (Rules page) decide its part.'));

		s = m.section(form.NamedSection, sid || 'household', 'household');
		s.addremove = true;
		s.addbtntitle = _('Set up the household budget');

		o = s.option(form.ListValue, 'budget', _('Budget controller'),
			_('Delay target keeps the queueing delay the background adds at the router near a target (LEDBAT-like). The two Key et al. controllers search for the largest budget that does not slow the others down.'));
		o.value('delay_target', _('Delay target'));
		o.value('key_binary_search', _('Key et al.: binary search'));
		o.value('key_stochastic', _('Key et al.: stochastic approximation'));
		o.default = 'delay_target';

		o = s.option(form.Value, 'target', _('Delay target'),
			_('The queueing delay the background flows may add at the router (up to 1s).'));
		o.placeholder = '10ms';
		o.depends('budget', 'delay_target');

		o = s.option(form.Value, 'interactive_target', _('Target during calls and games'),
			_('The queue aimed at while best effort sends steadily, 25 packets a second or more (a call, a game); at most the target.'));
		o.placeholder = '1ms';
		o.depends('budget', 'delay_target');

		o = s.option(form.ListValue, 'variant', _('Step'),
			_('proportional steps in proportion to the delivery rate; ledbat is RFC 6817\'s step (slow on fast links).'));
		o.value('proportional', 'proportional');
		o.value('ledbat', 'ledbat');
		o.default = 'proportional';
		o.depends('budget', 'delay_target');

		o = s.option(form.Value, 'gain', _('Gain'), _('Share of the distance to the target removed per round: above 0, at most 1.'));
		o.placeholder = '0.5';
		o.datatype = 'ufloat';
		o.depends('budget', 'delay_target');

		o = s.option(form.Value, 'max_growth', _('Most growth per round'), _('How many times the budget may grow per round while the delay is low (1 to 4).'));
		o.placeholder = '1.5';
		o.datatype = 'ufloat';
		o.depends({ budget: 'delay_target', variant: 'proportional' });

		o = s.option(form.Flag, 'early_yield', _('Yield early'),
			_('When an ordinary flow opens, step back before its slow start arrives.'));
		o.default = '1';
		o.depends({ budget: 'delay_target', variant: 'proportional' });

		o = s.option(form.Value, 'interval', _('Control interval'), _('One round (50ms to 10s).'));
		o.placeholder = '200ms';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'unit_bytes', _('Budget resolution (bytes)'));
		o.placeholder = '100';
		o.datatype = 'range(1,65536)';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'epsilon_units', _('Epsilon'), _('How far the delivery per unit of budget may fall before the budget is too large.'));
		o.placeholder = '1';
		o.datatype = 'ufloat';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'epsilon_prime_units', _('Epsilon prime'), _('Samples further below leave the reference alone.'));
		o.placeholder = '1';
		o.datatype = 'ufloat';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'delta', _('Reference weight'), _('EWMA weight of the reference, between 0 and 1.'));
		o.placeholder = '0.1';
		o.datatype = 'ufloat';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'c', _('Overshoot cost'), _('Cost of overshooting against undershooting; 1 halves the bracket.'));
		o.placeholder = '1';
		o.datatype = 'ufloat';
		o.depends('budget', 'key_binary_search');

		o = s.option(form.Value, 'gamma', _('Step gain'));
		o.placeholder = '1';
		o.datatype = 'ufloat';
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'max_budget_bytes', _('Largest budget (bytes)'));
		o.placeholder = '67108864';
		o.datatype = 'uinteger';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Flag, 'anchored_estimate', _('Anchored reference'), _('Keeps the reference from drifting down (off: as the paper writes it).'));
		o.default = '1';
		o.depends('budget', 'key_binary_search');
		o.depends('budget', 'key_stochastic');

		o = s.option(form.Value, 'slowdown_interval', _('Coordinated slowdown every'),
			_('All background flows of a link slow down together for two rounds this often, so the link\'s base delay is measured on an empty queue. At least 2s; off turns it off.'));
		o.placeholder = '30s';

		o = s.option(form.Value, 'turn', _('Turn length'),
			_('When the budget cannot give every flow two segments, flows take turns of at least this long (50ms to 10s).'));
		o.placeholder = '500ms';

		o = s.option(form.Value, 'probe', _('Delay probes to'),
			_('While the link carries background flows whose packets cannot be timed (QUIC is encrypted), the router pings a host beyond the access link to measure its queueing delay. auto: the default route\'s gateway (a PPPoE link has none: give an address, such as the ISP\'s first hop); off: no probes; or an IPv4 or IPv6 address.'));
		o.value('auto', _('auto (the default gateway)'));
		o.value('off', _('off'));
		o.placeholder = 'auto';

		o = s.option(form.ListValue, 'udp', _('Background UDP without a window'),
			_('How a background UDP flow whose window the router cannot lower (QUIC is encrypted) is held to its share. shape: its packets over the share wait at the router, up to one round trip\'s worth, and only beyond that is one dropped (or marked) per round trip; police: they are dropped (or marked) at once.'));
		o.value('shape', _('shape (hold at the router)'));
		o.value('police', _('police (drop or mark)'));
		o.default = 'shape';

		this.map = m;
		ss.attachServerErrors(m);
		return m.render();
	},

	handleSaveApply: function(ev, mode) {
		return ss.saveCheckApply(this, ev, mode);
	}
});
