// Telemetry (issue 7) on real Chromium: every category captured from a real
// page, the events list, the SSE stream with Last-Event-ID resume, and OTLP
// export to a receiver this test runs on loopback (one that fails for a
// while and then recovers).
import http from 'node:http';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';

const BIG_JSON = JSON.stringify({ items: Array.from({ length: 2000 }, (_, i) => ({ i, v: 'x' })) });
const BIG_TEXT = 'y'.repeat(10000);

// A loopback site exercising every browser-side category.
function site() {
  return startSite((rq, rs) => {
    if (rq.url === '/api.json') { rs.setHeader('content-type', 'application/json'); return rs.end(BIG_JSON); }
    if (rq.url === '/big.txt') { rs.setHeader('content-type', 'text/plain'); return rs.end(BIG_TEXT); }
    if (rq.url === '/bin') { rs.setHeader('content-type', 'application/octet-stream'); return rs.end(Buffer.alloc(3000, 7)); }
    if (rq.url === '/post') { let b = ''; rq.on('data', (c) => { b += c; }); return rq.on('end', () => { rs.setHeader('content-type', 'application/json'); rs.end(JSON.stringify({ got: b.length })); }); }
    rs.setHeader('content-type', 'text/html');
    rs.end(`<title>t</title><body style="height:4000px">
      <div id="late"></div>
      <button id="b" onclick="console.log('clicked', 42)">go</button><input id="i">
      <script>
        console.warn('hello from the page');
        setTimeout(() => { throw new Error('boom-uncaught'); }, 10);
        // A layout shift moves content already painted: after two frames
        // (a fixed 50 ms could come before the first paint on a busy host).
        requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => {
          document.getElementById('late').style.height = '300px'; }, 50)));
      </script></body>`);
  });
}

async function withServer(fn, opts) {
  const s = await startServer(opts);
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

// A server whose pages may reach a fresh loopback site (--allow-loopback).
async function withSite(fn) {
  const w = await site();
  try { await withServer((s) => fn(s, w), { args: w.allow }); } finally { w.close(); }
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

const until = (fn, what, ms = 20000) => waitFor(fn, what, ms, 200);

async function events(s, id, query = '') {
  const all = [];
  for (let off = 0; ; ) {
    const r = await api(s, 'GET', `/browsers/${id}/telemetry/events?limit=100&offset=${off}${query}`);
    eq(r.status, 200, `events: ${r.text}`);
    all.push(...r.json);
    if (r.headers['x-has-more'] !== 'true') return all;
    off = Number(r.headers['x-next-offset']);
  }
}

const find = (evs, type, pred = () => true) => evs.find((e) => e.event.type === type && pred(e.event.data || {}));

// Reads SSE frames until `want` frames arrived (or ms passed); returns them and closes.
// The promise has .ready, resolved once the stream's response arrived.
function sse(s, path, { lastId, want = 1, ms = 20000 } = {}) {
  let onReady;
  const ready = new Promise((r) => { onReady = r; });
  const p = new Promise((resolve, reject) => {
    const headers = { authorization: `Bearer ${s.key}` };
    if (lastId !== undefined) headers['last-event-id'] = String(lastId);
    const frames = [];
    let buf = '', done = false;
    const rq = http.request(new URL(path, s.base), { headers, agent: false }, (res) => {
      onReady();
      if (res.statusCode !== 200) { done = true; reject(new Error(`stream status ${res.statusCode}`)); return; }
      eq(res.headers['content-type'], 'text/event-stream');
      res.setEncoding('utf8');
      res.on('data', (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i); buf = buf.slice(i + 2);
          if (block.startsWith(':')) { frames.push({ comment: block }); continue; }
          const id = /^id: (\d+)$/m.exec(block)[1];
          const data = JSON.parse(/^data: (.*)$/m.exec(block)[1]);
          eq(Number(id), data.seq, 'id equals data.seq');
          frames.push(data);
        }
        if (frames.filter((f) => !f.comment).length >= want && !done) { done = true; rq.destroy(); resolve(frames); }
      });
      res.on('end', () => { if (!done) { done = true; resolve(frames); } });
    });
    rq.on('error', (e) => { if (!done) { done = true; reject(e); } });
    rq.end();
    setTimeout(() => { if (!done) { done = true; rq.destroy(); resolve(frames); } }, ms);
  });
  p.ready = ready;
  return p;
}

const ALL_ON = { browser: ['console', 'network', 'page', 'interaction', 'screenshot', 'platform'].reduce((o, c) => ({ ...o, [c]: { enabled: true } }), {}) };

export const tests = [
  {
    name: 'every category: enabled, exercised in a real page, its event found with the right payload (truncation 8 KB JSON / 4 KB text, binary excluded)',
    timeout: 120000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s, { telemetry: ALL_ON });
      const id = b.session_id;
      const browser = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const page = browser.contexts()[0].pages()[0] || await browser.contexts()[0].newPage();
        await page.goto(w.url);
        await page.waitForTimeout(500);
        await page.click('#b');
        await page.focus('#i');
        await page.keyboard.press('a');
        await page.mouse.wheel(0, 600);
        await page.evaluate(async () => {
          await (await fetch('/api.json')).text();
          await (await fetch('/big.txt')).text();
          await (await fetch('/bin')).arrayBuffer();
          await (await fetch('/post', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' })).text();
        });
        await page.waitForTimeout(1500);
      } finally { await browser.close(); }
      eq((await api(s, 'PATCH', `/browsers/${id}`, { viewport: { width: 1280, height: 800 } })).status, 200);
      let evs;
      await until(async () => {
        evs = await events(s, id);
        return find(evs, 'monitor_screenshot') && find(evs, 'interaction_scroll_settled') && find(evs, 'cdp_disconnect') &&
          find(evs, 'page_layout_shift') && find(evs, 'page_lcp') &&
          find(evs, 'network_response', (d) => d.url.endsWith('/post')) && find(evs, 'api_call', (d) => d.action === 'viewport_resize');
      }, 'events of every category', 30000);
      for (const e of evs) {
        for (const f of ['type', 'category', 'ts', 'session_id', 'source', 'data']) assert(f in e.event, `event field ${f}`);
        eq(e.event.session_id, id);
        assert(Number.isInteger(e.event.ts) && e.event.ts > 1e15, 'ts in Unix microseconds');
        assert(['cdp', 'kernel_api', 'local_process'].includes(e.event.source.kind), 'source.kind');
      }
      const seqs = evs.map((e) => e.seq);
      eq(seqs, [...seqs].sort((a, b2) => a - b2), 'ascending seq by default');
      // control / connection
      assert(find(evs, 'cdp_command', (d) => d.method === 'Page.navigate'), 'cdp_command Page.navigate');
      assert(find(evs, 'cdp_connect'), 'cdp_connect');
      eq(find(evs, 'cdp_disconnect').event.data.telemetry_excluded, 0);
      // console
      assert(find(evs, 'console_log', (d) => d.level === 'warning' && d.text === 'hello from the page'), 'console.warn');
      eq(find(evs, 'console_log', (d) => d.text === 'clicked 42').event.data.args, ['clicked', '42'], 'console.log from the click');
      assert(find(evs, 'console_error', (d) => /^Uncaught Error: boom-uncaught/.test(d.text)), 'uncaught exception');
      // network
      const j = find(evs, 'network_response', (d) => d.url.endsWith('/api.json')).event.data;
      eq(j.status, 200); eq(j.body.length, 8192, 'JSON truncated at 8 KB'); eq(j.body_truncated, true); eq(j.body_size, BIG_JSON.length);
      eq(find(evs, 'network_response', (d) => d.url.endsWith('/api.json')).event.truncated, true, 'event.truncated');
      const t = find(evs, 'network_response', (d) => d.url.endsWith('/big.txt')).event.data;
      eq(t.body.length, 4096, 'text truncated at 4 KB');
      const bin = find(evs, 'network_response', (d) => d.url.endsWith('/bin')).event.data;
      assert(!('body' in bin) && bin.body_excluded === 'binary', 'binary body excluded');
      eq(find(evs, 'network_request', (d) => d.url.endsWith('/post')).event.data.post_data, '{"a":1}', 'post data as sent');
      eq(find(evs, 'network_request', (d) => d.url === `${w.url}/`).event.data.method, 'GET');
      // page
      assert(find(evs, 'page_navigation', (d) => d.url === `${w.url}/` && d.main_frame), 'navigation');
      assert(find(evs, 'page_dom_content_loaded'), 'DOMContentLoaded');
      assert(find(evs, 'page_load'), 'load');
      assert(find(evs, 'page_lcp'), 'LCP');
      assert(find(evs, 'page_layout_shift'), 'layout shift');
      // interaction
      assert(find(evs, 'interaction_click', (d) => d.selector === 'button#b' && d.tag === 'button'), 'click');
      assert(find(evs, 'interaction_key', (d) => d.key === 'a' && d.selector === 'input#i'), 'key press');
      assert(find(evs, 'interaction_scroll_settled', (d) => d.to_y > 0), 'settled scroll');
      // screenshot
      const shot = find(evs, 'monitor_screenshot').event.data;
      eq(Buffer.from(shot.png, 'base64').subarray(1, 4).toString(), 'PNG', 'base64 PNG');
      // platform
      eq(find(evs, 'api_call', (d) => d.action === 'viewport_resize').event.data.viewport.width, 1280);
      eq(find(evs, 'api_call').event.category, 'platform');
      // category filter
      const only = await events(s, id, '&category=console,page&order=desc');
      assert(only.length > 0 && only.every((e) => ['console', 'page'].includes(e.event.category)), 'category filter');
      assert(only[0].seq > only[only.length - 1].seq, 'order=desc');
      isError(await api(s, 'GET', `/browsers/${id}/telemetry/events?category=nope`), 400);
      isError(await api(s, 'GET', `/browsers/${id}/telemetry/events?order=desc&since=5m`), 400);
      const recent = await api(s, 'GET', `/browsers/${id}/telemetry/events?since=10m&category=monitor`);
      eq(recent.status, 200); eq(recent.json, [], 'monitor: accepted, never produced');
      eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204);
    }),
  },
  {
    name: 'control.cdp.excluded_methods: excluded commands are relayed but not reported, and counted in cdp_disconnect.telemetry_excluded',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s, { telemetry: { browser: { control: { cdp: { excluded_methods: ['Page.navigate'] } } } } });
      const browser = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const page = browser.contexts()[0].pages()[0] || await browser.contexts()[0].newPage();
        await page.goto(w.url); // relayed: the page loads
        eq(await page.title(), 't');
        await page.goto(`${w.url}/?2`);
        await browser.contexts()[0].newPage(); // Target.createTarget: reported
      } finally { await browser.close(); }
      let evs;
      await until(async () => { evs = await events(s, b.session_id); return find(evs, 'cdp_disconnect'); }, 'cdp_disconnect');
      assert(!find(evs, 'cdp_command', (d) => d.method === 'Page.navigate'), 'Page.navigate not reported');
      assert(find(evs, 'cdp_command', (d) => d.method === 'Target.createTarget'), 'other commands reported');
      eq(find(evs, 'cdp_disconnect').event.data.telemetry_excluded, 2);
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'issue 23: bodies kept by media type, not by transfer encoding: JSON, XML, urlencoded and multipart form data 8 KB; text/plain and text/html 4 KB; image/png and application/octet-stream excluded; an untyped text body kept as text',
    timeout: 60000,
    fn: async () => {
      const BIG = 'k=' + 'v'.repeat(20000);
      const types = {
        '/json': ['application/json', JSON.stringify({ a: 'j'.repeat(20000) }), 8192],
        '/xml': ['application/xml', `<a>${'x'.repeat(20000)}</a>`, 8192],
        '/form': ['application/x-www-form-urlencoded', BIG, 8192],
        '/small-form': ['application/x-www-form-urlencoded', 'a=1&b=' + 'z'.repeat(2000), 8192],
        '/multipart': ['multipart/form-data; boundary=XyZ', `--XyZ\r\ncontent-disposition: form-data; name="f"\r\n\r\n${'m'.repeat(20000)}\r\n--XyZ--\r\n`, 8192],
        '/plain': ['text/plain', 'p'.repeat(20000), 4096],
        '/html': ['text/html', `<p>${'h'.repeat(20000)}</p>`, 4096],
        '/png': ['image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]), 0],
        '/octet': ['application/octet-stream', Buffer.alloc(3000, 7), 0],
        '/untyped': [null, 'u'.repeat(6000), 4096],
      };
      const w = await startSite((rq, rs) => {
        const t = types[rq.url];
        if (!t) { rs.setHeader('content-type', 'text/html'); return rs.end('<title>t</title>'); }
        if (t[0]) rs.setHeader('content-type', t[0]);
        else rs.removeHeader('content-type');
        rs.end(t[1]);
      });
      try {
        await withServer(async (s) => {
          const b = await create(s, { telemetry: { browser: { network: { enabled: true } } } });
          const br = await chromium.connectOverCDP(b.cdp_ws_url);
          try {
            const pg = br.contexts()[0].pages()[0];
            await pg.goto(`${w.url}/`);
            await pg.evaluate(async (paths) => { for (const p of paths) await (await fetch(p)).arrayBuffer(); }, Object.keys(types));
          } finally { await br.close(); }
          const evs = await until(async () => {
            const e = await events(s, b.session_id, '&category=network');
            return Object.keys(types).every((p) => find(e, 'network_response', (d) => d.url.endsWith(p))) && e;
          }, 'a network_response for each path');
          for (const [path, [type, body, limit]] of Object.entries(types)) {
            const d = find(evs, 'network_response', (x) => x.url.endsWith(path)).event.data;
            if (limit === 0) {
              assert(!('body' in d) && d.body_excluded === 'binary', `${type} excluded: ${JSON.stringify(d).slice(0, 200)}`);
              continue;
            }
            const len = Buffer.byteLength(body);
            assert(typeof d.body === 'string', `${type || 'untyped'} kept: ${JSON.stringify(d).slice(0, 200)}`);
            eq(d.body.length, Math.min(len, limit), `${type || "untyped"} kept up to ${limit} bytes (${JSON.stringify(d).slice(0, 300)})`);
            eq(d.body, body.slice(0, Math.min(len, limit)), `${type || 'untyped'} body text`);
            eq(d.body_truncated, len > limit, `${type || 'untyped'} body_truncated`);
          }
        }, { args: w.allow });
      } finally { w.close(); }
    },
  },
  {
    name: 'issue 23: cdp_disconnect.message_count counts the messages relayed in both directions',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s, { telemetry: { enabled: true } });
      const { default: WebSocket } = await import('ws');
      const ws = new WebSocket(b.cdp_ws_url, { perMessageDeflate: false });
      await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
      let received = 0;
      ws.on('message', () => { received++; });
      // 5 commands, 5 replies; Target.setDiscoverTargets also sends events.
      const call = (id, method, params = {}) => new Promise((r) => {
        const on = (m) => { if (JSON.parse(m).id === id) { ws.off('message', on); r(); } };
        ws.on('message', on);
        ws.send(JSON.stringify({ id, method, params }));
      });
      await call(1, 'Browser.getVersion');
      await call(2, 'Target.setDiscoverTargets', { discover: true });
      await call(3, 'Target.getTargets');
      await call(4, 'Browser.getVersion');
      await call(5, 'Target.setDiscoverTargets', { discover: false });
      const sent = 5;
      ws.close();
      await new Promise((r) => ws.once('close', r));
      const d = await until(async () => {
        const e = await events(s, b.session_id, '&category=connection');
        const x = find(e, 'cdp_disconnect');
        return x && x.event.data;
      }, 'cdp_disconnect');
      assert(received > sent, `events arrived besides the replies: ${received}`);
      eq(d.message_count, sent + received, 'message_count = commands + replies + events');
    }),
  },
  {
    name: 'disabling a category on update stops its events; re-enabling starts them again',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s, { telemetry: { browser: { console: { enabled: true } } } });
      const browser = await chromium.connectOverCDP(b.cdp_ws_url);
      try {
        const page = browser.contexts()[0].pages()[0] || await browser.contexts()[0].newPage();
        await page.goto(w.url);
        await until(async () => find(await events(s, b.session_id), 'console_log', (d) => d.text === 'hello from the page'), 'console event');
        const r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { telemetry: { browser: { console: { enabled: false } } } });
        eq(r.status, 200); eq(r.json.telemetry.browser.console.enabled, false);
        await page.evaluate(() => console.log('after-disable'));
        await page.waitForTimeout(1500);
        assert(!find(await events(s, b.session_id), 'console_log', (d) => d.text === 'after-disable'), 'no console event once disabled');
        eq((await api(s, 'PATCH', `/browsers/${b.session_id}`, { telemetry: { browser: { console: { enabled: true } } } })).status, 200);
        await page.waitForTimeout(1000);
        await page.evaluate(() => console.log('after-enable'));
        await until(async () => find(await events(s, b.session_id), 'console_log', (d) => d.text === 'after-enable'), 'console event after re-enable');
      } finally { await browser.close(); }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'SSE stream: frames id/data {seq,event}, resumed with Last-Event-ID loses nothing and repeats nothing; replay=all',
    timeout: 90000,
    fn: () => withSite(async (s, w) => {
      const b = await create(s, { telemetry: {} });
      const id = b.session_id;
      const path = `/browsers/${id}/telemetry/stream`;
      // Live stream from now: commands sent after it opened arrive.
      const live = sse(s, path, { want: 2 });
      await live.ready; // the stream answered: what follows is live
      const browser = await chromium.connectOverCDP(b.cdp_ws_url);
      const page = await browser.contexts()[0].newPage();
      const first = (await live).filter((f) => !f.comment);
      eq(first.map((f) => f.event.type), ['cdp_connect', 'cdp_command'], 'live frames');
      eq(first[1].event.data.method, 'Target.createTarget');
      const last = first[first.length - 1].seq;
      // More events while nobody listens.
      await page.goto(w.url);
      await browser.close();
      await until(async () => find(await events(s, id), 'cdp_disconnect'), 'disconnect');
      const total = (await events(s, id)).length;
      const all = (await events(s, id)).map((e) => e.seq);
      const resumed = (await sse(s, path, { lastId: last, want: all.filter((q) => q > last).length })).filter((f) => !f.comment);
      eq(resumed.map((f) => f.seq), all.filter((q) => q > last), 'resume after Last-Event-ID: no loss, no duplicate');
      const replay = (await sse(s, `${path}?replay=all`, { want: total })).filter((f) => !f.comment);
      eq(replay.map((f) => f.seq), all, 'replay=all');
      eq(replay[0].event.session_id, id);
      eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204);
    }),
  },
  {
    name: 'OTLP export: destination by name, logs received over HTTP/JSON by a loopback receiver that fails for a while and recovers',
    timeout: 120000,
    fn: async () => {
      const got = [];
      let failures = 0;
      const rx = http.createServer((rq, rs) => {
        let body = '';
        rq.on('data', (c) => { body += c; });
        rq.on('end', () => {
          if (failures < 3) { failures++; rs.statusCode = 503; return rs.end('down'); }
          eq(rq.headers['x-token'], 'secret-1', 'destination header sent');
          got.push(JSON.parse(body));
          rs.setHeader('content-type', 'application/json');
          rs.end('{}');
        });
      });
      await new Promise((r) => rx.listen(0, '127.0.0.1', r));
      // The collector is on loopback: the operator names it (--allow-loopback).
      const endpoint = `http://127.0.0.1:${rx.address().port}/v1/logs`;
      try {
        await withServer(async (s) => {
          const d = await api(s, 'POST', '/org/telemetry/destinations', { name: 'collector', endpoint, headers: { 'x-token': 'secret-1' } });
          eq(d.status, 200, d.text);
          assert(!JSON.stringify(d.json).includes('secret-1'), 'header values are never shown');
          isError(await api(s, 'POST', '/browsers', { headless: true, telemetry: { export: { otlp: { destination: { name: 'missing' } } } } }), 404);
          isError(await api(s, 'POST', '/org/telemetry/destinations', { name: 'x', endpoint: 'ftp://a' }), 400);
          const b = await create(s, { telemetry: { export: { otlp: { destination: { name: 'collector' } } } } });
          eq(b.telemetry.export.otlp, { destination: d.json.id, enabled: true });
          const browser = await chromium.connectOverCDP(b.cdp_ws_url);
          await browser.close();
          const records = () => got.flatMap((doc) => doc.resourceLogs.flatMap((rl) => rl.scopeLogs.flatMap((sl) => sl.logRecords.map((lr) => ({ rl, lr })))));
          await until(() => records().some(({ lr }) => JSON.parse(lr.body.stringValue).type === 'cdp_disconnect'), 'exported cdp_disconnect after recovery', 60000);
          const { rl, lr } = records()[0];
          assert(rl.resource.attributes.some((a) => a.key === 'browser.session_id' && a.value.stringValue === b.session_id), 'resource carries the session id');
          assert(/^\d+$/.test(lr.timeUnixNano), 'timeUnixNano');
          assert(lr.attributes.some((a) => a.key === 'event.name'), 'event.name attribute');
          const seqs = records().map(({ lr: l }) => Number(l.attributes.find((a) => a.key === 'browser.telemetry.seq').value.intValue));
          eq(seqs, [...new Set(seqs)].sort((x, y) => x - y), 'every event once, in order, after the retries');
          eq(failures, 3);
          const st = (await api(s, 'GET', `/org/telemetry/destinations/${d.json.id}`)).json.stats;
          assert(st.exported >= seqs.length && st.failed_attempts >= 3 && st.dropped === 0, JSON.stringify(st));
          eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
        }, { args: ['--allow-loopback', `127.0.0.1:${rx.address().port}`] });
      } finally { rx.close(); }
    },
  },
  {
    name: 'a session\'s telemetry history survives a server restart',
    timeout: 90000,
    fn: async () => {
      const s = await startServer();
      let id, before;
      try {
        const b = await create(s, { telemetry: {} });
        id = b.session_id;
        const browser = await chromium.connectOverCDP(b.cdp_ws_url);
        await browser.close();
        await until(async () => find(await events(s, id), 'cdp_disconnect'), 'disconnect');
        eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204);
        before = await events(s, id);
      } finally { await s.stop(); }
      const s2 = await startServer({ dataDir: s.dir });
      try {
        const r = await request(s2.base, 'GET', `/browsers/${id}/telemetry/events?limit=100`, { key: s.key });
        eq(r.status, 200, r.text);
        eq(r.json.map((e) => e.seq), before.map((e) => e.seq));
      } finally { await s2.stop(); s2.cleanup(); }
    },
  },
];
