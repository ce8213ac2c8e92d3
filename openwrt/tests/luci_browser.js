// By-hand check of luci-app-slipstream in real LuCI in a real browser (not run by scripts/test.sh:
// it needs LuCI's JavaScript from a luci checkout and OpenWrt's uci built from source, which CI
// cannot fetch). A small HTTP server stands in for uhttpd: it serves LuCI's luci-base and
// bootstrap theme files from LUCI_SRC and this app's files, renders the page shell LuCI's
// templates render (luci.js, `new LuCI(env)`, `ui.instantiateView`), and answers LuCI's ubus
// JSON-RPC calls: `uci` through the real uci CLI with a per-session delta directory (as rpcd
// keeps staged changes), `luci.slipstream` through the real rpcd backend (which runs the real
// slipstreamd and slipstream), and fixed answers for LuCI's own luci-rpc, rc and network calls.
// chromium is driven over WebDriver (chromedriver): each view is loaded at a desktop and a phone
// width, its console checked for errors, and a screenshot saved; on Settings a value only the
// daemon refuses (data_queue equal to ack_queue) is saved with Save & Apply, and the field must
// be marked with the daemon's message and nothing applied; a valid change must be applied.
//
// Usage: LUCI_SRC=<luci checkout> UCI=<uci binary> BIN=<dir with slipstreamd, slipstream>
//        OUT=<screenshot dir> node openwrt/tests/luci_browser.js
'use strict';
const http = require('http');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync, spawn } = require('child_process');

const APP = path.resolve(__dirname, '../luci-app-slipstream');
const LUCI_SRC = process.env.LUCI_SRC;
const UCI = process.env.UCI;
const BIN = process.env.BIN;
const OUT = process.env.OUT || fs.mkdtempSync(path.join(os.tmpdir(), 'luci-shots-'));
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'luci-browser-'));
const CONF = path.join(TMP, 'etc');
const SID = '0123456789abcdef0123456789abcdef';
const DELTA_PREFIX = path.join(TMP, 'uci-');
const DELTA = DELTA_PREFIX + SID;
fs.mkdirSync(CONF);
// The backend finds `uci` on PATH.
const UCI_DIR = path.join(TMP, 'uci-bin');
fs.mkdirSync(UCI_DIR);
fs.writeFileSync(path.join(UCI_DIR, 'uci'), '#!/bin/sh\nexec "' + UCI + '" "$@"\n', { mode: 0o755 });
fs.mkdirSync(DELTA);
fs.copyFileSync(path.join(APP, '../files/slipstream.config'), path.join(CONF, 'slipstream'));
fs.writeFileSync(path.join(CONF, 'firewall'), "config defaults\n\toption flow_offloading '1'\n");
// Configs LuCI's network and widget classes read; empty here.
for (const c of ['network', 'wireless', 'luci', 'dhcp']) fs.writeFileSync(path.join(CONF, c), '');

let passed = 0, failed = 0;
function check(desc, ok, detail) {
	if (ok) { passed++; console.log('ok: ' + desc); }
	else { failed++; console.log('FAIL: ' + desc + (detail ? '\n  ' + detail : '')); }
}

// --- uci through the real CLI -------------------------------------------------------------------
function uci(args, input) {
	return execFileSync(UCI, ['-c', CONF, '-t', DELTA].concat(args), { encoding: 'utf8', input });
}
// `uci export` as LuCI's uci.get answers it: { section: { '.name', '.type', '.anonymous', '.index', ... } }.
function uciValues(config) {
	const out = {};
	let cur = null, n = 0;
	const unq = s => s.replace(/^'(.*)'$/, '$1').replace(/'\\''/g, "'");
	// uci's own names of the sections, anonymous ones included (cfg0a1b2c), in order.
	const names = uci(['-X', 'show', config]).split('\n').map(l => /^[^.]+\.([^.=]+)=/.exec(l)).filter(Boolean).map(m => m[1]);
	for (const line of uci(['export', config]).split('\n')) {
		let m = /^config (\S+)(?: (.+))?$/.exec(line);
		if (m) {
			const name = names[n];
			cur = out[name] = { '.name': name, '.type': m[1], '.anonymous': !m[2], '.index': n++ };
			continue;
		}
		m = /^\t(option|list) (\S+) (.*)$/.exec(line);
		if (m && cur) {
			if (m[1] == 'list') (cur[m[2]] = cur[m[2]] || []).push(unq(m[3]));
			else cur[m[2]] = unq(m[3]);
		}
	}
	return out;
}
function uciSetValues(config, section, values) {
	for (const [k, v] of Object.entries(values || {})) {
		if (Array.isArray(v)) {
			try { uci(['delete', `${config}.${section}.${k}`]); } catch (e) { /* not set */ }
			for (const x of v) uci(['add_list', `${config}.${section}.${k}=${x}`]);
		} else {
			uci(['set', `${config}.${section}.${k}=${v}`]);
		}
	}
}

// --- ubus ---------------------------------------------------------------------------------------
const calls = [];
function backend(method, args) {
	// Inside the daemon's namespace when there is one: its HTTP listener is on that loopback.
	const cmd = ns ? ['ip', ['netns', 'exec', ns, 'sh']] : ['sh', []];
	const out = execFileSync(cmd[0], cmd[1].concat([path.join(APP, 'root/usr/libexec/rpcd/luci.slipstream'), 'call', method]), {
		encoding: 'utf8',
		input: JSON.stringify(Object.assign({ ubus_rpc_session: SID }, args)),
		env: Object.assign({}, process.env, {
			PATH: BIN + ':' + UCI_DIR + ':' + process.env.PATH,
			SLIPSTREAM_CONF_DIR: CONF, SLIPSTREAM_SESSION_DELTA_PREFIX: DELTA_PREFIX
		})
	});
	return JSON.parse(out);
}
function ubus(object, method, args) {
	calls.push(object + '.' + method);
	switch (object + '.' + method) {
	case 'session.access': return { access: true };
	case 'luci.getFeatures': return { firewall4: true, dnsmasq_full: false };
	case 'file.list': return { entries: [] };
	case 'uci.get': return { values: uciValues(args.config) };
	case 'uci.set': if (process.env.DEBUG) console.log('uci.set ' + JSON.stringify(args)); uciSetValues(args.config, args.section, args.values); return null;
	case 'uci.add': {
		const name = args.name || ('new' + Date.now().toString(16).slice(-6));
		uci(['set', `${args.config}.${name}=${args.type}`]);
		uciSetValues(args.config, name, args.values);
		return { section: name };
	}
	case 'uci.delete':
		if (args.options) for (const o of args.options) { try { uci(['delete', `${args.config}.${args.section}.${o}`]); } catch (e) { /* unset */ } }
		else uci(['delete', `${args.config}.${args.section}` + (args.option ? '.' + args.option : '')]);
		return null;
	case 'uci.order': args.sections.forEach((s, i) => uci(['reorder', `${args.config}.${s}=${i}`])); return null;
	case 'uci.changes': {
		const changes = {};
		for (const line of uci(['changes']).split('\n').filter(Boolean)) {
			const c = line.replace(/^-/, '').split('.')[0];
			(changes[c] = changes[c] || []).push(['set', line]);
		}
		return { changes };
	}
	case 'luci-rpc.getHostHints':
		return { 'aa:bb:cc:dd:ee:ff': { name: 'steam-deck', ipaddrs: ['192.168.1.20'], ip6addrs: [] } };
	case 'luci-rpc.getDHCPLeases':
		return { dhcp_leases: [{ hostname: 'steam-deck', ipaddr: '192.168.1.20', macaddr: 'aa:bb:cc:dd:ee:ff', expires: 3600 }], dhcp6_leases: [] };
	case 'luci-rpc.getNetworkDevices':
		return { 'br-lan': { name: 'br-lan', up: true, devtype: 'bridge', mac: '02:00:00:00:00:01', ipaddrs: [], ip6addrs: [], stats: {}, flags: { up: true } },
			'eth0': { name: 'eth0', up: true, devtype: 'ethernet', mac: '02:00:00:00:00:02', ipaddrs: [], ip6addrs: [], stats: {}, flags: { up: true } } };
	case 'luci-rpc.getWirelessDevices': return {};
	case 'luci-rpc.getBoardJSON': return {};
	case 'network.interface.dump': return { interface: [] };
	case 'network.get_proto_handlers': return {};
	case 'rc.list': return { slipstream: { start: 95, stop: 10, enabled: true, running: true } };
	case 'rc.init': return null;
	}
	if (object == 'luci.slipstream') {
		const r = backend(method, args);
		if (process.env.DEBUG && method == 'check_config') console.log('check_config: ' + JSON.stringify(r) + '\n  staged: ' + uci(['changes']));
		return r;
	}
	return undefined;
}
function rpcReply(msg) {
	if (msg.method == 'list') return { jsonrpc: '2.0', id: msg.id, result: {} };
	const [sid, object, method, args] = msg.params;
	let data;
	try { data = ubus(object, method, args || {}); } catch (e) {
		console.log('ubus error: ' + object + '.' + method + ': ' + e.message);
		return { jsonrpc: '2.0', id: msg.id, result: [5] };
	}
	if (data === undefined) {
		console.log('ubus: no answer for ' + object + '.' + method);
		return { jsonrpc: '2.0', id: msg.id, result: [3] };
	}
	return { jsonrpc: '2.0', id: msg.id, result: data === null ? [0] : [0, data] };
}

// --- HTTP ---------------------------------------------------------------------------------------
const RES_LUCI = path.join(LUCI_SRC || '', 'modules/luci-base/htdocs/luci-static/resources');
const RES_APP = path.join(APP, 'htdocs/luci-static/resources');
const THEME = path.join(LUCI_SRC || '', 'themes/luci-theme-bootstrap/htdocs/luci-static/bootstrap');
let applied = 0;

function page(view) {
	const env = {
		media: '/luci-static/bootstrap', resource: '/luci-static/resources', scriptname: '/cgi-bin/luci',
		pathinfo: '/admin/services/slipstream/' + view, documentroot: '/www',
		requestpath: ['admin', 'services', 'slipstream', view], dispatchpath: ['admin', 'services', 'slipstream', view],
		pollinterval: 5, ubuspath: '/ubus/', sessionid: SID, token: 'tok', nodespec: { action: { type: 'view', path: 'slipstream/' + view } },
		apply_rollback: 90, apply_holdoff: 1, apply_timeout: 5, apply_display: 1, rollback_token: null
	};
	return `<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/luci-static/bootstrap/cascade.css"><link rel="stylesheet" media="only screen and (max-device-width: 854px)" href="/luci-static/bootstrap/mobile.css">
<title>Slipstream ${view}</title></head><body class="lang_en">
<header><div class="fill"><div class="container"><span class="brand">OpenWrt</span><div class="pull-right"><span id="indicators"></span></div></div></div></header>
<div id="maincontent" class="container"><div id="tabmenu"></div>
<script src="/luci-static/resources/cbi.js"></script>
<script src="/luci-static/resources/promis.min.js"></script>
<script src="/luci-static/resources/luci.js"></script>
<script>L = new LuCI(${JSON.stringify(env)});</script>
<div id="view"><div class="spinning">Loading view…</div>
<script>L.require('ui').then(function(ui) { ui.instantiateView('slipstream/${view}'); });</script></div>
</div></body></html>`;
}

const server = http.createServer((req, res) => {
	const url = new URL(req.url, 'http://x');
	let body = '';
	req.on('data', c => body += c);
	req.on('end', () => {
		const p = url.pathname;
		if (p.startsWith('/ubus')) {
			const msg = JSON.parse(body);
			const reply = Array.isArray(msg) ? msg.map(rpcReply) : rpcReply(msg);
			res.writeHead(200, { 'Content-Type': 'application/json' });
			return res.end(JSON.stringify(reply));
		}
		if (p == '/cgi-bin/luci/admin/uci/apply_rollback' || p == '/cgi-bin/luci/admin/uci/apply_unchecked') {
			uci(['commit']);
			applied++;
			res.writeHead(p.endsWith('rollback') ? 200 : 204, { 'Content-Type': 'application/json' });
			return res.end(p.endsWith('rollback') ? '{"token":"t2"}' : '');
		}
		if (p == '/cgi-bin/luci/admin/uci/confirm') { res.writeHead(200); return res.end('{}'); }
		// fs.exec_direct (LuCI asks /usr/libexec/luci-peeraddr before a checked apply).
		if (p == '/cgi-bin/cgi-exec') { res.writeHead(200, { 'Content-Type': 'application/json' }); return res.end('{}'); }
		if (p == '/favicon.ico') { res.writeHead(204); return res.end(); }
		let m = /^\/cgi-bin\/luci\/admin\/services\/slipstream\/(\w+)$/.exec(p);
		if (m) { res.writeHead(200, { 'Content-Type': 'text/html' }); return res.end(page(m[1])); }
		let file = null;
		if (p.startsWith('/luci-static/resources/')) {
			const rel = p.slice('/luci-static/resources/'.length);
			file = [path.join(RES_APP, rel), path.join(RES_LUCI, rel)].find(f => fs.existsSync(f));
		} else if (p.startsWith('/luci-static/bootstrap/')) {
			file = path.join(THEME, p.slice('/luci-static/bootstrap/'.length));
		}
		if (file && fs.existsSync(file)) {
			res.writeHead(200, { 'Content-Type': file.endsWith('.css') ? 'text/css' : 'application/javascript' });
			return res.end(fs.readFileSync(file));
		}
		res.writeHead(404);
		res.end('not found');
	});
});

// --- WebDriver ----------------------------------------------------------------------------------
const WD = 'http://127.0.0.1:9515';
async function wd(method, p, body) {
	const r = await fetch(WD + p, { method, headers: { 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
	const j = await r.json();
	if (j.value && j.value.error) throw new Error(p + ': ' + j.value.message);
	return j.value;
}
const sleep = ms => new Promise(r => setTimeout(r, ms));

// As root, a real daemon in a network namespace of its own (its control socket is a file, so the
// backend reaches it from here).
let daemon = null, ns = null;
// With it, a LAN host and an internet server in namespaces of their own, and a download the
// bittorrent rule classes (remote port 6881) through the daemon's router, so the Live page has
// a flow to show.
let traffic = [];
function startDaemon() {
	if (process.getuid() != 0) return;
	ns = 'sslb' + process.pid;
	const sh = c => execFileSync('sh', ['-c', c]);
	const lan = ns + 'c', wan = ns + 's';
	sh(`ip netns add ${ns} && ip netns add ${lan} && ip netns add ${wan}
		for n in ${ns} ${lan} ${wan}; do ip -n $n link set lo up; done
		ip link add br-lan netns ${ns} type veth peer name eth0 netns ${lan}
		ip link add wan netns ${ns} type veth peer name eth0 netns ${wan}
		ip -n ${ns} addr add 192.168.1.1/24 dev br-lan; ip -n ${ns} link set br-lan up
		ip -n ${ns} addr add 203.0.113.1/24 dev wan; ip -n ${ns} link set wan up
		ip -n ${lan} addr add 192.168.1.20/24 dev eth0; ip -n ${lan} link set eth0 up; ip -n ${lan} route add default via 192.168.1.1
		ip -n ${wan} addr add 203.0.113.7/24 dev eth0; ip -n ${wan} link set eth0 up; ip -n ${wan} route add default via 203.0.113.1
		ip netns exec ${ns} sysctl -qw net.ipv4.ip_forward=1
		ip netns exec ${ns} tc qdisc add dev br-lan root tbf rate 20mbit burst 32k latency 100ms`);
	const conf = path.join(CONF, 'slipstream');
	fs.writeFileSync(conf, fs.readFileSync(conf, 'utf8').replace(/option control_socket '[^']*'/, `option control_socket '${TMP}/ctl.sock'`));
	daemon = spawn('ip', ['netns', 'exec', ns, path.join(BIN, 'slipstreamd'), '--config', conf, '--allow-flow-offload'], { stdio: 'ignore' });
	traffic.push(spawn('ip', ['netns', 'exec', wan, 'iperf3', '-s', '-p', '6881'], { stdio: 'ignore' }));
	setTimeout(() => traffic.push(spawn('ip', ['netns', 'exec', lan, 'iperf3', '-c', '203.0.113.7', '-p', '6881', '-R', '-t', '120'], { stdio: 'ignore' })), 2000);
}
function stopDaemon() {
	for (const t of traffic) t.kill();
	if (daemon) daemon.kill();
	if (ns) for (const n of [ns, ns + 'c', ns + 's']) try { execFileSync('ip', ['netns', 'del', n]); } catch (e) { /* gone */ }
}

(async function main() {
	startDaemon();
	await new Promise(r => server.listen(0, '127.0.0.1', r));
	const base = 'http://127.0.0.1:' + server.address().port;
	const driver = spawn('chromedriver', ['--port=9515'], { stdio: 'ignore' });
	await sleep(800);
	// A session per width: the phone one emulates the device (LuCI's mobile.css applies by
	// device width).
	let S = null;
	async function open(phone) {
		if (S) await wd('DELETE', S).catch(() => {});
		const chrome = { args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--window-size=1280,1000'] };
		if (phone) chrome.mobileEmulation = { deviceMetrics: { width: 390, height: 844, pixelRatio: 2 } };
		const session = await wd('POST', '/session', { capabilities: { alwaysMatch: {
			'goog:chromeOptions': chrome, 'goog:loggingPrefs': { browser: 'ALL' } } } });
		S = '/session/' + session.sessionId;
	}
	const run = (script, args) => wd('POST', S + '/execute/sync', { script, args: args || [] });
	const logs = async () => (await wd('POST', S + '/se/log', { type: 'browser' })) || [];
	const shot = async name => fs.writeFileSync(path.join(OUT, name + '.png'), Buffer.from(await wd('GET', S + '/screenshot'), 'base64'));
	async function waitFor(script, ms) {
		for (let t = 0; t < ms; t += 200) {
			if (await run(script)) return true;
			await sleep(200);
		}
		return false;
	}
	try {
		for (const tag of ['desktop', 'phone']) {
			await open(tag == 'phone');
			for (const view of ['overview', 'live', 'rules', 'household', 'settings']) {
				await wd('POST', S + '/url', { url: base + '/cgi-bin/luci/admin/services/slipstream/' + view });
				const rendered = await waitFor("return !document.querySelector('#view .spinning') && document.querySelector('#view').children.length > 0", 15000);
				await sleep(2500);
				const errors = (await logs()).filter(l => l.level == 'SEVERE');
				check(`${view} (${tag}): rendered by LuCI`, rendered);
				check(`${view} (${tag}): no console errors`, errors.length == 0, errors.map(e => e.message).join('\n  '));
				const text = await run('return document.querySelector("#view").innerText');
				fs.writeFileSync(path.join(OUT, `${view}-${tag}.txt`), text);
				const overflow = await run('return document.documentElement.scrollWidth - document.documentElement.clientWidth');
				check(`${view} (${tag}): no horizontal overflow of the page (${overflow} px)`, overflow <= 0);
				await shot(`${view}-${tag}`);
				if (view == 'live' && tag == 'desktop' && daemon) {
					// The page against the daemon's own answer, and a page update.
					const flows = backend('flows', {}).flows.flows.filter(f => f.goodput_bps > 0);
					const row = await run("var t = document.querySelectorAll('#slipstream-live table'); var r = t[t.length - 1].querySelectorAll('tr')[1]; return r ? r.innerText : ''");
					check('live: the busiest flow shown is the daemon\'s busiest (' + (flows[0] || {}).endpoints + ')',
						flows.length > 0 && flows[0].endpoints.every(e => row.includes(e)), row);
					const one = backend('flows', { top: 1 }).flows;
					check(`backend: flows top 1 of the daemon's ${one.active}: the busiest alone`,
						one.active >= 2 && one.flows.length == 1 && one.flows[0].endpoints.join() == flows[0].endpoints.join());
					const t1 = await run('return document.querySelector("#slipstream-live").innerText');
					await sleep(4500);
					const t2 = await run('return document.querySelector("#slipstream-live").innerText');
					check('live: the page updates (its text changed within 4.5 s)', t1 != t2);
				}
			}
		}
		await open(false);
		// Settings: a change only the daemon refuses is marked next to its field, nothing applied.
		await wd('POST', S + '/url', { url: base + '/cgi-bin/luci/admin/services/slipstream/settings' });
		await waitFor("return !!document.getElementById('widget.cbid.slipstream.main.data_queue') || !!document.getElementById('cbid.slipstream.main.data_queue')", 15000);
		await run(`
			document.querySelector('[data-tab="datapath"]') && document.querySelector('li[data-tab="datapath"] a, ul.cbi-tabmenu li[data-tab="datapath"] a') && document.querySelector('ul.cbi-tabmenu li[data-tab="datapath"] a').click();
			var el = document.getElementById('widget.cbid.slipstream.main.data_queue') || document.getElementById('cbid.slipstream.main.data_queue');
			el.value = '8470';
			el.dispatchEvent(new Event('input', { bubbles: true }));
			el.dispatchEvent(new Event('change', { bubbles: true }));
			el.dispatchEvent(new Event('blur', { bubbles: true }));`);
		const before = applied;
		// What the footer's Save & Apply button calls (its ComboButton's default choice, '0').
		const saveApply = "L.require('view.slipstream.settings').then(function(v) { v.handleSaveApply(new Event('click'), '0'); });";
		await run(saveApply);
		const marked = await waitFor("var el = document.getElementById('widget.cbid.slipstream.main.data_queue') || document.getElementById('cbid.slipstream.main.data_queue'); return el && el.classList.contains('cbi-input-invalid')", 8000);
		const note = await run("var n = document.querySelector('.alert-message.danger, .alert-message.error, #tabmenu ~ .alert-message, .alert-message'); return n ? n.innerText : ''");
		const title = await run("var el = document.getElementById('widget.cbid.slipstream.main.data_queue') || document.getElementById('cbid.slipstream.main.data_queue'); var f = el && el.closest('.cbi-value'); return f ? f.innerText + ' ' + (el.getAttribute('title') || '') + ' ' + ((f.querySelector('.cbi-tooltip') || {}).innerText || '') : ''");
		await shot('settings-refused');
		check('settings: data_queue = ack_queue is marked invalid next to the field after Save & Apply', marked, title);
		check('settings: the daemon\'s message is shown at the top', /must differ from option ack_queue/.test(note), note);
		check('settings: nothing applied', applied == before && !/data_queue '8470'/.test(fs.readFileSync(path.join(CONF, 'slipstream'), 'utf8')));
		// A valid change (data_queue 8472) is applied: committed to the config file.
		await run(`var el = document.getElementById('widget.cbid.slipstream.main.data_queue') || document.getElementById('cbid.slipstream.main.data_queue');
			el.value = '8472'; el.dispatchEvent(new Event('input', { bubbles: true })); el.dispatchEvent(new Event('change', { bubbles: true })); el.dispatchEvent(new Event('blur', { bubbles: true }));`);
		await run(saveApply);
		for (let t = 0; t < 10000 && applied == before; t += 200) await sleep(200);
		await sleep(500);
		check('settings: a valid change is applied (committed: data_queue 8472)', applied == before + 1 &&
			/option data_queue '8472'/.test(fs.readFileSync(path.join(CONF, 'slipstream'), 'utf8')));
		const errs = (await logs()).filter(l => l.level == 'SEVERE');
		check('settings: no console errors through the two saves', errs.length == 0, errs.map(e => e.message).join('\n  '));

		// Overview: the flow offloading warning's button turns it off (staged and applied).
		await wd('POST', S + '/url', { url: base + '/cgi-bin/luci/admin/services/slipstream/overview' });
		await waitFor("return [...document.querySelectorAll('button')].some(b => b.textContent == 'Turn offloading off')", 15000);
		const before3 = applied;
		await run("[...document.querySelectorAll('button')].find(b => b.textContent == 'Turn offloading off').click()");
		for (let t = 0; t < 10000 && applied == before3; t += 200) await sleep(200);
		await sleep(500);
		check('overview: "Turn offloading off" applies flow_offloading 0 to the firewall config',
			/option flow_offloading '0'/.test(fs.readFileSync(path.join(CONF, 'firewall'), 'utf8')));

		// Rules: a rule's edit dialog (presets from the daemon, LAN hosts from the leases), then
		// a rule added from a preset template, applied and committed with its presets.
		await wd('POST', S + '/url', { url: base + '/cgi-bin/luci/admin/services/slipstream/rules' });
		await waitFor("return !!document.querySelector('.cbi-section-table-row[data-sid=\"bittorrent\"]')", 15000);
		await run("document.querySelector('.cbi-section-table-row[data-sid=\"bittorrent\"] .cbi-button-edit').click()");
		const modal = await waitFor("return !!document.querySelector('.modal .cbi-section')", 8000);
		await sleep(500);
		const modalHtml = await run("var m = document.querySelector('.modal'); return m ? m.innerHTML : ''");
		await shot('rules-edit');
		check('rules: the edit dialog opens', modal);
		check('rules: the dialog offers the daemon\'s presets (steam: ...)', /steam: Steam game downloads/.test(modalHtml));
		check('rules: the dialog offers the LAN hosts of the DHCP leases (steam-deck, 192.168.1.20, aa:bb:cc:dd:ee:ff)',
			/steam-deck/.test(modalHtml) && /192\.168\.1\.20/.test(modalHtml) && /aa:bb:cc:dd:ee:ff/.test(modalHtml));
		await run("var b = [...document.querySelectorAll('.modal button')].find(b => /Dismiss/.test(b.textContent)); b && b.click();");
		await sleep(500);
		const before2 = applied;
		await run("var s = [...document.querySelectorAll('select')].find(x => [...x.options].some(o => o.value == 'game_downloads')); s.value = 'game_downloads'; [...document.querySelectorAll('button')].find(b => b.textContent == 'Add').click();");
		const added = await waitFor("return !!document.querySelector('.cbi-section-table-row[data-sid=\"game_downloads\"]')", 8000);
		check('rules: "Add a rule from a preset" adds game_downloads to the grid', added);
		await run("L.require('view.slipstream.rules').then(function(v) { v.handleSaveApply(new Event('click'), '0'); });");
		for (let t = 0; t < 10000 && applied == before2; t += 200) await sleep(200);
		await sleep(500);
		const committed = fs.readFileSync(path.join(CONF, 'slipstream'), 'utf8');
		check('rules: the new rule is applied with its presets and household control', applied == before2 + 1 &&
			/config rule 'game_downloads'[\s\S]*list preset 'steam'[\s\S]*list preset 'nintendo'/.test(committed) &&
			/config rule 'game_downloads'[^]*?option controller 'household'/.test(committed), committed.slice(-400));
		check('rules: the applied file passes slipstreamd --check-config', /valid \(4 rules\)/.test(
			execFileSync(path.join(BIN, 'slipstreamd'), ['--check-config', path.join(CONF, 'slipstream')], { encoding: 'utf8' })));
		const errs2 = (await logs()).filter(l => l.level == 'SEVERE');
		check('rules: no console errors', errs2.length == 0, errs2.map(e => e.message).join('\n  '));
	} catch (e) {
		check('browser run', false, e.stack);
	} finally {
		if (S) await wd('DELETE', S).catch(() => {});
		driver.kill();
		server.close();
		stopDaemon();
		console.log('ubus calls: ' + [...new Set(calls)].join(', '));
		console.log('screenshots: ' + OUT);
		console.log(`luci_browser: ${passed} passed, ${failed} failed`);
		process.exit(failed ? 1 : 0);
	}
})();
