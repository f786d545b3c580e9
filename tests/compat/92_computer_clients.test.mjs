// Issue 31, items 1-5: computer controls, headless geometry and headless
// replays as third-party clients drive them. A plain CDP client (the `ws`
// package, no automation library that would emulate focus or a viewport)
// attaches to the session's first page and loads a page that logs its mouse
// and key events; the agent's hands are the computer endpoints. Pages are
// served by the test's own site under the name fixture.test, which the
// browser and its egress map to 127.0.0.1 (--host-resolver-rules, test mode):
// http://fixture.test:PORT/ is not a potentially trustworthy origin, so the
// pages are not secure contexts (checked), unlike 127.0.0.1 or localhost.
// Actions come right after each page load, without waiting for the page to
// draw: the first click on a freshly loaded page must land.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const HOST = 'fixture.test';
const W = 1024, H = 768;

// A page with nothing contentful to paint until text is typed (Chrome holds
// input to such a page longest): an input without border or background at a
// known place, a bar along the bottom edge, and a log of every mouse and key
// event. It keeps the browser's context menu closed (a menu left open would
// take the next click, as on any desktop).
const EVENTS = `<!doctype html><title>events</title>
<body style="margin:0;height:3000px">
<input id=i style="position:absolute;left:600px;top:200px;width:300px;height:40px;border:0;padding:0;background:transparent;outline:none">
<div id=bar style="position:fixed;left:0;right:0;bottom:0;height:20px"></div>
<script>window.log=[];for(const t of ['mousedown','mouseup','click','contextmenu','mousemove','keydown','keypress','keyup','input','paste'])
addEventListener(t,(e)=>{if(log.length<500)log.push([t,e.button===undefined?'':e.button,e.buttons===undefined?'':e.buttons,e.clientX===undefined?'':e.clientX+','+e.clientY,e.key||'',e.shiftKey?'shift':'',e.target.id||''].join(':'))},true);
addEventListener('contextmenu',(e)=>e.preventDefault());</script></body>`;

// A black 200x200 square at (100, 100) on white, for the replay's geometry.
const SQUARE = '<!doctype html><title>square</title><body style="margin:0;background:#fff">' +
  '<div style="position:absolute;left:100px;top:100px;width:200px;height:200px;background:#000"></div></body>';

const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });
const comp = (s, id, op, body) => api(s, 'POST', `/browsers/${id}/computer/${op}`, body);
async function ok(r, what) {
  eq(r.status, 200, `${what}: ${r.text}`);
  return r;
}

// A minimal CDP client over the browser's WebSocket, attached to the first
// page with a flattened session.
class Cdp {
  static async attach(url) {
    const c = new Cdp();
    c.ws = new WebSocket(url);
    c.next = 0;
    c.waiting = new Map();
    c.events = [];
    c.ws.on('message', (d) => {
      const m = JSON.parse(d);
      if (!m.id) { c.events.push(m); return; }
      const w = c.waiting.get(m.id);
      c.waiting.delete(m.id);
      if (m.error) w.reject(new Error(`${w.method}: ${JSON.stringify(m.error)}`)); else w.resolve(m.result);
    });
    await new Promise((res, rej) => { c.ws.once('open', res); c.ws.once('error', rej); });
    const { targetInfos } = await c.send('Target.getTargets');
    const page = targetInfos.find((t) => t.type === 'page');
    assert(page, 'the browser has a page');
    c.sid = (await c.send('Target.attachToTarget', { targetId: page.targetId, flatten: true })).sessionId;
    await c.send('Page.enable', {}, c.sid);
    return c;
  }
  send(method, params = {}, sessionId) {
    const id = ++this.next;
    this.ws.send(JSON.stringify({ id, method, params, sessionId }));
    return new Promise((resolve, reject) => this.waiting.set(id, { resolve, reject, method }));
  }
  async eval(expression) {
    const r = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, this.sid);
    if (r.exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(r.exceptionDetails)}`);
    return r.result.value;
  }
  // Loads url and returns once its load event fired (nothing more).
  async load(url) {
    this.events.length = 0;
    await this.send('Page.navigate', { url }, this.sid);
    await waitFor(() => this.events.some((m) => m.method === 'Page.loadEventFired'), `${url} to load`);
  }
  close() { this.ws.close(); }
}

// The same through Puppeteer, connected as its users do (its default
// 800x600 viewport emulated on the page).
class Pptr {
  static async attach(url) {
    const c = new Pptr();
    c.browser = await puppeteer.connect({ browserWSEndpoint: url });
    c.page = (await c.browser.pages())[0];
    return c;
  }
  eval(expression) { return this.page.evaluate(expression); }
  async load(url) { await this.page.goto(url, { waitUntil: 'load' }); }
  close() { return this.browser.disconnect(); }
}

async function withServer(fn) {
  const site = await startSite((rq, rs) => {
    rs.setHeader('content-type', 'text/html');
    rs.end(rq.url === '/square' ? SQUARE : EVENTS);
  });
  const port = site.hostport.split(':')[1];
  // --test-type: no "unsupported command-line flag" bar, which would come
  // and shorten the page a moment after launch (the test's flag, not a
  // production one, would put it there).
  const s = await startServer({ args: site.allow, env: { BROWSERD_CHROMIUM_EXTRA_ARGS: `--host-resolver-rules=MAP ${HOST} 127.0.0.1 --test-type` } });
  try {
    await fn(s, `http://${HOST}:${port}`);
  } finally {
    await s.stop();
    s.cleanup();
    site.close();
  }
}

async function session(s, headless, client = Cdp) {
  const r = await api(s, 'POST', '/browsers', { headless, viewport: { width: W, height: H } });
  eq(r.status, 200, `create: ${r.text}`);
  const cdp = await client.attach(r.json.cdp_ws_url);
  return { id: r.json.session_id, cdp };
}

// The two kinds of page every case runs on, each freshly loaded: the events
// page over plain http (not a secure context), and about:blank with the same
// document written into it.
async function loadKind(cdp, kind, base) {
  if (kind === 'http') {
    await cdp.load(`${base}/events`);
    eq(await cdp.eval('[location.protocol, window.isSecureContext]'), ['http:', false], 'a plain http:// page is not a secure context');
  } else {
    await cdp.load('about:blank');
    await cdp.eval(`document.open(); document.write(${JSON.stringify(EVENTS)}); document.close(); location.href`)
      .then((href) => eq(href, 'about:blank', 'the page is about:blank'));
  }
}

// The page's event log entries of the given type, waited for.
async function logged(cdp, what, pred, ms = 5000) {
  return waitFor(async () => {
    const log = await cdp.eval('log');
    return pred(log) && log;
  }, what, ms).catch(async (e) => { throw new Error(`${e.message}; the page logged ${JSON.stringify((await cdp.eval('log')).filter((l) => !l.startsWith('mousemove')).slice(-20))}`); });
}
const has = (log, prefix) => log.some((l) => l.startsWith(prefix));

// Decodes a PNG's size from its header.
function pngSize(buf) {
  eq(buf.subarray(1, 4).toString('latin1'), 'PNG', 'a PNG');
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}

async function screenshot(s, id) {
  const r = await fetch(`${s.base}/browsers/${id}/computer/screenshot`, { method: 'POST', headers: { authorization: `Bearer ${s.key}`, accept: 'image/png' } });
  eq(r.status, 200, 'screenshot');
  return Buffer.from(await r.arrayBuffer());
}

// Issue 31.1's cases, through one client.
async function headfulCases(s, base, client) {
  // Where the page sits on the screen, read before a client may emulate
  // another viewport on it (no window manager: the window has no borders).
  const { id, cdp: probe } = await session(s, false);
  const [ox, oy, iw] = await probe.eval('[outerWidth - innerWidth, outerHeight - innerHeight, innerWidth]');
  probe.close();
  assert(oy > 0 && iw >= W - 1, `the page sits below the browser's UI on the ${W}x${H} screen (offset ${ox},${oy}, width ${iw})`);
  const r = await api(s, 'GET', `/browsers/${id}`);
  const cdp = await client.attach(r.json.cdp_ws_url);
  try {
    for (const kind of ['http', 'blank']) {
      await loadKind(cdp, kind, base);
      const at = (x, y) => `${x - ox},${y - oy}`;

      await ok(await comp(s, id, 'click_mouse', { x: 768, y: 450 }), 'click');
      await logged(cdp, `${kind}: mousedown and mouseup of the first click on the new page`,
        (l) => has(l, `mousedown:0:1:${at(768, 450)}`) && has(l, `mouseup:0:0:${at(768, 450)}`) && has(l, `click:0:0:${at(768, 450)}`));

      await loadKind(cdp, kind, base);
      await ok(await comp(s, id, 'drag_mouse', { path: [[300, 300], [400, 350], [500, 400]] }), 'drag');
      const drag = await logged(cdp, `${kind}: the drag's mousedown, moves with the button held, mouseup`,
        (l) => has(l, `mousedown:0:1:${at(300, 300)}`) && has(l, `mouseup:0:0:${at(500, 400)}`));
      const down = drag.findIndex((l) => l.startsWith('mousedown')), up = drag.findIndex((l) => l.startsWith('mouseup'));
      assert(down < up && drag.slice(down, up).some((l) => l.startsWith('mousemove:0:1:')), `${kind}: pressed, moved, released in order: ${drag.join(' ')}`);

      await loadKind(cdp, kind, base);
      await ok(await comp(s, id, 'click_mouse', { x: ox + 750, y: oy + 220 }), 'click the input');
      await ok(await comp(s, id, 'type', { text: 'hé!' }), 'type');
      await waitFor(async () => (await cdp.eval('i.value')) === 'hé!', `${kind}: the typed text in the input`, 5000)
        .catch(async (e) => { throw new Error(`${e.message} (value ${JSON.stringify(await cdp.eval('i.value'))})`); });

      await loadKind(cdp, kind, base);
      await ok(await comp(s, id, 'scroll', { x: 500, y: 450, delta_y: 3 }), 'scroll');
      await waitFor(() => cdp.eval('scrollY > 0'), `${kind}: the wheel to scroll the page`, 5000);

      await loadKind(cdp, kind, base);
      await ok(await comp(s, id, 'batch', { actions: [
        { type: 'click_mouse', click_mouse: { x: ox + 700, y: oy + 215 } },
        { type: 'type_text', type_text: { text: 'ok' } },
      ] }), 'batch');
      await waitFor(async () => (await cdp.eval('i.value')) === 'ok', `${kind}: the batch's typing in the input`, 5000);

      await loadKind(cdp, kind, base);
      await ok(await comp(s, id, 'click_mouse', { x: 768, y: 450, button: 'right' }), 'right click');
      await logged(cdp, `${kind}: the right click's contextmenu`, (l) => has(l, `contextmenu:2:`) && has(l, `mousedown:2:2:${at(768, 450)}`));
    }
  } finally { cdp.close(); }
}

export const tests = [
  {
    name: 'issue 31.1: headful at 1024x768, on about:blank and on a plain http:// page, right after each load (a plain CDP client): a click lands, a right click opens contextmenu, a drag presses before it releases, a click then typing types, the wheel scrolls, a batch of click and type types',
    timeout: 90000,
    fn: () => withServer((s, base) => headfulCases(s, base, Cdp)),
  },
  {
    name: 'issue 31.1: the same through Puppeteer (its emulated 800x600 viewport on the page)',
    timeout: 90000,
    fn: () => withServer((s, base) => headfulCases(s, base, Pptr)),
  },
  {
    name: 'issue 31.2: the clipboard is the session\'s: write then read round-trips on about:blank and on a plain http:// page, headful and headless, and Ctrl+V pastes it into the page',
    timeout: 120000,
    fn: () => withServer(async (s, base) => {
      for (const headless of [false, true]) {
        const { id, cdp } = await session(s, headless);
        const mode = headless ? 'headless' : 'headful';
        try {
          await cdp.load('about:blank');
          await ok(await comp(s, id, 'clipboard/write', { text: 'one ✓ line\nand two' }), `${mode}: write on about:blank`);
          eq((await ok(await comp(s, id, 'clipboard/read'), 'read')).json, { text: 'one ✓ line\nand two' }, `${mode}: the clipboard round-trips on about:blank`);
          await loadKind(cdp, 'http', base);
          await ok(await comp(s, id, 'clipboard/write', { text: 'pasted ✓' }), `${mode}: write on a plain http:// page`);
          eq((await ok(await comp(s, id, 'clipboard/read'), 'read')).json, { text: 'pasted ✓' }, `${mode}: the clipboard round-trips on a plain http:// page`);
          const oy = headless ? 0 : await cdp.eval('outerHeight - innerHeight');
          await ok(await comp(s, id, 'click_mouse', { x: 750, y: oy + 220 }), 'click the input');
          await ok(await comp(s, id, 'press_key', { keys: ['ctrl+v'] }), 'paste');
          await waitFor(async () => (await cdp.eval('i.value')) === 'pasted ✓', `${mode}: Ctrl+V to paste the clipboard into the page`, 5000)
            .catch(async (e) => { throw new Error(`${e.message} (value ${JSON.stringify(await cdp.eval('i.value'))})`); });
        } finally { cdp.close(); }
      }
    }),
  },
  {
    name: 'issue 31.3: a headless page is laid out at the session\'s size: the screenshot is the viewport, and a click on the bottom rows reaches the page (also after a resize, and in the next browser launched)',
    timeout: 60000,
    fn: () => withServer(async (s, base) => {
      const { id, cdp } = await session(s, true);
      try {
        await loadKind(cdp, 'http', base);
        eq(await cdp.eval('[innerWidth, innerHeight]'), [W, H], 'the page\'s viewport is the session\'s viewport');
        eq(pngSize(await screenshot(s, id)), [W, H], 'the screenshot\'s size');
        await ok(await comp(s, id, 'click_mouse', { x: 512, y: H - 5 }), 'click the bottom bar');
        await logged(cdp, 'the click on the bottom rows', (l) => l.includes(`mousedown:0:1:512,${H - 5}::` + ':bar'));
        const r = await api(s, 'PATCH', `/browsers/${id}`, { viewport: { width: 800, height: 600 } });
        eq(r.status, 200, `resize: ${r.text}`);
        await waitFor(async () => JSON.stringify(await cdp.eval('[innerWidth, innerHeight]')) === '[800,600]', 'the page\'s viewport to follow the resize', 5000)
          .catch(async (e) => { throw new Error(`${e.message} (${JSON.stringify(await cdp.eval('[innerWidth, innerHeight]'))})`); });
        eq(pngSize(await screenshot(s, id)), [800, 600], 'the screenshot\'s size after the resize');
        // A second browser is launched with the frame the first one measured.
        const second = await session(s, true);
        try {
          eq(await second.cdp.eval('[innerWidth, innerHeight]'), [W, H], 'the next headless page\'s viewport too');
          eq(pngSize(await screenshot(s, second.id)), [W, H], 'the next screenshot\'s size');
        } finally { second.cdp.close(); }
      } finally { cdp.close(); }
    }),
  },
  {
    name: 'issue 31.3: on an unsandboxed root server (BROWSERD_SANDBOX=off, Chromium with --no-sandbox) a headless page is the session\'s size right after the create, in the first browser and the next ones, and no create waits for a failed fit (its "unsupported flag" bar shortened the page after the measurement: every create then spent 3 s failing to fit)',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
      try {
        // The default viewport (1920x1080), as a create without one gets it.
        for (let i = 0; i < 3; i++) {
          const r = await api(s, 'POST', '/browsers', { headless: true });
          eq(r.status, 200, `create: ${r.text}`);
          const id = r.json.session_id, cdp = await Cdp.attach(r.json.cdp_ws_url);
          try {
            eq(await cdp.eval('[innerWidth, innerHeight]'), [1920, 1080], `browser ${i + 1}: the page's viewport right after the create`);
          } finally { cdp.close(); }
          eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204, 'delete');
        }
        assert(!/could not be sized/.test(s.log), `no fit failed:\n${s.log.split('\n').filter((l) => /could not be sized/.test(l)).join('\n')}`);
      } finally { await s.stop(); s.cleanup(); }
    },
  },
  {
    name: 'issue 31.4: headless typing is a keyboard\'s: keydown, keypress, input and keyup for every character, Shift for capitals',
    timeout: 60000,
    fn: () => withServer(async (s, base) => {
      const { id, cdp } = await session(s, true);
      try {
        await loadKind(cdp, 'http', base);
        await ok(await comp(s, id, 'click_mouse', { x: 750, y: 220 }), 'click the input');
        await ok(await comp(s, id, 'type', { text: 'Ab1 é' }), 'type');
        await waitFor(async () => (await cdp.eval('i.value')) === 'Ab1 é', 'the typed text', 5000);
        const keys = (await cdp.eval('log')).filter((l) => /^key(down|up)/.test(l));
        for (const k of ['A', 'b', '1', ' ', 'é']) {
          assert(keys.some((l) => l.startsWith('keydown:') && l.split(':')[4] === k), `a keydown for ${JSON.stringify(k)}: ${keys.join(' ')}`);
          assert(keys.some((l) => l.startsWith('keyup:') && l.split(':')[4] === k), `a keyup for ${JSON.stringify(k)}: ${keys.join(' ')}`);
        }
        assert(keys.some((l) => l.startsWith('keydown:') && l.split(':')[4] === 'A' && l.split(':')[5] === 'shift'), `Shift with the capital: ${keys.join(' ')}`);
        const log = await cdp.eval('log');
        eq(log.filter((l) => l.startsWith('input:')).length, 5, 'an input event per character');
      } finally { cdp.close(); }
    }),
  },
  {
    name: 'issue 31.5: a headless replay keeps the geometry of the page it records (a 200x200 square stays square)',
    timeout: 90000,
    fn: () => withServer(async (s, base) => {
      const { id, cdp } = await session(s, true);
      const dir = mkdtempSync(join(tmpdir(), 'bd-replay-'));
      try {
        await cdp.load(`${base}/square`);
        const st = await api(s, 'POST', `/browsers/${id}/replays`, { framerate: 5 });
        eq(st.status, 201, `start: ${st.text}`);
        // The recording holds its first picture when start answers; a second
        // of frames is enough to decode one.
        const end = Date.now() + 1500;
        await waitFor(() => Date.now() >= end, 'a second and a half of recording', 5000, 50);
        const stop = await request(s.base, 'POST', `/browsers/${id}/replays/${st.json.replay_id}/stop`, { key: s.key, headers: { accept: '*/*' } });
        eq(stop.status, 200, `stop: ${stop.text}`);
        const r = await fetch(`${s.base}/browsers/${id}/replays/${st.json.replay_id}`, { headers: { authorization: `Bearer ${s.key}`, accept: 'video/mp4' } });
        eq(r.status, 200, 'download');
        const file = join(dir, 'r.mp4');
        writeFileSync(file, Buffer.from(await r.arrayBuffer()));
        const stream = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=width,height', '-of', 'json', file]).toString()).streams[0];
        eq([stream.width, stream.height], [W, H], 'the video has the session\'s size');
        // The last frame in grey: the square's rows and columns through its middle.
        const grey = execFileSync('ffmpeg', ['-v', 'error', '-sseof', '-0.5', '-i', file, '-frames:v', '1', '-f', 'rawvideo', '-pix_fmt', 'gray', '-'], { maxBuffer: 1 << 24 });
        eq(grey.length, W * H, 'one grey frame');
        const dark = (x, y) => grey[y * W + x] < 128;
        let rows = 0, cols = 0;
        for (let y = 0; y < H; y++) rows += dark(200, y) ? 1 : 0;
        for (let x = 0; x < W; x++) cols += dark(x, 200) ? 1 : 0;
        assert(Math.abs(rows - 200) <= 4 && Math.abs(cols - 200) <= 4, `the square is 200x200 in the video, got ${cols}x${rows}`);
        assert(dark(110, 110) && !dark(95, 200) && !dark(200, 95), 'the square is where the page has it');
      } finally { cdp.close(); rmSync(dir, { recursive: true, force: true }); }
    }),
  },
];
