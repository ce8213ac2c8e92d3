// Checks of luci-app-slipstream's JavaScript that need no LuCI, run by openwrt/tests/luci_app.sh:
//
// 1. Syntax: every file under htdocs/ compiled by V8 the way LuCI's loader compiles a module (the
//    source as the body of a function whose parameters are the required modules), so a top-level
//    `return view.extend(...)` is legal and anything else V8 refuses is caught.
// 2. Every `'require x'` names a LuCI core module or a module of this app.
// 3. Each view is run: load() and render() against a recording stand-in of LuCI's form, uci, rpc,
//    ui, poll and dom (not LuCI itself), with the daemon's answers given on the command line, so a
//    view that throws while building its form or drawing real data fails here. The stand-in
//    records every `s.option(...)` / `s.taboption(...)` with its section type and widget, every
//    rpc.declare and every UCI config touched.
// 4. What the views edit is compared with what the daemon accepts: `slipstreamd --check-config`
//    lists the options of each section type when given an unknown one, and refuses `list` for a
//    single-value option; the rpc methods with the backend's `list` and the ACL; the menu's views
//    with the files.
//
// Usage: node luci_app.js <app dir> <slipstreamd> <backend list JSON file> <answers JSON file>
// Prints one line per check and "luci_app_js: N passed, M failed"; exit status 1 on a failure.
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const { execFileSync } = require('child_process');

const [appDir, slipstreamd, backendListFile, answersFile] = process.argv.slice(2);
let passed = 0, failed = 0;
function check(desc, ok, detail) {
	if (ok) { passed++; console.log('ok: ' + desc); }
	else { failed++; console.log('FAIL: ' + desc + (detail ? '\n  ' + detail : '')); }
}

const RES = path.join(appDir, 'htdocs/luci-static/resources');
const VIEWS = path.join(RES, 'view/slipstream');
// LuCI's own modules (luci-base: htdocs/luci-static/resources/*.js, tools/*.js).
const LUCI_MODULES = ['baseclass', 'dom', 'form', 'fs', 'firewall', 'network', 'poll', 'request', 'rpc',
	'uci', 'ui', 'validation', 'view', 'tools.widgets', 'tools.views', 'tools.firewall'];

function walk(dir) {
	return fs.readdirSync(dir, { withFileTypes: true }).flatMap(e =>
		e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.js') ? [path.join(dir, e.name)] : []);
}

// `'require a.b as c'` lines at the top: [module, local name].
function requiresOf(src) {
	const out = [];
	const re = /^\s*'require\s+([\w.]+)(?:\s+as\s+(\w+))?'\s*;/gm;
	let m;
	while ((m = re.exec(src)) != null)
		out.push([m[1], m[2] || m[1].split('.').pop()]);
	return out;
}

// --- 1, 2: syntax and requires ----------------------------------------------------------------
const files = walk(RES);
check('JavaScript files found (' + files.length + ')', files.length >= 6);
for (const f of files) {
	const src = fs.readFileSync(f, 'utf8');
	const rel = path.relative(RES, f);
	const params = ['L', 'window', 'document', '_', 'N_', 'E'].concat(requiresOf(src).map(r => r[1]));
	let err = null;
	try { new Function(params.join(','), src); } catch (e) { err = e.message; }
	check('syntax (V8, as LuCI loads it): ' + rel, err == null, err);
	check('\'use strict\' first: ' + rel, /^'use strict';/.test(src));
	for (const [mod] of requiresOf(src)) {
		const own = fs.existsSync(path.join(RES, mod.replace(/\./g, '/') + '.js'));
		check('require ' + mod + ' exists: ' + rel, LUCI_MODULES.includes(mod) || own);
	}
}

// --- 3: run the views against the stand-in ----------------------------------------------------
const answers = JSON.parse(fs.readFileSync(answersFile, 'utf8'));
const record = { options: [], rpc: [], uciConfigs: new Set(), errors: [], notes: [], applied: [] };

if (!String.prototype.format) {
	// LuCI's String.prototype.format, enough of it: %s %d %f %h %% in order.
	String.prototype.format = function() {
		const args = arguments;
		let i = 0;
		return this.replace(/%(-?\d*)(?:\.(\d+))?([sdfhq%])/g, (m, w, p, t) => {
			if (t == '%') return '%';
			const v = args[i++];
			if (t == 'd') return String(Math.trunc(Number(v)));
			if (t == 'f') return Number(v).toFixed(p == null ? 6 : +p);
			return String(v);
		});
	};
}

function E(tag, attrs, children) {
	if (Array.isArray(tag)) return { tag: '#fragment', children: tag.concat(attrs || []) };
	if (Array.isArray(attrs) || typeof attrs == 'string') { children = attrs; attrs = {}; }
	return { tag, attrs: attrs || {}, children: [].concat(children == null ? [] : children), appendChild(c) { this.children.push(c); }, setAttribute() {}, querySelector() { return this; } };
}
const documentStub = { createElementNS: (ns, tag) => E(tag), getElementById: () => null };
const L = {
	resolveDefault: (p, d) => Promise.resolve(p).catch(() => d),
	toArray: v => v == null ? [] : Array.isArray(v) ? v : String(v).trim().split(/\s+/).filter(Boolean),
	bind: (fn, ctx, ...a) => fn.bind(ctx, ...a),
	isObject: v => v != null && typeof v == 'object',
	hasViewPermission: () => true,
	resource: p => '/luci-static/resources/' + p,
	error: (t, m) => { throw new Error(t + ': ' + m); }
};

function cls(name) {
	const c = function() {};
	c.__name__ = name;
	return c;
}
function makeForm() {
	const names = ['Map', 'JSONMap', 'NamedSection', 'TypedSection', 'TableSection', 'GridSection', 'Value', 'Flag',
		'ListValue', 'DynamicList', 'MultiValue', 'DummyValue', 'Button', 'HiddenValue', 'TextValue', 'RichListValue'];
	const form = {};
	for (const n of names) form[n] = cls(n);
	form.Map = function(config) {
		record.uciConfigs.add(config);
		this.config = config;
		this.children = [];
		this.section = function(sc, ...args) {
			const type = (sc.__name__ == 'NamedSection') ? args[1] : args[0];
			const s = { type, sectionClass: sc.__name__, children: [], tabs: {},
				tab(name) { this.tabs[name] = true; },
				option(oc, name) {
					const o = { option: name, widget: oc.__name__, deps: [], choices: [],
						value(k) { this.choices.push(k); }, depends(f, v) { this.deps.push(typeof f == 'string' ? { [f]: v } : f); },
						validate() { return true; } };
					this.children.push(o);
					record.options.push({ section: type, o });
					return o;
				},
				taboption(tab, oc, name) {
					if (!this.tabs[tab]) throw new Error('taboption on undeclared tab ' + tab);
					return this.option(oc, name);
				}
			};
			this.children.push(s);
			return s;
		};
		this.render = () => Promise.resolve(E('div', { 'class': 'cbi-map' }));
		this.renderContents = this.render;
		this.save = () => Promise.resolve();
		this.parse = () => Promise.resolve();
		this.load = () => Promise.resolve();
		this.lookupOption = () => null;
		this.findElement = () => null;
	};
	return form;
}

// The stand-in's UCI data: files/slipstream.config as uci would read it (options and lists of
// its uncommented sections), so the views see the shipped rules.
function parseUci(text) {
	const out = {};
	let cur = null, n = 0;
	for (const line of text.split('\n')) {
		let m = /^config (\w+)(?: '([^']*)')?/.exec(line);
		if (m) {
			const name = m[2] || 'cfg0' + (n++);
			cur = out[name] = { '.name': name, '.type': m[1], '.anonymous': !m[2], '.index': Object.keys(out).length };
			continue;
		}
		m = /^\s+(option|list) (\w+) '([^']*)'/.exec(line);
		if (m && cur) {
			if (m[1] == 'list') (cur[m[2]] = cur[m[2]] || []).push(m[3]);
			else cur[m[2]] = m[3];
		}
	}
	return out;
}
const uciData = { slipstream: parseUci(fs.readFileSync(path.join(appDir, '../files/slipstream.config'), 'utf8')), firewall: {} };
const uci = {
	load(c) { record.uciConfigs.add(c); return Promise.resolve(); },
	get(c, s, o) { record.uciConfigs.add(c); const sec = (uciData[c] || {})[s]; return sec ? (o == null ? sec : sec[o]) : undefined; },
	set(c) { record.uciConfigs.add(c); },
	add(c, t, n) { record.uciConfigs.add(c); return n || 'cfg01'; },
	sections(c, t, cb) {
		record.uciConfigs.add(c);
		const out = Object.values(uciData[c] || {}).filter(x => t == null || x['.type'] == t);
		if (cb) out.forEach(x => cb(x, x['.name']));
		return out;
	},
	resolveSID: (c, s) => s,
	save: () => Promise.resolve()
};
const rpc = {
	declare(spec) {
		record.rpc.push(spec);
		return function() {
			const a = (answers[spec.object] || {})[spec.method];
			if (a === undefined) return Promise.reject(new Error('no answer for ' + spec.object + '.' + spec.method));
			let v = a;
			if (spec.expect) {
				const k = Object.keys(spec.expect)[0];
				v = (k === '') ? a : (a[k] !== undefined ? a[k] : spec.expect[k]);
			}
			return Promise.resolve(v);
		};
	}
};
const polls = [];
const SAMPLE = {
	status: { running: true, status: Object.assign({}, (answers['luci.slipstream'].status || {}).status, {
		household: [{ link: 'download', controller: 'delay_target', phase: 'hold', budget_bytes: 48000, in_flight_bytes: 40000,
			queue_delay_ms: 6.2, base_rtt_ms: 20.5, queue_target_ms: 3.0, queue_aim_ms: 1.0, best_effort_pace: 'steady', flows: 2, held_flows: 1, goodput_bps: 3.1e6, best_effort_bps: 6.5e6,
			slowdowns: 3, window_updates: 7 }] }) },
	flows: { running: true, flows: { active: 2, max: 4096, flows: [
		{ rule: 'bittorrent', rule_removed: false, matched_by: '', controller: 'household', endpoints: ['192.168.1.20:51413', '203.0.113.7:6881'],
			sender: '203.0.113.7:6881', receiver: '192.168.1.20:51413', mode: 'household', policy: 'share', rwnd_bytes: 24000,
			host_window_bytes: 65535, target_window_bytes: 24000, cwnd_estimate_bytes: 30000, piv: null, goodput_bps: 3.1e6,
			acked_bytes: 123456789, rtt_ms: 31.0, unclamped: null, link: 'download', allocation_bytes: 24000, held: false },
		{ rule: 'dscp-background', rule_removed: false, matched_by: '', controller: 'household', endpoints: ['[fd00::20]:40000', '[2001:db8::1]:443'],
			sender: null, receiver: null, mode: '', policy: '', rwnd_bytes: null, host_window_bytes: null, target_window_bytes: null,
			cwnd_estimate_bytes: null, piv: null, goodput_bps: 0, acked_bytes: 0, rtt_ms: null, unclamped: null, link: null, allocation_bytes: null, held: true }] } }
};
const stubs = {
	baseclass: { extend: o => o },
	// view.extend as LuCI's: the default handleSave saves the maps (here: nothing to save).
	view: { extend: o => Object.assign({ handleSave: () => Promise.resolve() }, o) },
	form: makeForm(),
	uci,
	rpc,
	ui: {
		addNotification(title, body, kind) { record.notes.push({ title, body: JSON.stringify(body), kind }); },
		createHandlerFn: (ctx, fn) => fn,
		changes: { apply(checked) { record.applied.push(checked); } },
		showModal() {}, hideModal() {}
	},
	poll: { add(fn, secs) { polls.push([fn, secs]); } },
	dom: { content(node, c) { node.children = [c]; } },
	widgets: { DeviceSelect: cls('DeviceSelect') }
};
stubs['tools.widgets'] = stubs.widgets;

const loaded = {};
function load(mod) {
	if (loaded[mod]) return loaded[mod];
	if (stubs[mod]) return stubs[mod];
	const file = path.join(RES, mod.replace(/\./g, '/') + '.js');
	const src = fs.readFileSync(file, 'utf8');
	const req = requiresOf(src);
	const fn = new Function(['L', 'window', 'document', '_', 'N_', 'E'].concat(req.map(r => r[1])).join(','), src);
	const tr = s => s;
	loaded[mod] = fn.apply(L, [L, {}, documentStub, tr, tr, E].concat(req.map(r => load(r[0]))));
	return loaded[mod];
}

async function runView(name) {
	const before = record.options.length;
	let error = null;
	try {
		const v = load('view.slipstream.' + name);
		const data = v.load ? await v.load() : null;
		const node = await v.render(data);
		if (node == null) throw new Error('render returned nothing');
		const rounds = polls.splice(0);
		for (const [fn] of rounds) await fn();
		// Two more rounds with household control at work (a link and a flow in the fields of
		// crates/inspect/src/protocol.rs; the real daemon above had no traffic), so the links'
		// charts, the yields and the flows' rows are drawn too.
		if (rounds.length) {
			const real = answers['luci.slipstream'];
			answers['luci.slipstream'] = Object.assign({}, real, SAMPLE);
			for (const phase of ['hold', 'yield']) {
				SAMPLE.status.status.household[0].phase = phase;
				for (const [fn] of rounds) await fn();
			}
			answers['luci.slipstream'] = real;
		}
		// The grid's own cells (textvalue) for each shipped section of their type.
		for (const r of record.options.slice(before))
			if (typeof r.o.textvalue == 'function')
				uci.sections('slipstream', r.section).forEach(sec => r.o.textvalue(sec['.name']));
	} catch (e) {
		error = e && (e.stack || e.message || String(e));
	}
	check('view ' + name + ': load() and render() run (and a poll round)', error == null, error);
	return record.options.slice(before);
}

// --- 4: against the daemon, the backend, the ACL and the menu ---------------------------------
function daemonCheck(text) {
	const f = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'luci-app-')), 'slipstream');
	fs.writeFileSync(f, text);
	try {
		return execFileSync(slipstreamd, ['--check-config', f], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
	} catch (e) {
		return String(e.stderr);
	} finally {
		fs.rmSync(path.dirname(f), { recursive: true });
	}
}

// The options the daemon takes in a section of this type, from its own message.
function daemonOptions(type) {
	const out = daemonCheck(`config ${type} 'probe'\n\toption zz_not_an_option '1'\n`);
	const m = /known options of a `config \w+` section: (.*)$/m.exec(out);
	return m ? m[1].split(', ').map(s => s.trim()) : null;
}

// Whether the daemon takes `list <option>` in such a section (a list option).
function daemonTakesList(type, option) {
	const out = daemonCheck(`config ${type} 'probe'\n\tlist ${option} 'x'\n`);
	return !/takes a single value/.test(out);
}

(async function() {
	const views = fs.readdirSync(VIEWS).filter(f => f.endsWith('.js')).map(f => f.replace(/\.js$/, ''));
	for (const v of ['overview', 'settings', 'household', 'rules', 'live'])
		check('view ' + v + ' exists', views.includes(v));
	const edited = [];
	for (const v of views)
		for (const r of await runView(v))
			edited.push(Object.assign({ view: v }, r));

	// Save & Apply of the form views: applied when slipstreamd accepts the config, refused with
	// the daemon's message at the top when it does not.
	for (const v of ['settings', 'household', 'rules']) {
		const view = load('view.slipstream.' + v);
		for (const verdict of ['valid', 'invalid']) {
			const real = answers['luci.slipstream'].check_config;
			if (verdict == 'invalid')
				answers['luci.slipstream'].check_config = { valid: false, source: 'staged', section_type: 'rule', section: 'bittorrent',
					option: 'remote_port', message: 'port range 6999-6881 is reversed', error: 'x' };
			record.notes = []; record.applied = [];
			let err = null;
			try { await view.handleSaveApply({}, '0'); } catch (e) { err = e.stack || String(e); }
			answers['luci.slipstream'].check_config = real;
			if (verdict == 'valid')
				check(`${v}: Save & Apply of a config slipstreamd accepts applies it (no error shown)`,
					!err && record.applied.length == 1 && record.applied[0] === true && record.notes.length == 0, err || JSON.stringify(record));
			else
				check(`${v}: Save & Apply of a config slipstreamd refuses applies nothing and shows its message`,
					!err && record.applied.length == 0 && record.notes.length == 1 && record.notes[0].kind == 'danger' &&
					record.notes[0].body.includes('port range 6999-6881 is reversed'), err || JSON.stringify(record));
		}
	}
	{
		const rules = load('view.slipstream.rules');
		const m = rules.map;
		let err = null;
		try { await rules.handleAddTemplate(m, { value: 'game_downloads' }); } catch (e) { err = e.stack || String(e); }
		check('rules: adding a rule from a preset template runs', !err, err);
	}

	// UCI options: each the views edit is one the daemon accepts, as a list where it is one.
	const uciEdited = edited.filter(e => !e.o.option.startsWith('_') && e.o.widget != 'DummyValue' && e.o.widget != 'Button');
	const types = [...new Set(uciEdited.map(e => e.section))];
	check('views edit the section types slipstream, household, rule (' + types.join(', ') + ')',
		['slipstream', 'household', 'rule'].every(t => types.includes(t)) && types.length == 3);
	const known = {};
	for (const t of types) {
		known[t] = daemonOptions(t);
		check('slipstreamd lists the options of config ' + t, Array.isArray(known[t]) && known[t].length > 2);
	}
	for (const e of uciEdited) {
		const ok = (known[e.section] || []).includes(e.o.option);
		check(`option ${e.o.option} (config ${e.section}, view ${e.view}) is accepted by slipstreamd`, ok,
			ok ? '' : 'slipstreamd takes: ' + (known[e.section] || []).join(', '));
		if (!ok) continue;
		const jsList = ['DynamicList', 'MultiValue'].includes(e.o.widget) || (e.o.widget == 'DeviceSelect' && e.o.multiple);
		const dList = daemonTakesList(e.section, e.o.option);
		check(`option ${e.o.option}: ${jsList ? 'list' : 'single value'} in the view, ${dList ? 'list' : 'single value'} for slipstreamd`, jsList == dList);
	}
	// The values the views offer (each choice of a list, the placeholder shown as the default, a
	// flag's default) are values slipstreamd takes, with the options they depend on set as the
	// view requires.
	const header = { slipstream: "config slipstream 'main'\n", household: "config household 'household'\n",
		rule: "config rule 'probe'\n" };
	for (const e of uciEdited) {
		if (!(known[e.section] || []).includes(e.o.option)) continue;
		const jsList = ['DynamicList', 'MultiValue'].includes(e.o.widget) || (e.o.widget == 'DeviceSelect' && e.o.multiple);
		const values = new Set(e.o.choices.map(String));
		if (e.o.placeholder != null) values.add(String(e.o.placeholder));
		if (e.o.default != null) values.add(String(e.o.default));
		if (e.o.widget == 'Flag') { values.add('0'); values.add('1'); }
		for (const v of values) {
			let text = header[e.section];
			const deps = e.o.deps[0] || {};
			for (const [k, dv] of Object.entries(deps)) if (k != e.o.option) text += `\toption ${k} '${dv}'\n`;
			// A criterion; port 443, which quic = 'refuse' needs among the remote ports.
			if (e.section == 'rule' && e.o.option != 'remote_port') text += "\toption remote_port '443'\n";
			text += `\t${jsList ? 'list' : 'option'} ${e.o.option} '${v}'\n`;
			// What LuCI writes beside it: the section's required fields (rmempty off) with their
			// defaults, where their dependencies hold.
			const set = Object.assign({}, deps, { [e.o.option]: v });
			for (const f of uciEdited)
				if (f.view == e.view && f.section == e.section && f.o !== e.o && f.o.rmempty === false && f.o.default != null &&
					!(f.o.option in set) && (f.o.deps.length == 0 || f.o.deps.some(d => Object.entries(d).every(([k, dv]) => set[k] == dv))))
					text += `\toption ${f.o.option} '${f.o.default}'\n`;
			// A config needs an enabled rule.
			text += "config rule 'other'\n\toption remote_port '6882'\n";
			const out = daemonCheck(text);
			check(`value '${v}' of ${e.o.option} (config ${e.section}, view ${e.view}) is accepted by slipstreamd`,
				/: valid/.test(out), out.trim() + '\n  config:\n' + text);
		}
	}

	// Every option the shipped config shows (set, or in a commented example) can be edited.
	const shipped = fs.readFileSync(path.join(appDir, '../files/slipstream.config'), 'utf8');
	let type = null;
	const declared = [];
	for (const line of shipped.split('\n')) {
		let m = /^#?config (\w+)/.exec(line);
		if (m) { type = m[1]; continue; }
		m = /^#?\t(option|list) (\w+) '/.exec(line);
		if (m && type) declared.push([type, m[2]]);
	}
	check('files/slipstream.config declares options (' + declared.length + ')', declared.length > 20);
	for (const [t, o] of declared)
		check(`option ${o} of files/slipstream.config (config ${t}) is editable in a view`,
			uciEdited.some(e => e.section == t && e.o.option == o));
	// The init script reads `enabled` of the main section: the settings view edits it.
	check('settings edits main.enabled (the init script reads it)', uciEdited.some(e => e.view == 'settings' && e.o.option == 'enabled'));

	// rpc: every luci.slipstream method a view declares is in the backend and the ACL; every other
	// ubus call is in the ACL.
	const backend = JSON.parse(fs.readFileSync(backendListFile, 'utf8'));
	const acl = JSON.parse(fs.readFileSync(path.join(appDir, 'root/usr/share/rpcd/acl.d/luci-app-slipstream.json'), 'utf8'))['luci-app-slipstream'];
	check('ACL has luci-app-slipstream with read and write', acl && acl.read && acl.write);
	const aclUbus = {};
	for (const mode of ['read', 'write'])
		for (const [obj, methods] of Object.entries((acl[mode] || {}).ubus || {}))
			aclUbus[obj] = (aclUbus[obj] || []).concat(methods);
	const declared_rpc = [...new Map(record.rpc.map(r => [r.object + '.' + r.method, r])).values()];
	for (const r of declared_rpc) {
		if (r.object == 'luci.slipstream')
			check(`rpc ${r.object}.${r.method} is a method of the backend`, Object.prototype.hasOwnProperty.call(backend, r.method));
		check(`rpc ${r.object}.${r.method} is granted by the ACL`, (aclUbus[r.object] || []).includes(r.method));
	}
	for (const m of aclUbus['luci.slipstream'] || [])
		check(`ACL method luci.slipstream.${m} exists in the backend`, Object.prototype.hasOwnProperty.call(backend, m));
	for (const m of Object.keys(backend))
		check(`backend method ${m} is used by a view`, declared_rpc.some(r => r.object == 'luci.slipstream' && r.method == m));
	for (const c of record.uciConfigs)
		check(`UCI config ${c} used by the views is granted by the ACL`, (acl.read.uci || []).includes(c) && (acl.write.uci || []).includes(c));

	// Menu: every view it names exists, every view file is in the menu, the ACL it depends on exists.
	const menu = JSON.parse(fs.readFileSync(path.join(appDir, 'root/usr/share/luci/menu.d/luci-app-slipstream.json'), 'utf8'));
	const menuViews = Object.values(menu).filter(n => n.action && n.action.type == 'view').map(n => n.action.path);
	for (const p of menuViews)
		check(`menu view ${p} has its file`, fs.existsSync(path.join(RES, 'view', p + '.js')));
	for (const v of views)
		check(`view ${v} is in the menu`, menuViews.includes('slipstream/' + v));
	check('menu depends on the ACL luci-app-slipstream', Object.values(menu).some(n => ((n.depends || {}).acl || []).includes('luci-app-slipstream')));

	console.log(`luci_app_js: ${passed} passed, ${failed} failed`);
	process.exit(failed ? 1 : 0);
})();
