// Issue 17, headful part: computer controls act on the session's own X
// display (XTest input, the display's pointer and cursor) and screenshots are
// the whole X screen, browser UI included (SESSION_API.md 1.2). Coordinates
// are the screen's: the page starts below the browser's tab strip, so the
// tests place their clicks at the page's offset on the screen, read from the
// page itself. Page state is read back over CDP with Playwright.
import { inflateSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });
const comp = (s, id, op, body) => api(s, 'POST', `/browsers/${id}/computer/${op}`, body);

// A page for the agent's hands, on a solid background (the screenshot test
// tells page pixels from the browser's own).
const PAGE = `<title>x</title><body style="margin:0;height:4000px;background:rgb(0,128,255)">
<button id=b style="position:absolute;left:10px;top:10px;width:100px;height:40px" onclick="this.textContent='clicked'">go</button>
<form id=f onsubmit="event.preventDefault();document.title='submitted:'+document.getElementById('i').value"><input id=i style="position:absolute;left:10px;top:70px;width:200px;height:30px"></form>
<div id=d style="position:absolute;left:10px;top:120px;width:50px;height:50px;background:red"></div>
<script>window.log=[];for(const t of ['keydown','paste','focus','blur','mousedown','mouseup','mouseover'])addEventListener(t,(e)=>log.length<40&&log.push(t+':'+(e.key||'')+(e.ctrlKey?'+ctrl':'')+(e.clientX!==undefined?e.clientX+','+e.clientY+','+e.target.id:'')),true);
let drag=null;const d=document.getElementById('d');window.moves=0;window.downs=0;window.ups=0;
d.onmousedown=(e)=>{window.downs++;drag={x:e.clientX-d.offsetLeft,y:e.clientY-d.offsetTop}};
onmousemove=(e)=>{if(drag){window.moves++;d.style.left=(e.clientX-drag.x)+'px';d.style.top=(e.clientY-drag.y)+'px'}};
onmouseup=()=>{window.ups++;drag=null};</script></body>`;

async function withSession(fn, count = 1) {
  const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end(PAGE); });
  const s = await startServer({ args: site.allow });
  const pws = [];
  try {
    const sessions = [];
    for (let i = 0; i < count; i++) {
      const r = await api(s, 'POST', '/browsers', { headless: false, start_url: `${site.url}/` });
      eq(r.status, 200, `create: ${r.text}`);
      const pw = await chromium.connectOverCDP(r.json.cdp_ws_url);
      pws.push(pw);
      const page = pw.contexts()[0].pages()[0];
      await page.waitForSelector('#d');
      // Chrome drops input to a page until it has presented a frame of it:
      // wait for two animation frames before acting.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      // The page's top-left corner on the X screen (the window has no
      // borders: no window manager runs on the display).
      const [ox, oy] = await page.evaluate(() => [window.screenX + window.outerWidth - window.innerWidth,
        window.screenY + window.outerHeight - window.innerHeight]);
      sessions.push({ id: r.json.session_id, page, ox, oy });
    }
    await fn(s, sessions);
  } finally {
    for (const pw of pws) await pw.close().catch(() => {});
    await s.stop();
    s.cleanup();
    site.close();
  }
}

// Decodes an 8-bit RGB or RGBA PNG: {width, height, px(x, y) -> [r, g, b]}.
function decodePng(buf) {
  eq(buf.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'a PNG signature');
  let off = 8, width = 0, height = 0, type = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off), kind = buf.toString('latin1', off + 4, off + 8);
    const body = buf.subarray(off + 8, off + 8 + len);
    if (kind === 'IHDR') { width = body.readUInt32BE(0); height = body.readUInt32BE(4); type = body[9]; }
    if (kind === 'IDAT') idat.push(body);
    off += 12 + len;
  }
  const bpp = type === 6 ? 4 : 3, stride = width * bpp;
  const raw = inflateSync(Buffer.concat(idat)), out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)], src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? out[y * stride + i - bpp] : 0, b = y ? out[(y - 1) * stride + i] : 0;
      const c = i >= bpp && y ? out[(y - 1) * stride + i - bpp] : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const pred = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][f];
      out[y * stride + i] = (src[i] + pred) & 255;
    }
  }
  return { width, height, px: (x, y) => [...out.subarray(y * stride + x * bpp, y * stride + x * bpp + 3)] };
}

async function ok(r, what) {
  eq(r.status, 200, `${what}: ${r.text}`);
  return r;
}

export const tests = [
  {
    name: 'headful input goes through the X display: a click changes the page, typed text lands, Return submits, the wheel scrolls, a drag moves the box, the pointer reads back, a paste sees the clipboard, a batch applies in order',
    timeout: 120000,
    fn: () => withSession(async (s, [{ id, page, ox, oy }]) => {
      assert(oy > 0, `the page starts below the browser's UI on the screen (offset ${ox},${oy})`);
      await ok(await comp(s, id, 'click_mouse', { x: ox + 60, y: oy + 30 }), 'click');
      await waitFor(async () => (await page.textContent('#b')) === 'clicked', 'the click to reach the button');
      await ok(await comp(s, id, 'click_mouse', { x: ox + 100, y: oy + 85 }), 'focus the input');
      await ok(await comp(s, id, 'type', { text: 'aB:é' }), 'type');
      await waitFor(async () => (await page.inputValue('#i')) === 'aB:é', 'typed text (shifted and non-ASCII characters too) in the input');
      await ok(await comp(s, id, 'press_key', { keys: ['Return'] }), 'press Return');
      await waitFor(async () => (await page.title()) === 'submitted:aB:é', 'Return to submit the form');
      await ok(await comp(s, id, 'scroll', { x: ox + 300, y: oy + 300, delta_y: 3 }), 'scroll');
      await waitFor(() => page.evaluate(() => window.scrollY > 0), 'the wheel to scroll the page');
      // The wheel scrolls smoothly: back to the top once the animation is over.
      let last = -1;
      await waitFor(async () => { const y = await page.evaluate(() => window.scrollY); const still = y === last; last = y; return still; }, 'the wheel\'s scrolling to settle');
      await page.evaluate(() => window.scrollTo(0, 0));
      await waitFor(() => page.evaluate(() => window.scrollY === 0), 'the page back at the top');
      await ok(await comp(s, id, 'drag_mouse', { path: [[ox + 35, oy + 145], [ox + 135, oy + 195], [ox + 235, oy + 245]] }), 'drag');
      await waitFor(async () => Math.abs(await page.evaluate(() => parseInt(document.getElementById('d').style.left, 10)) - 210) <= 2,
        'the drag to move the box to x=210');
      await ok(await comp(s, id, 'move_mouse', { x: 400, y: 401 }), 'move');
      eq((await comp(s, id, 'get_mouse_position')).json, { x: 400, y: 401 }, 'the display\'s pointer reads back');
      await ok(await comp(s, id, 'clipboard/write', { text: 'clip x' }), 'clipboard write');
      eq((await comp(s, id, 'clipboard/read')).json, { text: 'clip x' }, 'the clipboard round-trips');
      await ok(await comp(s, id, 'click_mouse', { x: ox + 100, y: oy + 85 }), 'focus the input');
      await ok(await comp(s, id, 'press_key', { keys: ['ctrl+a'] }), 'select all');
      await ok(await comp(s, id, 'press_key', { keys: ['Ctrl+v'] }), 'paste');
      await waitFor(async () => (await page.inputValue('#i')) === 'clip x', 'the page\'s paste to see the clipboard', 5000)
        .catch(async (err) => { throw new Error(`${err.message} (the input has ${JSON.stringify(await page.inputValue('#i'))}; events ${await page.evaluate(() => window.log.slice(-12).join(' '))})`); });
      await ok(await comp(s, id, 'batch', { actions: [
        { type: 'move_mouse', move_mouse: { x: 10, y: 10, smooth: false } },
        { type: 'sleep', sleep: { duration_ms: 10 } },
        { type: 'click_mouse', click_mouse: { x: 61, y: 31 } },
      ] }), 'batch');
      eq((await comp(s, id, 'get_mouse_position')).json, { x: 61, y: 31 }, 'a batch applies in order');
    }),
  },
  {
    name: 'a headful screenshot is the whole X screen: the browser\'s UI above the page, the page\'s colour below; a region has the region\'s size and pixels',
    timeout: 90000,
    fn: () => withSession(async (s, [{ id, oy }]) => {
      const r = await ok(await comp(s, id, 'screenshot'), 'screenshot');
      eq(r.headers['content-type'], 'image/png');
      // The page is in the DOM before the X server holds its pixels (a busy
      // host in CI showed the white window once): wait for the page's colour
      // to reach the screen; a capture that never shows it fails.
      let img = null;
      await waitFor(async () => {
        img = decodePng(await rawShot(s, id));
        return JSON.stringify(img.px(500, oy + 500)) === JSON.stringify([0, 128, 255]);
      }, 'the page\'s colour on the X screen', 20000).catch(() => {});
      eq([img.width, img.height], [1920, 1080], 'the screen\'s size');
      eq(img.px(500, oy + 500), [0, 128, 255], 'the page\'s background below the browser\'s UI');
      const top = img.px(500, 5);
      assert(JSON.stringify(top) !== JSON.stringify([0, 128, 255]), `the top rows are the browser's UI, not the page (got ${top})`);
      const crop = decodePng(await rawShot(s, id, { region: { x: 5, y: oy + 200, width: 200, height: 100 } }));
      eq([crop.width, crop.height], [200, 100], 'a region has the region\'s size');
      eq(crop.px(10, 10), [0, 128, 255], 'a region inside the page shows the page');
    }),
  },
  {
    name: 'cursor hides and shows the X cursor (XFixes) and answers {ok: true}; hiding twice and showing twice are accepted',
    timeout: 90000,
    fn: () => withSession(async (s, [{ id }]) => {
      for (const hidden of [true, true, false, false, true]) {
        const r = await comp(s, id, 'cursor', { hidden });
        eq([r.status, r.json], [200, { ok: true }], `cursor hidden=${hidden}: ${r.text}`);
      }
      // Input still works with the cursor hidden (the X connection is the same).
      await ok(await comp(s, id, 'move_mouse', { x: 7, y: 9, smooth: false }), 'move');
      eq((await comp(s, id, 'get_mouse_position')).json, { x: 7, y: 9 }, 'the pointer with the cursor hidden');
    }),
  },
  {
    name: 'a client that disconnects mid-drag stops the gesture: the button is released, the box stops, and the session answers at once',
    timeout: 90000,
    fn: () => withSession(async (s, [{ id, page, ox, oy }]) => {
      // 2 segments x 100 steps x 50 ms: 10 s if it ran to the end.
      const body = JSON.stringify({ path: [[ox + 35, oy + 145], [ox + 800, oy + 145], [ox + 800, oy + 800]], smooth: false, steps_per_segment: 100, step_delay_ms: 50 });
      const http = await import('node:http');
      const rq = http.request(new URL(`/browsers/${id}/computer/drag_mouse`, s.base), { method: 'POST',
        headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
      rq.on('error', () => {});
      rq.end(body);
      await waitFor(() => page.evaluate(() => window.moves > 5), 'the drag to start moving the box', 15000, 20)
        .catch(async (err) => { throw new Error(`${err.message} (downs/moves/ups ${await page.evaluate(() => [window.downs, window.moves, window.ups])}, offset ${ox},${oy}, events ${await page.evaluate(() => window.log.join(' '))}, now ${await page.evaluate(() => [window.outerHeight - window.innerHeight, window.screenY])})`); });
      const t0 = Date.now();
      rq.destroy();
      // The next call waits for the session's lock: it answers soon only if the drag stopped.
      const pos = await comp(s, id, 'get_mouse_position');
      const waited = Date.now() - t0;
      eq(pos.status, 200, pos.text);
      assert(waited < 2000, `the session's lock was released soon after the client left (${waited} ms, the drag had ~9 s to go)`);
      await waitFor(() => page.evaluate(() => window.ups >= 1), 'the button to be released');
      const left = await page.evaluate(() => parseInt(document.getElementById('d').style.left, 10));
      assert(left < 700, `the box stopped part-way (left ${left})`);
      const moves = await page.evaluate(() => window.moves);
      await new Promise((r) => setTimeout(r, 300)); // a window in which a running drag would move the box
      eq(await page.evaluate(() => window.moves), moves, 'no more moves after the stop');
    }),
  },
  {
    name: 'two headful sessions typed into at once each get only their own text (one X display each)',
    timeout: 120000,
    fn: () => withSession(async (s, sessions) => {
      await Promise.all(sessions.map((x) => comp(s, x.id, 'click_mouse', { x: x.ox + 100, y: x.oy + 85 }).then((r) => ok(r, 'focus'))));
      await Promise.all(sessions.map((x, i) => comp(s, x.id, 'type', { text: `session-${i}-text`, delay: 5 }).then((r) => ok(r, 'type'))));
      for (const [i, x] of sessions.entries())
        await waitFor(async () => (await x.page.inputValue('#i')) === `session-${i}-text`, `session ${i} to have only its own text`);
    }, 2),
  },
];

// The screenshot's bytes (request() decodes bodies as UTF-8; this keeps them).
async function rawShot(s, id, body) {
  const http = await import('node:http');
  const payload = JSON.stringify(body || {});
  return new Promise((resolve, reject) => {
    const rq = http.request(new URL(`/browsers/${id}/computer/screenshot`, s.base), { method: 'POST',
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`screenshot ${res.statusCode}: ${Buffer.concat(chunks)}`))));
    });
    rq.on('error', reject);
    rq.end(payload);
  });
}
