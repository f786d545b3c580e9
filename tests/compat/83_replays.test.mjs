// Issue 18: replays (browsers.replays.*, SESSION_API.md section 6) and the
// viewport rule that depends on them. A session navigates three coloured
// loopback pages (red, green, blue) while it records; the downloaded file is
// probed with ffprobe (a valid MP4 with a duration) and its frames, decoded
// with ffmpeg to one averaged pixel each, show the three colours in order.
// Headless sessions record from DevTools screenshots, headful ones from their
// X display. Around that: 409 while recording, 202 + Retry-After while a
// recording runs, the options' bounds, 403 when the plan has replays off,
// another org's key, replay ids that try to name other files, recordings of
// ended sessions, and PATCH viewport with and without force.
// Live view (browser_live_view_url, section 9): a second Chromium opens the
// URL; the viewer's canvas shows the session's colours, a click in it reaches
// the session's page, a crafted read-only connection's clicks do not, a
// viewer locks the viewport, and the URL dies with the session.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const ADMIN = 'replays-admin';
const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

const COLOURS = { red: [255, 0, 0], green: [0, 170, 0], blue: [0, 0, 255] };

async function withServer(fn) {
  const site = await startSite((req, res) => {
    const name = req.url.slice(1);
    if (name === 'clicks') {
      // Left half: "left N", right half: "right N" in the title.
      res.writeHead(200, { 'content-type': 'text/html' });
      // A ticking counter in a corner: the screencast sends frames on change.
      res.end('<!doctype html><title>none</title><body style="margin:0;height:100vh;background:rgb(255,0,0)">' +
        '<div id=t style="position:absolute;top:0;left:0;font:10px sans-serif"></div><script>let n=0,k=0;' +
        '(function f(){t.textContent=++k;requestAnimationFrame(f)})();' +
        'document.addEventListener("mousedown",e=>{n++;document.title=(e.clientX<innerWidth/2?"left ":"right ")+n})</script></body>');
      return;
    }
    const c = COLOURS[name] || [255, 255, 255];
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<!doctype html><title>${name}</title><body style="margin:0;background:rgb(${c.join(',')})"></body>`);
  });
  const s = await startServer({ args: [...site.allow, '--admin-token', ADMIN] });
  try {
    assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
    await fn(s, site);
  } finally { await s.stop(); s.cleanup(); site.close(); }
}

async function create(s, body = {}, key = s.key) {
  const r = await api(s, 'POST', '/browsers', { headless: true, viewport: { width: 640, height: 480 }, ...body }, key);
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

async function page(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const ctx = br.contexts()[0];
  const pg = ctx.pages()[0] || await ctx.newPage();
  return { br, pg };
}

// The recording samples wall-clock time: each colour must stay on screen for
// a while to appear in frames. This waits for time itself (the condition is
// the clock), not for something that could be checked instead.
const dwell = (ms) => { const end = Date.now() + ms; return waitFor(() => Date.now() >= end, `${ms} ms on screen`, ms + 1000, 50); };

async function showColours(pg, site) {
  for (const c of ['red', 'green', 'blue']) {
    await pg.goto(`${site.url}/${c}`);
    await waitFor(async () => (await pg.title()) === c, `${c} page shown`);
    await dwell(1500);
  }
}

// The download as bytes (the library's request() gives text).
async function download(s, id, rid) {
  const r = await fetch(`${s.base}/browsers/${id}/replays/${rid}`, { headers: { authorization: `Bearer ${s.key}`, accept: 'video/mp4' } });
  const body = Buffer.from(await r.arrayBuffer());
  return { status: r.status, headers: Object.fromEntries(r.headers), body };
}

// The colours of the frames in order (runs of one colour collapsed).
function colourRuns(file) {
  const raw = execFileSync('ffmpeg', ['-v', 'error', '-i', file, '-vf', 'scale=1:1:flags=area', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'],
    { maxBuffer: 1 << 26 });
  const runs = [];
  for (let i = 0; i + 2 < raw.length; i += 3) {
    const [r, g, b] = [raw[i], raw[i + 1], raw[i + 2]];
    let name = 'other';
    for (const [n, c] of Object.entries(COLOURS))
      if (Math.abs(r - c[0]) < 60 && Math.abs(g - c[1]) < 60 && Math.abs(b - c[2]) < 60) name = n;
    if (runs.at(-1) !== name) runs.push(name);
  }
  return { runs, frames: raw.length / 3 };
}

function probe(file) {
  const out = execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'format=format_name,duration:stream=codec_name,width,height',
    '-of', 'json', file]).toString();
  return JSON.parse(out);
}

// Records the three colours and checks the file; returns the replay record.
async function recordColours(s, site, b, body = {}) {
  const { br, pg } = await page(b);
  try {
    await pg.goto(`${site.url}/white`);
    const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, { framerate: 10, ...body });
    eq(st.status, 201, `start: ${st.text}`);
    const rec = st.json;
    assert(/^[a-z0-9]+$/.test(rec.replay_id), `replay_id: ${rec.replay_id}`);
    assert(rec.started_at && rec.finished_at === null, `a running record: ${st.text}`);
    await showColours(pg, site);
    const pending = await download(s, b.session_id, rec.replay_id);
    eq(pending.status, 202, 'download while recording: 202');
    assert(Number(pending.headers['retry-after']) > 0, `Retry-After: ${pending.headers['retry-after']}`);
    const stop = await request(s.base, 'POST', `/browsers/${b.session_id}/replays/${rec.replay_id}/stop`, { key: s.key, headers: { accept: '*/*' } });
    eq(stop.status, 200, `stop: ${stop.text}`);
    eq(stop.text, '', 'stop: empty body');
    const dl = await download(s, b.session_id, rec.replay_id);
    eq(dl.status, 200, `download after stop: ${dl.status}`);
    eq(dl.headers['content-type'], 'video/mp4', 'content type');
    const dir = mkdtempSync(join(tmpdir(), 'replay-'));
    try {
      const file = join(dir, 'r.mp4');
      writeFileSync(file, dl.body);
      const p = probe(file);
      assert(/mp4/.test(p.format.format_name), `an MP4: ${JSON.stringify(p)}`);
      assert(Number(p.format.duration) > 3, `duration > 3 s: ${JSON.stringify(p.format)}`);
      eq(p.streams[0].codec_name, 'h264', 'H.264 video');
      const { runs, frames } = colourRuns(file);
      const seen = runs.filter((r) => r !== 'other');
      const at = ['red', 'green', 'blue'].map((c) => seen.indexOf(c));
      assert(at.every((i) => i >= 0) && at[0] < at[1] && at[1] < at[2], `frames show red, green, blue in order: ${runs.join(' ')} (${frames} frames)`);
      return { rec, probe: p, bytes: dl.body.length };
    } finally { rmSync(dir, { recursive: true, force: true }); }
  } finally { await br.close().catch(() => {}); }
}

// The colour at the centre of the viewer's canvas.
const centre = (vp) => vp.evaluate(() => {
  const c = document.getElementById('c');
  if (!c.width) return null;
  const d = c.getContext('2d').getImageData(c.width >> 1, c.height >> 1, 1, 1).data;
  return [d[0], d[1], d[2]];
});
const near = (px, c) => px && px.every((v, i) => Math.abs(v - c[i]) < 40);


// Firefox (Debian's firefox-esr) driven over WebDriver BiDi, which it speaks
// natively: {launch, eval(expr), click(x, y), close}. The live view page must
// work in current Chromium and Firefox (issue 18). Prefs keep it off the
// network (no update, telemetry or remote settings calls).
export async function firefox() {
  const { spawn } = await import('node:child_process');
  const { createRequire } = await import('node:module');
  const WebSocket = createRequire(import.meta.url)('ws');
  const dir = mkdtempSync(join(tmpdir(), 'browserd-ff-'));
  writeFileSync(join(dir, 'user.js'), [
    ['app.update.enabled', false], ['app.normandy.enabled', false], ['toolkit.telemetry.enabled', false],
    ['datareporting.policy.dataSubmissionEnabled', false], ['datareporting.healthreport.uploadEnabled', false],
    ['services.settings.server', 'http://127.0.0.1:9/'], ['network.captive-portal-service.enabled', false],
    ['network.connectivity-service.enabled', false], ['browser.safebrowsing.malware.enabled', false],
    ['browser.safebrowsing.phishing.enabled', false], ['extensions.update.enabled', false],
    ['browser.shell.checkDefaultBrowser', false], ['browser.startup.homepage_override.mstone', 'ignore'],
  ].map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});`).join('\n'));
  const proc = spawn('firefox-esr', ['--headless', '--no-remote', '--profile', dir, '--remote-debugging-port=0',
    '--width=800', '--height=500', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MOZ_CRASHREPORTER_DISABLE: '1' } });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`firefox did not start:\n${log}`)), 30000);
    proc.stderr.on('data', (d) => { log += d; const m = /WebDriver BiDi listening on (ws:\/\/\S+)/.exec(log); if (m) { clearTimeout(t); resolve(m[1]); } });
    proc.once('exit', (c) => { clearTimeout(t); reject(new Error(`firefox exited ${c}:\n${log}`)); });
  });
  const ws = new WebSocket(`${url}/session`);
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  let id = 0;
  const pending = new Map();
  ws.on('message', (m) => { const j = JSON.parse(m); if (j.id && pending.has(j.id)) { pending.get(j.id)(j); pending.delete(j.id); } });
  const call = (method, params) => new Promise((resolve, reject) => {
    const my = ++id;
    pending.set(my, (j) => (j.type === 'error' ? reject(new Error(`${method}: ${j.error} ${j.message}`)) : resolve(j.result)));
    ws.send(JSON.stringify({ id: my, method, params }));
  });
  await call('session.new', { capabilities: {} });
  const ctx = (await call('browsingContext.getTree', {})).contexts[0].context;
  return {
    goto: (u) => call('browsingContext.navigate', { context: ctx, url: u, wait: 'complete' }),
    eval: async (expr) => { const r = await call('script.evaluate', { expression: expr, target: { context: ctx }, awaitPromise: true }); return r.result && r.result.value !== undefined ? r.result.value : r.result; },
    click: (x, y) => call('input.performActions', { context: ctx, actions: [{ type: 'pointer', id: 'mouse', actions: [
      { type: 'pointerMove', x, y }, { type: 'pointerDown', button: 0 }, { type: 'pointerUp', button: 0 }] }] }),
    async close() {
      try { await call('session.end', {}); } catch { /* it is going anyway */ }
      ws.close();
      if (proc.exitCode === null && proc.signalCode === null) {
        const done = new Promise((r) => proc.once('exit', r));
        process.kill(proc.pid, 'SIGTERM');
        await Promise.race([done, new Promise((r) => setTimeout(r, 5000))]);
        if (proc.exitCode === null && proc.signalCode === null) { process.kill(proc.pid, 'SIGKILL'); await done; }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const tests = [
  {
    name: 'a headless session records from DevTools screenshots: red, green, blue in order in a valid MP4',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s);
      const { rec, probe: p } = await recordColours(s, site, b);
      eq([p.streams[0].width, p.streams[0].height].join('x'), '640x480', 'the viewport size');
      const list = await api(s, 'GET', `/browsers/${b.session_id}/replays`);
      eq(list.status, 200, list.text);
      assert(Array.isArray(list.json) && list.json.length === 1, `a bare array of one replay: ${list.text}`);
      eq(list.json[0].replay_id, rec.replay_id, 'listed');
      assert(list.json[0].finished_at, 'finished_at once stopped');
      await api(s, 'DELETE', `/browsers/${b.session_id}`);
    }),
  },
  {
    name: 'a headful session records its X display: red, green, blue in order in a valid MP4',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s, { headless: false });
      await recordColours(s, site, b);
      await api(s, 'DELETE', `/browsers/${b.session_id}`);
    }),
  },
  {
    name: 'one recording at a time (409), options bounded (400), record_audio refused, stop and download errors, ids that name other files',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      for (const [body, field] of [[{ framerate: 0 }, 'framerate'], [{ framerate: 21 }, 'framerate'], [{ framerate: 'x' }, 'framerate'],
        [{ max_duration_in_seconds: 0 }, 'max_duration_in_seconds'], [{ max_duration_in_seconds: 1e9 }, 'max_duration_in_seconds'],
        [{ record_audio: true }, 'record_audio'], [{ bogus: 1 }, 'bogus']]) {
        const r = await api(s, 'POST', `/browsers/${id}/replays`, body);
        eq(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert(r.json.message.includes(field), `the message names ${field}: ${r.json.message}`);
      }
      // null and no body are "no options".
      const st = await request(s.base, 'POST', `/browsers/${id}/replays`, { key: s.key, raw: 'null', headers: { 'content-type': 'application/json' } });
      eq(st.status, 201, `start with null: ${st.text}`);
      const rid = st.json.replay_id;
      const again = await request(s.base, 'POST', `/browsers/${id}/replays`, { key: s.key });
      eq(again.status, 409, `a second recording: ${again.text}`);
      assert(/in progress/.test(again.json.message), again.json.message);
      eq((await api(s, 'POST', `/browsers/${id}/replays/${rid}/stop`)).status, 200, 'stop');
      const twice = await api(s, 'POST', `/browsers/${id}/replays/${rid}/stop`);
      eq(twice.status, 400, `stop a finished one: ${twice.text}`);
      eq((await api(s, 'POST', `/browsers/${id}/replays/zzzz0000/stop`)).status, 404, 'stop an unknown replay');
      eq((await api(s, 'GET', `/browsers/${id}/replays/zzzz0000`)).status, 404, 'download an unknown replay');
      for (const bad of ['..%2F..%2Fbootstrap-api-key', '%2Fetc%2Fpasswd', 'ABC', '.json', `${rid}.json`, 'a'.repeat(65)]) {
        const r = await api(s, 'GET', `/browsers/${id}/replays/${bad}`);
        // A decoded slash makes more path segments: no replays route matches.
        const ok = bad.includes('%2F') ? [400, 404, 501] : [400, 404];
        assert(ok.includes(r.status), `${bad}: ${r.status} ${r.text}`);
        assert(!/video/.test(r.headers['content-type'] || ''), `${bad}: no file`);
      }
      await api(s, 'DELETE', `/browsers/${id}`);
    }),
  },
  {
    name: 'replays are per org: another org\'s key gets 404; a plan without browser_replays gets 403',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, {});
      eq(st.status, 201, st.text);
      const org = (await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: 'other', plan: 'enterprise' } })).json;
      const key = (await request(s.base, 'POST', `/admin/orgs/${org.id}/api_keys`, { key: ADMIN, body: { name: 'k' } })).json.key;
      eq((await api(s, 'GET', `/browsers/${b.session_id}/replays`, undefined, key)).status, 404, 'list with another org\'s key');
      eq((await api(s, 'GET', `/browsers/${b.session_id}/replays/${st.json.replay_id}`, undefined, key)).status, 404, 'download with another org\'s key');
      eq((await api(s, 'POST', `/browsers/${b.session_id}/replays/${st.json.replay_id}/stop`, undefined, key)).status, 404, 'stop with another org\'s key');
      eq((await api(s, 'POST', `/browsers/${b.session_id}/replays`, {}, key)).status, 404, 'start with another org\'s key');
      const dev = (await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: 'dev', plan: 'developer' } })).json;
      const dkey = (await request(s.base, 'POST', `/admin/orgs/${dev.id}/api_keys`, { key: ADMIN, body: { name: 'k' } })).json.key;
      const db = await create(s, {}, dkey);
      const off = await api(s, 'POST', `/browsers/${db.session_id}/replays`, {}, dkey);
      eq(off.status, 403, `replays off: ${off.text}`);
      assert(/browser_replays/.test(off.json.message), off.json.message);
      eq((await api(s, 'GET', `/browsers/${db.session_id}/replays`, undefined, dkey)).status, 403, 'list, replays off');
      await api(s, 'DELETE', `/browsers/${db.session_id}`, undefined, dkey);
      await api(s, 'DELETE', `/browsers/${b.session_id}`);
    }),
  },
  {
    name: 'a recording of an ended session is finished by the end and stays listable and downloadable',
    timeout: 60000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s);
      const { br, pg } = await page(b);
      await pg.goto(`${site.url}/red`);
      const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, {});
      eq(st.status, 201, st.text);
      await dwell(1500);
      await br.close().catch(() => {});
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204, 'session deleted');
      const list = await api(s, 'GET', `/browsers/${b.session_id}/replays`);
      eq(list.status, 200, list.text);
      eq(list.json.length, 1, 'listed after the end');
      assert(list.json[0].finished_at, `finished by the end: ${list.text}`);
      const dl = await download(s, b.session_id, st.json.replay_id);
      eq(dl.status, 200, 'downloadable after the end');
      assert(dl.body.length > 1000, `a file: ${dl.body.length} bytes`);
      eq((await api(s, 'POST', `/browsers/${b.session_id}/replays`, {})).status, 409, 'no new recording of an ended session');
    }),
  },
  {
    name: 'replay_view_url: a key-less URL signed for that one replay: 202 while recording, then the download\'s bytes, also after the session ended; another replay_id, a tampered token, a CDP token or none is 401',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, {});
      eq(st.status, 201, st.text);
      const view = st.json.replay_view_url;
      assert(typeof view === 'string' && view.startsWith(`${s.base}/browser/replays?`), `a URL of this server: ${view}`);
      const get = async (u) => { const r = await fetch(u); return { status: r.status, type: r.headers.get('content-type'), body: Buffer.from(await r.arrayBuffer()) }; };
      eq((await get(view)).status, 202, 'while recording, as the download');
      await dwell(1000);
      eq((await api(s, 'POST', `/browsers/${b.session_id}/replays/${st.json.replay_id}/stop`)).status, 200, 'stopped');
      const v = await get(view);
      eq([v.status, v.type], [200, 'video/mp4'], 'the video without an API key');
      const dl = await download(s, b.session_id, st.json.replay_id);
      assert(v.body.length > 1000 && v.body.equals(dl.body), `the download's bytes (${v.body.length} vs ${dl.body.length})`);
      const with_ = (name, value) => { const u = new URL(view); if (value === null) u.searchParams.delete(name); else u.searchParams.set(name, value); return u.href; };
      const jwt = new URL(view).searchParams.get('jwt');
      const sig = jwt.lastIndexOf('.') + 1;
      const tampered = jwt.slice(0, sig) + (jwt[sig] === 'A' ? 'B' : 'A') + jwt.slice(sig + 1);
      for (const [what, u] of [
        ['another replay id', with_('replay_id', `${st.json.replay_id[0] === 'z' ? 'y' : 'z'}${st.json.replay_id.slice(1)}`)],
        ['no replay id', with_('replay_id', null)],
        ['a tampered token', with_('jwt', tampered)],
        ['the session\'s CDP token', with_('jwt', new URL(b.cdp_ws_url).searchParams.get('jwt'))],
        ['no token', with_('jwt', null)],
      ]) eq((await get(u)).status, 401, what);
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204, 'session deleted');
      const after = await get(view);
      eq(after.status, 200, 'still there after the session ended (retention)');
      assert(after.body.equals(dl.body), 'the same bytes after the end');
      const list = await api(s, 'GET', `/browsers/${b.session_id}/replays`);
      assert(list.json[0].replay_view_url.startsWith(`${s.base}/browser/replays?`), 'a list hands out view URLs too');
    }),
  },
  {
    name: 'retention: a plan with features.browser_replays.retention_days 0 keeps nothing once the session has ended',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const org = await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: 'r0', plan: 'enterprise', overrides: { features: { browser_replays: { retention_days: 0 } } } } });
      eq(org.status, 201, org.text);
      const key = (await request(s.base, 'POST', `/admin/orgs/${org.json.id}/api_keys`, { key: ADMIN, body: { name: 'k' } })).json.key;
      const b = await create(s, {}, key);
      const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, {}, key);
      eq(st.status, 201, st.text);
      eq((await api(s, 'POST', `/browsers/${b.session_id}/replays/${st.json.replay_id}/stop`, undefined, key)).status, 200, 'stop');
      eq((await api(s, 'GET', `/browsers/${b.session_id}/replays`, undefined, key)).json.length, 1, 'listed while the session lives');
      assert(existsSync(join(s.dir, 'replays', b.session_id, `${st.json.replay_id}.mp4`)), 'the file exists while the session lives');
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`, undefined, key)).status, 204, 'session deleted');
      eq((await api(s, 'GET', `/browsers/${b.session_id}/replays`, undefined, key)).json, [], 'deleted at the session\'s end');
      eq((await api(s, 'GET', `/browsers/${b.session_id}/replays/${st.json.replay_id}`, undefined, key)).status, 404, 'download after deletion');
      assert(!existsSync(join(s.dir, 'replays', b.session_id, `${st.json.replay_id}.mp4`)), 'the file is gone');
    }),
  },
  {
    name: 'a headless recording goes on across a browser restart (a profile loaded by PATCH): red before, blue after, in one file',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s);
      let { br, pg } = await page(b);
      await pg.goto(`${site.url}/red`);
      const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, {});
      eq(st.status, 201, st.text);
      await dwell(1500);
      await br.close().catch(() => {});
      const prof = await api(s, 'POST', '/profiles', { name: 'replay-restart' });
      assert(prof.status === 200 || prof.status === 201, `profile: ${prof.text}`);
      const up = await api(s, 'PATCH', `/browsers/${b.session_id}`, { profile: { name: 'replay-restart' } });
      eq(up.status, 200, `load a profile (restarts the browser): ${up.text}`);
      ({ br, pg } = await page(b));
      try {
        await pg.goto(`${site.url}/blue`);
        // The recorder notices the old browser is gone when a capture fails
        // (up to its 3 s call timeout), then reconnects to the new one.
        await dwell(6000);
      } finally { await br.close().catch(() => {}); }
      eq((await api(s, 'POST', `/browsers/${b.session_id}/replays/${st.json.replay_id}/stop`)).status, 200, 'stop');
      const dl = await download(s, b.session_id, st.json.replay_id);
      eq(dl.status, 200, 'download');
      const dir = mkdtempSync(join(tmpdir(), 'replay-'));
      try {
        writeFileSync(join(dir, 'r.mp4'), dl.body);
        const seen = colourRuns(join(dir, 'r.mp4')).runs.filter((r) => r !== 'other');
        assert(seen.indexOf('red') >= 0 && seen.lastIndexOf('blue') > seen.indexOf('red'), `red, then blue after the restart: ${seen.join(' ')}`);
      } finally { rmSync(dir, { recursive: true, force: true }); }
      await api(s, 'DELETE', `/browsers/${b.session_id}`);
    }),
  },
  {
    name: 'PATCH viewport: refused (409 naming the recording) without force; with force applied and recorded as a second segment',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      // No recording: the resize goes through.
      eq((await api(s, 'PATCH', `/browsers/${id}`, { viewport: { width: 600, height: 400 } })).status, 200, 'resize, nothing active');
      const st = await api(s, 'POST', `/browsers/${id}/replays`, {});
      eq(st.status, 201, st.text);
      const locked = await api(s, 'PATCH', `/browsers/${id}`, { viewport: { width: 640, height: 480 } });
      eq(locked.status, 409, `resize while recording: ${locked.text}`);
      assert(/recording/.test(locked.json.message), `names the recording: ${locked.json.message}`);
      const forced = await api(s, 'PATCH', `/browsers/${id}`, { viewport: { width: 640, height: 480, force: true } });
      eq(forced.status, 200, `forced resize: ${forced.text}`);
      const list = await api(s, 'GET', `/browsers/${id}/replays`);
      eq(list.json.length, 2, `two segments: ${list.text}`);
      assert(list.json[0].finished_at && list.json[1].finished_at === null, `the first finished, the second running: ${list.text}`);
      eq(list.json[0].replay_id, st.json.replay_id, 'the first is the original');
      const second = list.json[1].replay_id;
      eq((await api(s, 'POST', `/browsers/${id}/replays/${second}/stop`)).status, 200, 'stop the second');
      for (const [r, size] of [[st.json.replay_id, '600x400'], [second, '640x480']]) {
        const dl = await download(s, id, r);
        eq(dl.status, 200, `download ${r}`);
        const dir = mkdtempSync(join(tmpdir(), 'replay-'));
        try {
          writeFileSync(join(dir, 'r.mp4'), dl.body);
          const p = probe(join(dir, 'r.mp4'));
          eq(`${p.streams[0].width}x${p.streams[0].height}`, size, `segment ${r} at its size`);
        } finally { rmSync(dir, { recursive: true, force: true }); }
      }
      await api(s, 'DELETE', `/browsers/${id}`);
    }),
  },
  {
    name: 'live view: a headful session\'s URL shows its screen in a second Chromium, a click in the viewer reaches the page, read-only drops a crafted client\'s input, a viewer locks the viewport, the URL dies with the session',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const hl = await create(s);
      eq(hl.browser_live_view_url, undefined, 'no live view for a headless session');
      await api(s, 'DELETE', `/browsers/${hl.session_id}`);
      const b = await create(s, { headless: false, telemetry: {} });
      const url = b.browser_live_view_url;
      assert(url && url.startsWith(`${s.base}/browser/live/`), `browser_live_view_url: ${url}`);
      eq((await api(s, 'GET', `/browsers/${b.session_id}`)).json.browser_live_view_url, url, 'the same URL in GET');
      const forged = url.slice(0, -4) + (url.endsWith('0000') ? '1111' : '0000');
      eq((await request(s.base, 'GET', new URL(forged).pathname)).status, 404, 'a forged token');
      const { br, pg } = await page(b);
      const viewer = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
      try {
        await pg.goto(`${site.url}/green`);
        const vp = await (await viewer.newContext({ viewport: { width: 800, height: 500 } })).newPage();
        await vp.goto(url);
        await waitFor(async () => near(await centre(vp), COLOURS.green), 'the viewer shows the green page');
        const t0 = Date.now();
        await pg.goto(`${site.url}/clicks`);
        await waitFor(async () => near(await centre(vp), COLOURS.red), 'the viewer shows the next page');
        console.log(`  live view: a navigation shown in the viewer after ${Date.now() - t0} ms`);
        const locked = await api(s, 'PATCH', `/browsers/${b.session_id}`, { viewport: { width: 600, height: 400 } });
        eq(locked.status, 409, `resize with a viewer: ${locked.text}`);
        assert(/live view/.test(locked.json.message), `names the live view: ${locked.json.message}`);
        // A crafted read-only client sends a click on the left half; it must
        // not arrive. Frames received after it prove it was handled.
        const ro = await vp.evaluate(async (u) => {
          const ws = new WebSocket(u.replace(/^http/, 'ws') + '/ws?readOnly=true');
          let frames = 0;
          await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
          ws.onmessage = () => { frames++; };
          ws.send(JSON.stringify({ action: 'click_mouse', body: { x: 10, y: 10 } }));
          const at = frames;
          await new Promise((r) => { const t = setInterval(() => { if (frames >= at + 3) { clearInterval(t); r(); } }, 20); });
          ws.close();
          return frames;
        }, url);
        assert(ro >= 3, `the read-only client got frames (${ro})`);
        eq(await pg.title(), 'none', 'a read-only click did not reach the page');
        // The viewer's page itself, read-only: a real click is not sent either.
        const rv = await (await viewer.newContext({ viewport: { width: 800, height: 500 } })).newPage();
        await rv.goto(url + '?readOnly=true');
        await waitFor(async () => near(await centre(rv), COLOURS.red), 'the read-only viewer shows the page');
        await rv.mouse.click(100, 250);
        // A click in the control viewer's right half reaches the page.
        await vp.mouse.click(700, 250);
        await waitFor(async () => /^right/.test(await pg.title()), 'the click reached the session\'s page');
        eq(await pg.title(), 'right 1', 'exactly the control viewer\'s click arrived');
        // The viewer's clipboard: a paste in the viewer writes the session's
        // clipboard and pastes it into the focused field of the session's page.
        await pg.setContent('<input id=i>');
        await pg.focus('#i');
        const paste = (p, text) => p.evaluate((t) => {
          const dt = new DataTransfer();
          dt.setData('text/plain', t);
          document.getElementById('c').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true }));
        }, text);
        await paste(rv, 'from a read-only viewer');
        await paste(vp, 'from the viewer');
        await waitFor(async () => (await pg.inputValue('#i')) === 'from the viewer', 'the viewer\'s paste reached the session\'s page');
        // The session's clipboard back to the viewer: select all and copy,
        // typed in the viewer, put the session's selection in the viewer's
        // clipboard (the page receives it as a clipboard message).
        await pg.fill('#i', 'copied in the session');
        await pg.focus('#i');
        await vp.focus('#c');
        await vp.keyboard.press('Control+a');
        await vp.keyboard.press('Control+c');
        await waitFor(async () => (await vp.evaluate(() => window.lvClipboard)) === 'copied in the session',
          'the session\'s copied text reached the viewer');
        eq(await rv.evaluate(() => window.lvClipboard), undefined, 'a viewer that copied nothing got nothing');
        await rv.close();
        // Viewers attach and detach as connection telemetry events.
        const evs = () => api(s, 'GET', `/browsers/${b.session_id}/telemetry/events?limit=100`).then((r) => r.json || []);
        const has = (list, type, ro) => list.some((e) => e.event.type === type && e.event.category === 'connection' && e.event.data.read_only === ro);
        await waitFor(async () => { const l = await evs(); return has(l, 'live_view_connect', false) && has(l, 'live_view_connect', true) && has(l, 'live_view_disconnect', true); },
          'live_view_connect (control and read-only) and live_view_disconnect events');
        const disc = (await evs()).find((e) => e.event.type === 'live_view_disconnect' && e.event.data.read_only);
        assert(disc.event.data.dropped_inputs >= 1 && disc.event.data.inputs === 0, `the read-only viewer's inputs were dropped: ${JSON.stringify(disc.event.data)}`);
        await br.close().catch(() => {});
        eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204, 'session deleted');
        eq((await request(s.base, 'GET', new URL(url).pathname)).status, 404, 'the URL dies with the session');
        await waitFor(async () => (await vp.textContent('#s')) === 'disconnected', 'the viewer is disconnected');
      } finally { await viewer.close(); await br.close().catch(() => {}); }
    }),
  },
  {
    name: 'live view in Firefox (firefox-esr over WebDriver BiDi): the page shows the session\'s screen, follows a navigation, and a click in Firefox reaches the session\'s page',
    timeout: 90000,
    fn: () => withServer(async (s, site) => {
      const b = await create(s, { headless: false });
      const { br, pg } = await page(b);
      const ff = await firefox();
      try {
        await pg.goto(`${site.url}/green`);
        await ff.goto(b.browser_live_view_url);
        const centreExpr = `(() => { const c = document.getElementById('c'); if (!c || !c.width) return null;
          const d = c.getContext('2d').getImageData(c.width >> 1, c.height >> 1, 1, 1).data; return [d[0], d[1], d[2]].join(','); })()`;
        const shows = async (colour) => { const v = await ff.eval(centreExpr); return typeof v === 'string' && near(v.split(',').map(Number), colour); };
        await waitFor(() => shows(COLOURS.green), 'Firefox shows the green page');
        await pg.goto(`${site.url}/clicks`);
        await waitFor(() => shows(COLOURS.red), 'Firefox shows the next page');
        // A click in the right half of Firefox's window reaches the page.
        await ff.click(600, 250);
        await waitFor(async () => /^right/.test(await pg.title()), 'the click from Firefox reached the session\'s page');
        eq(await pg.title(), 'right 1', 'exactly one click arrived');
      } finally { await ff.close(); await br.close().catch(() => {}); }
    }),
  },
  {
    name: 'live view: a server stopped while a viewer and a recording are connected ends cleanly (viewers closed before the HTTP daemon stops)',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({});
      const viewer = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
      try {
        const b = await create(s, { headless: false });
        eq((await api(s, 'POST', `/browsers/${b.session_id}/replays`, {})).status, 201, 'recording');
        const vp = await viewer.newPage();
        await vp.goto(b.browser_live_view_url);
        await vp.waitForFunction(() => window.lvFrames > 0);
        eq(await s.stop(), 0, 'the server exits 0 (and reports no sanitizer error)');
        await waitFor(async () => (await vp.textContent('#s')) === 'disconnected', 'the viewer is disconnected');
      } finally { await viewer.close(); await s.stop(); s.cleanup(); }
    },
  },
  {
    name: 'without the session sandbox (BROWSERD_SANDBOX=off) start is a 503 sandbox_required: no ffmpeg as the server\'s user',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
      try {
        const b = await create(s);
        const r = await api(s, 'POST', `/browsers/${b.session_id}/replays`, {});
        eq(r.status, 503, r.text);
        eq(r.json.code, 'sandbox_required', 'code');
        assert(/sandbox/.test(r.json.message), r.json.message);
        eq((await api(s, 'GET', `/browsers/${b.session_id}/replays`)).json, [], 'nothing recorded');
        await api(s, 'DELETE', `/browsers/${b.session_id}`);
      } finally { await s.stop(); s.cleanup(); }
    },
  },
];
