'use strict';
'require view';
'require poll';
'require dom';
'require slipstream.common as ss';

// The live view: the daemon's own numbers, polled every 2 s while the page is open. status and
// flows come over the control socket; the 10-minute history, the yields, per-host best effort
// and the rules' bytes today come from the daemon's live page API on its HTTP listener (when it
// has one that answers); without it this view keeps its own history while it is open.

var POLL_SECS = 2;
var WINDOW_MS = 600000;

function svgEl(tag, attrs) {
	var el = document.createElementNS('http://www.w3.org/2000/svg', tag);
	Object.keys(attrs || {}).forEach(function(k) { el.setAttribute(k, attrs[k]); });
	return el;
}

// A small chart: one polyline per series over the window, common y scale, max labelled.
function chart(series, nowMs) {
	var w = 600, h = 90, top = 0;
	series.forEach(function(s) { s.points.forEach(function(p) { if (p[1] != null) top = Math.max(top, p[1]); }); });
	var max = Math.max(top, 1);
	var svg = svgEl('svg', { 'viewBox': '0 0 ' + w + ' ' + h, 'width': '100%', 'height': h, 'preserveAspectRatio': 'none',
		'style': 'display:block;max-width:' + w + 'px;border:1px solid #ccc;background:#fafafa' });
	series.forEach(function(s) {
		var pts = s.points.filter(function(p) { return p[1] != null; }).map(function(p) {
			var x = w - (nowMs - p[0]) / WINDOW_MS * w, y = h - 4 - p[1] / max * (h - 16);
			return x.toFixed(1) + ',' + y.toFixed(1);
		});
		if (pts.length > 1)
			svg.appendChild(svgEl('polyline', { 'points': pts.join(' '), 'fill': 'none', 'stroke': s.color, 'stroke-width': 2 }));
	});
	var label = svgEl('text', { 'x': 4, 'y': 11, 'font-size': 10, 'fill': '#555' });
	label.textContent = ss.fmtRate(top);
	svg.appendChild(label);
	return svg;
}

function table(headers, rows) {
	return E('table', { 'class': 'table' }, [
		E('tr', { 'class': 'tr table-titles' }, headers.map(function(h) { return E('th', { 'class': 'th' }, h); }))
	].concat(rows.length ? rows.map(function(r) {
		// data-title: LuCI's narrow-screen style shows each cell under its column's name.
		return E('tr', { 'class': 'tr' }, r.map(function(c, i) { return E('td', { 'class': 'td', 'data-title': headers[i] }, c); }));
	}) : [E('tr', { 'class': 'tr placeholder' }, E('td', { 'class': 'td', 'colspan': headers.length }, E('em', {}, _('none'))))]));
}

return view.extend({
	// This view's own samples per link (used when the daemon's history is not reachable), and
	// the phases last seen (a change into "yield" is logged as the background stepping back).
	samples: {},
	phases: {},
	localYields: [],
	names: {},
	// The daemon's history as fetched so far (later polls ask only for newer samples).
	history: null,

	load: function() {
		return L.resolveDefault(ss.callHostHints(), {});
	},

	// When the daemon's live page API does not answer, it is asked again only after this time
	// (ms), not on every poll.
	apiRetryAt: 0,

	fetch: function() {
		var self = this, api = Date.now() >= this.apiRetryAt;
		return Promise.all([
			L.resolveDefault(ss.callStatus(), { running: false, error: _('no answer from rpcd') }),
			L.resolveDefault(ss.callFlows(), {}),
			api ? L.resolveDefault(ss.callHistory(this.history ? this.history.lastT : 0), {}) : {},
			api ? L.resolveDefault(ss.callHosts(), {}) : {}
		]).then(function(data) {
			if (api && !(data[2] && data[2].available))
				self.apiRetryAt = Date.now() + 30000;
			return data;
		});
	},

	// Merges a history answer into what this view has: new samples appended, the window kept,
	// yields and rules replaced (the daemon always sends them whole).
	mergeHistory: function(ans) {
		if (!ans || !ans.available || !ans.history || !Array.isArray(ans.history.samples)) {
			this.history = null;
			return {};
		}
		var h = ans.history, old = this.history || { samples: [] };
		var samples = old.samples.concat(h.samples).filter(function(smp) { return h.now_unix_ms - smp.t_unix_ms < WINDOW_MS; });
		this.history = {
			samples: samples,
			yields: h.yields || [],
			rules: h.rules || [],
			now_unix_ms: h.now_unix_ms,
			lastT: samples.length ? samples[samples.length - 1].t_unix_ms : 0
		};
		return this.history;
	},

	remember: function(st, nowMs) {
		(st.household || []).forEach(function(l) {
			var s = this.samples[l.link] = (this.samples[l.link] || []).filter(function(p) { return nowMs - p.t < WINDOW_MS; });
			s.push({ t: nowMs, bg: l.goodput_bps, be: l.best_effort_bps, budget: l.budget_bytes });
			if (this.phases[l.link] && this.phases[l.link] != 'yield' && l.phase == 'yield')
				this.localYields.push({ link: l.link, kind: 'background_stepped_back', t_unix_ms: nowMs, background_bps: l.goodput_bps, best_effort_bps: l.best_effort_bps });
			this.phases[l.link] = l.phase;
		}, this);
		this.localYields = this.localYields.slice(-20);
	},

	renderLinks: function(st, history, nowMs) {
		var haveHistory = Array.isArray(history.samples);
		return (st.household || []).map(function(l) {
			var bg, be;
			if (haveHistory) {
				var pts = history.samples.map(function(smp) {
					var x = (smp.links || []).filter(function(y) { return y.link == l.link; })[0] || {};
					return [smp.t_unix_ms, x.background_bps, x.best_effort_bps];
				});
				bg = pts.map(function(p) { return [p[0], p[1]]; });
				be = pts.map(function(p) { return [p[0], p[2]]; });
			} else {
				bg = (this.samples[l.link] || []).map(function(p) { return [p.t, p.bg]; });
				be = (this.samples[l.link] || []).map(function(p) { return [p.t, p.be]; });
			}
			return E('div', { 'class': 'cbi-section' }, [
				E('h4', {}, _('%s link').format(l.link)),
				E('p', {}, [
					E('span', { 'style': 'color:#1f77b4;font-weight:bold' }, _('background %s').format(ss.fmtRate(l.goodput_bps))), ' · ',
					E('span', { 'style': 'color:#2ca02c;font-weight:bold' }, _('best effort %s').format(l.best_effort_bps == null ? '-' : ss.fmtRate(l.best_effort_bps))), ' · ',
					_('budget %s (in flight %s)').format(ss.fmtBytes(l.budget_bytes), ss.fmtBytes(l.in_flight_bytes)), ' · ',
					_('added delay %s, base RTT %s').format(ss.fmtMs(l.queue_delay_ms), ss.fmtMs(l.base_rtt_ms)), ' · ',
					l.queue_target_ms == null ? '' : _('target %s %s').format(ss.fmtMs(l.queue_target_ms),
						{ alone: _('(alone)'), browsing: _('(beside browsing)'), steady: _('(beside a call or a game)') }[l.best_effort_pace] || ''), l.queue_target_ms == null ? '' : ' · ',
					_('%d flows (%d waiting), %s').format(l.flows, l.held_flows, l.phase)
				]),
				chart([{ points: be, color: '#2ca02c' }, { points: bg, color: '#1f77b4' }], haveHistory ? history.now_unix_ms : nowMs),
				E('div', { 'style': 'font-size:smaller' }, haveHistory ? _('Last 10 minutes (the daemon\'s history).') : _('Since this page was opened (the daemon\'s history API is not reachable).'))
			]);
		}, this);
	},

	renderContent: function(data, nowMs) {
		var stAns = data[0] || {}, flowsAns = data[1] || {}, history = this.mergeHistory(data[2]), hostsAns = (data[3] || {}).hosts || null;
		if (!stAns.running)
			return E('div', { 'class': 'alert-message warning' }, [E('strong', {}, _('The daemon does not answer.')), ' ', stAns.error || '']);
		var st = stAns.status || {}, flows = (flowsAns.flows || {}).flows || [];
		this.remember(st, nowMs);
		var names = this.names;

		var links = this.renderLinks(st, history, nowMs);

		var yields = (history.yields || this.localYields).slice(-8).reverse().map(function(y) {
			return [new Date(y.t_unix_ms).toLocaleTimeString(), y.link,
				y.kind == 'best_effort_arrived' ? _('best effort arrived') : _('the background stepped back') + (y.after_ms != null ? _(' after %s').format(ss.fmtMs(y.after_ms)) : ''),
				ss.fmtRate(y.background_bps), y.best_effort_bps == null ? '-' : ss.fmtRate(y.best_effort_bps)];
		});

		var hostRows;
		if (hostsAns && Array.isArray(hostsAns.hosts)) {
			hostRows = hostsAns.hosts.map(function(h) {
				return [h.name || names[h.address] || '-', h.address, ss.fmtRate(h.background_bps),
					h.best_effort_bps == null ? '-' : ss.fmtRate(h.best_effort_bps), String(h.background_flows)];
			});
		} else {
			var byHost = {};
			flows.forEach(function(f) {
				var lan = ss.hostOf(ss.lanAndRemote(f)[0]);
				var h = byHost[lan] = byHost[lan] || { bps: 0, n: 0 };
				h.bps += f.goodput_bps || 0;
				h.n++;
			});
			hostRows = Object.keys(byHost).sort(function(a, b) { return byHost[b].bps - byHost[a].bps; }).map(function(a) {
				return [names[a] || '-', a, ss.fmtRate(byHost[a].bps), '-', String(byHost[a].n)];
			});
		}

		// status's rules, with the history's rate and bytes today where the daemon has them.
		var ruleHist = {};
		(history.rules || []).forEach(function(r) { ruleHist[r.name] = r; });
		var ruleRows = (st.rules || []).map(function(r) {
			var h = ruleHist[r.name] || {};
			return [r.name + (r.removed ? ' ' + _('(removed)') : ''), String(r.active_flows), h.rate_bps != null ? ss.fmtRate(h.rate_bps) : '-',
				h.bytes_today != null ? ss.fmtBytes(h.bytes_today) : '-', String(r.flows_started)];
		});

		var flowRows = flows.slice(0, 20).map(function(f) {
			var lr = ss.lanAndRemote(f), lanHost = ss.hostOf(lr[0]);
			return [f.rule + (f.matched_by ? ' (' + f.matched_by + ')' : ''), (names[lanHost] ? names[lanHost] + ' ' : '') + lr[0],
				lr[1], lr[2], ss.fmtRate(f.goodput_bps), ss.fmtMs(f.rtt_ms), ss.flowWhy(f)];
		});

		return E('div', {}, [
			E('div', { 'class': 'cbi-section' }, [E('h3', {}, _('Links')), st.household && st.household.length ? '' :
				E('p', {}, E('em', {}, _('No rule uses household control, so there is no shared budget to show.')))].concat(links)),
			E('div', { 'class': 'cbi-section' }, [E('h3', {}, _('Recent yields')),
				table([_('Time'), _('Link'), _('What'), _('Background'), _('Best effort')], yields)]),
			E('div', { 'class': 'cbi-section' }, [E('h3', {}, _('LAN hosts')),
				table([_('Name'), _('Address'), _('Background'), _('Best effort'), _('Background flows')], hostRows)]),
			E('div', { 'class': 'cbi-section' }, [E('h3', {}, _('Rules')),
				table([_('Rule'), _('Flows now'), _('Rate'), _('Today'), _('Flows since start')], ruleRows)]),
			E('div', { 'class': 'cbi-section' }, [E('h3', {}, _('Busiest flows (%d tracked)').format((flowsAns.flows || {}).active || 0)),
				table([_('Rule'), _('LAN host'), _('Remote'), _('Dir'), _('Rate'), _('RTT'), _('Why')], flowRows)])
		]);
	},

	render: function(hints) {
		var self = this;
		this.names = ss.namesByAddress(hints);
		var body = E('div', { 'id': 'slipstream-live' }, E('em', { 'class': 'spinning' }, _('Asking the daemon…')));
		var refresh = function() {
			return self.fetch().then(function(data) {
				dom.content(body, self.renderContent(data, Date.now()));
			});
		};
		poll.add(refresh, POLL_SECS);
		refresh();
		return E('div', {}, [
			E('h2', {}, _('Slipstream: live')),
			E('div', { 'class': 'cbi-map-descr' }, _('What the daemon is doing now, every %d seconds.').format(POLL_SECS)),
			body
		]);
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
