// Issue 31 (real clients): Microsoft's @playwright/mcp (0.0.83), the MCP server
// most agents use to drive a browser, pointed at a browserd session with
// `--cdp-endpoint <cdp_ws_url>` as the hosted service's users run it. It is
// started as a child process (stdio) and driven with the MCP client of
// @modelcontextprotocol/sdk, the way an agent calls its tools: navigate,
// snapshot, click and type by the snapshot's refs, tabs, screenshots, evaluate,
// back, close. Then the server side: the session outlives the MCP server (a
// second one sees the same page) and its DELETE ends the MCP server's browser
// with an error, never a hang.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const CLI = join(here, 'node_modules', '@playwright', 'mcp', 'cli.js');

// The test's own origin: a form, a link that opens a new tab, a button that
// changes its text, a page that opens a popup with window.open.
const PAGES = {
  '/': `<title>home</title><h1>home</h1>
    <button id="b" onclick="this.textContent='pressed ' + (++window.n || (window.n = 1))">press me</button>
    <form action="/result" method="get"><label>name <input name="q"></label><button type="submit">send</button></form>
    <a href="/second" target="_blank">open second</a> <a href="/second">go second</a>`,
  '/result': null, // echoes the form's field
  '/second': '<title>second</title><p>the second page</p>',
  '/files': '<title>files</title><a href="/report.txt">get report</a>',
  '/popup': `<title>opener</title>
    <button onclick="window.open('/second', 'w', 'popup,width=300,height=200')">pop</button>`,
};
const REPORT = 'the report\n'.repeat(100);
function site(req, res) {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/result') {
    const q = (u.searchParams.get('q') || '').replace(/[<&>]/g, '');
    res.writeHead(200, { 'content-type': 'text/html' });
    return res.end(`<title>result</title><p id="r">hello ${q}</p>`);
  }
  if (u.pathname === '/report.txt') {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-disposition': 'attachment; filename="report.txt"' });
    return res.end(REPORT);
  }
  const body = PAGES[u.pathname];
  res.writeHead(body ? 200 : 404, { 'content-type': 'text/html' });
  res.end(body || 'not found');
}

async function withServer(fn) {
  const st = await startSite(site);
  const s = await startServer({ args: [...st.allow] });
  const out = mkdtempSync(join(tmpdir(), 'browserd-mcp-'));
  try { await fn(s, st, out); } finally {
    await s.stop(); s.cleanup(); st.close();
    rmSync(out, { recursive: true, force: true });
  }
}

async function create(s, body) {
  const r = await request(s.base, 'POST', '/browsers', { key: s.key, body });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// @playwright/mcp over stdio, connected to cdp (a session's cdp_ws_url).
// call(name, args) resolves to the tool's text (images in .images) and throws
// on a tool error; stop() ends the process by PID and waits for its exit.
async function startMcp(cdp, out) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, '--cdp-endpoint', cdp, '--output-dir', out, '--cdp-timeout', '20000'],
    cwd: out, stderr: 'pipe',
  });
  let log = '';
  transport.stderr.on('data', (d) => { log += d; });
  const client = new Client({ name: 'browserd-agent', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid;
  const exited = new Promise((r) => {
    const t = setInterval(() => { try { process.kill(pid, 0); } catch { clearInterval(t); r(); } }, 100);
  });
  const m = {
    client, pid, get log() { return log; },
    async raw(name, args = {}, ms = 60000) {
      return client.callTool({ name, arguments: args }, undefined, { timeout: ms });
    },
    async call(name, args = {}, ms = 60000) {
      const res = await m.raw(name, args, ms);
      const text = res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
      if (res.isError) throw new Error(`${name} failed: ${text}\n${log.slice(-2000)}`);
      const r = new String(text);
      r.images = res.content.filter((c) => c.type === 'image');
      return r;
    },
    async stop() {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      await exited;
      await client.close().catch(() => {});
    },
  };
  return m;
}

// The ref the snapshot gives an element: `- role "name" [ref=e5]`.
function refOf(snap, role, name) {
  const m = new RegExp(`${role} "${name}"[^\\n]*?\\[ref=([^\\]]+)\\]`).exec(String(snap));
  assert(m, `no ${role} "${name}" in the snapshot:\n${snap}`);
  return m[1];
}
// The tab list of browser_tabs: [{index, current, title, url}].
function tabsOf(text) {
  return [...String(text).matchAll(/^- (\d+): (\(current\) )?\[([^\]]*)\]\(([^)]*)\)/gm)]
    .map((m) => ({ index: Number(m[1]), current: !!m[2], title: m[3], url: m[4] }));
}
// Width and height of a PNG (IHDR) or JPEG (SOF) image content's data.
function imageSize(img) {
  const b = Buffer.from(img.data, 'base64');
  if (b.readUInt32BE(0) === 0x89504e47) return [b.readUInt32BE(16), b.readUInt32BE(20)];
  for (let i = 2; i < b.length - 9;) {
    const marker = b[i + 1], len = b.readUInt16BE(i + 2);
    if (marker >= 0xc0 && marker <= 0xc3) return [b.readUInt16BE(i + 7), b.readUInt16BE(i + 5)];
    i += 2 + len;
  }
  throw new Error(`not an image of a known kind (${img.mimeType})`);
}

export const tests = [
  {
    name: 'issue 31 (real clients): @playwright/mcp over cdp_ws_url drives a headless session as an agent does: navigate, snapshot, click and type by ref, tabs (list, new, select, close), a screenshot of the session\'s viewport size, evaluate, back, close',
    timeout: 120000,
    fn: () => withServer(async (s, st, out) => {
      const b = await create(s, { headless: true, viewport: { width: 800, height: 600 } });
      const mcp = await startMcp(b.cdp_ws_url, out);
      try {
        const names = (await mcp.client.listTools()).tools.map((t) => t.name);
        for (const t of ['browser_navigate', 'browser_snapshot', 'browser_click', 'browser_type', 'browser_tabs',
          'browser_take_screenshot', 'browser_evaluate', 'browser_navigate_back', 'browser_close']) {
          assert(names.includes(t), `the MCP server offers ${t}: ${names}`);
        }
        // The session's own first page is the agent's first tab.
        let tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
        eq(tabs.length, 1, 'one tab at the start');
        eq(tabs[0].url, 'about:blank', 'the session\'s page');

        await mcp.call('browser_navigate', { url: `${st.url}/` });
        let snap = await mcp.call('browser_snapshot');
        assert(/Page Title: home/.test(snap), `the page's title: ${snap}`);

        // Click by ref: the button's text changes (twice: the ref stays valid).
        const button = refOf(snap, 'button', 'press me');
        await mcp.call('browser_click', { element: 'press me button', target: button });
        snap = await mcp.call('browser_snapshot');
        assert(/button "pressed 1"/.test(snap), `the button's text changed:\n${snap}`);
        await mcp.call('browser_click', { element: 'pressed button', target: refOf(snap, 'button', 'pressed 1') });
        eq((await mcp.call('browser_evaluate', { function: '() => document.getElementById("b").textContent' })).includes('"pressed 2"'), true, 'evaluate reads the page');

        // Type into the form and submit it with Enter.
        const field = refOf(snap, 'textbox', 'name');
        await mcp.call('browser_type', { element: 'name field', target: field, text: 'agent', submit: true });
        await waitFor(async () => /Page Title: result/.test(await mcp.call('browser_snapshot')), 'the form\'s result page', 20000, 200);
        snap = await mcp.call('browser_snapshot');
        assert(/hello agent/.test(snap), `the form's value arrived:\n${snap}`);

        // Back to the form's page.
        await mcp.call('browser_navigate_back');
        snap = await mcp.call('browser_snapshot');
        assert(/Page Title: home/.test(snap), `back on the home page:\n${snap}`);

        // A link with target=_blank opens a second tab the agent sees.
        await mcp.call('browser_click', { element: 'open second link', target: refOf(snap, 'link', 'open second') });
        await waitFor(async () => tabsOf(await mcp.call('browser_tabs', { action: 'list' })).length === 2, 'the new tab in the list', 20000, 200);
        await waitFor(async () => tabsOf(await mcp.call('browser_tabs', { action: 'list' }))[1].title === 'second', 'the new tab\'s page', 20000, 200);

        // A new tab of the agent's own, on about:blank, then select and close.
        await mcp.call('browser_tabs', { action: 'new', url: 'about:blank' });
        tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
        eq(tabs.length, 3, `three tabs: ${JSON.stringify(tabs)}`);
        eq(tabs[2].url, 'about:blank', 'the new tab');
        assert(tabs[2].current, 'the new tab is current');
        eq((await mcp.call('browser_evaluate', { function: '() => location.href' })).includes('"about:blank"'), true, 'evaluate on about:blank');
        await mcp.call('browser_tabs', { action: 'select', index: 1 });
        tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
        assert(tabs[1].current && tabs[1].title === 'second', `the second tab is current: ${JSON.stringify(tabs)}`);
        await mcp.call('browser_tabs', { action: 'close', index: 2 });
        await mcp.call('browser_tabs', { action: 'close', index: 1 });
        tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
        eq(tabs.length, 1, `one tab left: ${JSON.stringify(tabs)}`);
        eq(tabs[0].title, 'home', 'the first tab is left');

        // The server sees the same pages the agent does.
        const l = await request(s.base, 'GET', `/browsers/${b.session_id}`, { key: s.key });
        eq(l.status, 200, `the session: ${l.text}`);

        // A screenshot is of the session's viewport.
        const shot = await mcp.call('browser_take_screenshot', { type: 'png', scale: 'css' });
        eq(shot.images.length, 1, `one image: ${shot}`);
        eq(imageSize(shot.images[0]).join('x'), '800x600', 'the screenshot is the session\'s viewport');
        const jpeg = await mcp.call('browser_take_screenshot', { type: 'jpeg', scale: 'device' });
        eq(imageSize(jpeg.images[0]).join('x'), '800x600', 'a device-scale jpeg too (device scale factor 1)');

        // about:blank, then close: the agent's tabs are gone, the browser is not.
        await mcp.call('browser_navigate', { url: 'about:blank' });
        await mcp.call('browser_close');
      } finally { await mcp.stop(); }

      // The session outlives browser_close and the MCP server's end.
      const g = await request(s.base, 'GET', `/browsers/${b.session_id}`, { key: s.key });
      eq(g.status, 200, `the session after the MCP server ended: ${g.text}`);
      const again = await startMcp(b.cdp_ws_url, out);
      try {
        await again.call('browser_navigate', { url: `${st.url}/second` });
        assert(/Page Title: second/.test(await again.call('browser_snapshot')), 'a second MCP server drives the session');
      } finally { await again.stop(); }
      await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key });
    }),
  },
  {
    name: 'issue 31 (real clients): @playwright/mcp on a headful 1024x700 session: a window.open popup and a new tab appear in browser_tabs, the window covers the 1024x700 screen and the screenshot is the page\'s part of it; after the MCP server is killed the session is listed and a second MCP server sees the same page; DELETE of the session makes its next call fail, not hang',
    timeout: 150000,
    fn: () => withServer(async (s, st, out) => {
      const b = await create(s, { headless: false, viewport: { width: 1024, height: 700 } });
      const mcp = await startMcp(b.cdp_ws_url, out);
      try {
        await mcp.call('browser_navigate', { url: `${st.url}/popup` });
        const snap = await mcp.call('browser_snapshot');
        await mcp.call('browser_click', { element: 'pop button', target: refOf(snap, 'button', 'pop') });
        await waitFor(async () => {
          const tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
          return tabs.length === 2 && tabs[1].title === 'second';
        }, 'the popup in the tab list', 20000, 200);
        await mcp.call('browser_tabs', { action: 'select', index: 1 });
        assert(/the second page/.test(await mcp.call('browser_snapshot')), 'the popup\'s page');
        await mcp.call('browser_tabs', { action: 'close' });
        await mcp.call('browser_tabs', { action: 'new', url: `${st.url}/second` });
        let tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
        eq(tabs.map((t) => t.title).join(','), 'opener,second', `the tabs: ${JSON.stringify(tabs)}`);
        await mcp.call('browser_tabs', { action: 'close', index: 1 });
        tabs = tabsOf(await mcp.call('browser_tabs', { action: 'list' }));
        eq(tabs.length, 1, `one tab left: ${JSON.stringify(tabs)}`);
        // Headful, the viewport is the screen (the browser's window, its tab
        // strip and toolbar included, SESSION_API.md): the page's screenshot
        // is the part of it the page has, which the page itself reports.
        const shot = await mcp.call('browser_take_screenshot', { type: 'png', scale: 'css' });
        const seen = JSON.parse(/\[[^\]]*\]/.exec(await mcp.call('browser_evaluate',
          { function: '() => [screen.width, screen.height, outerWidth, outerHeight, innerWidth, innerHeight]' }))[0]);
        eq(seen.slice(0, 4).join('x'), '1024x700x1024x700', 'the screen is the session\'s viewport and the window covers it');
        eq(imageSize(shot.images[0]).join('x'), seen.slice(4).join('x'), 'the screenshot is the page\'s part of the window');
        assert(seen[4] === 1024 && seen[5] < 700 && seen[5] > 500, `the page fills the window below its toolbar: ${seen}`);
        await mcp.call('browser_navigate', { url: `${st.url}/` });
      } finally { await mcp.stop(); }

      const l = await request(s.base, 'GET', '/browsers', { key: s.key });
      eq(l.status, 200, `list: ${l.text}`);
      assert(l.json.some((x) => x.session_id === b.session_id), `the session is still listed: ${l.text}`);
      const again = await startMcp(b.cdp_ws_url, out);
      try {
        const tabs = tabsOf(await again.call('browser_tabs', { action: 'list' }));
        eq(tabs.map((t) => t.title).join(','), 'home', `the second MCP server sees the same page: ${JSON.stringify(tabs)}`);
        assert(/Page Title: home/.test(await again.call('browser_snapshot')), 'and its content');
        const d = await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key });
        assert(d.status === 200 || d.status === 204, `delete: ${d.status} ${d.text}`);
        // The next call fails (the browser is gone) within a bound, or the
        // MCP server ends: never a hang.
        const outcome = await Promise.race([
          again.raw('browser_navigate', { url: `${st.url}/second` }, 30000).then(
            (r) => (r.isError ? 'error' : `success: ${JSON.stringify(r.content).slice(0, 300)}`),
            (e) => `error: ${e.message}`),
          new Promise((r) => setTimeout(() => r('hang'), 40000).unref()),
        ]);
        assert(/^error/.test(outcome), `a call after DELETE fails: ${outcome}`);
        const g = await request(s.base, 'GET', `/browsers/${b.session_id}`, { key: s.key });
        eq(g.status, 404, `the session is gone: ${g.text}`);
      } finally { await again.stop(); }
    }),
  },
  {
    name: 'issue 31 (real clients): @playwright/mcp on a headful session: the agent closing its last tab does not end the session (headful Chromium quits with its last window): the next tab opens in a new window; a download by browser_click is listed in fs/downloads',
    timeout: 120000,
    fn: () => withServer(async (s, st, out) => {
      const b = await create(s, { headless: false, viewport: { width: 1024, height: 700 } });
      const mcp = await startMcp(b.cdp_ws_url, out);
      const size = async () => JSON.parse(/\[[^\]]*\]/.exec(await mcp.call('browser_evaluate',
        { function: '() => [screen.width, screen.height, outerWidth, outerHeight, innerWidth, innerHeight]' }))[0]);
      try {
        await mcp.call('browser_navigate', { url: `${st.url}/files` });
        const before = await size();
        // A download, as an agent starts one: a click on the link.
        const snap = await mcp.call('browser_snapshot');
        await mcp.call('browser_click', { element: 'get report link', target: refOf(snap, 'link', 'get report') });
        const dl = await waitFor(async () => {
          const r = await request(s.base, 'GET', `/browsers/${b.session_id}/fs/downloads`, { key: s.key });
          eq(r.status, 200, `downloads: ${r.text}`);
          return r.json.downloads.find((d) => d.complete && d.size === REPORT.length) || null;
        }, 'the download in fs/downloads', 20000, 200);
        assert(dl.path.startsWith('/'), `a path in the session: ${JSON.stringify(dl)}`);

        // The agent closes its only tab. A DevTools client of its own
        // watches the browser: on the old binary it quit (and the session
        // ended) within a second or two of its last window closing.
        const { default: WebSocket } = await import('ws');
        const watch = new WebSocket(b.cdp_ws_url);
        await new Promise((r, j) => { watch.once('open', r); watch.once('error', j); });
        const gone = new Promise((r) => watch.once('close', () => r('the browser went away')));
        const closed = await mcp.call('browser_tabs', { action: 'close' });
        assert(/No open tabs/.test(closed), `no tab left: ${closed}`);
        const seen = await Promise.race([gone, new Promise((r) => setTimeout(() => r('alive'), 5000).unref())]);
        watch.close();
        eq(seen, 'alive', 'the browser outlives its last tab (watched for 5 s)');
        const g = await request(s.base, 'GET', `/browsers/${b.session_id}`, { key: s.key });
        eq(g.status, 200, `the session outlives its last tab: ${g.text}`);
        // The next navigation opens a tab (in a new window) and works, on the same screen.
        await mcp.call('browser_navigate', { url: `${st.url}/second` });
        assert(/Page Title: second/.test(await mcp.call('browser_snapshot')), 'a new tab after the last one closed');
        eq((await size()).slice(0, 2).join('x'), before.slice(0, 2).join('x'), 'the same screen');
      } finally { await mcp.stop(); }
      const g = await request(s.base, 'GET', `/browsers/${b.session_id}`, { key: s.key });
      eq(g.status, 200, `the session after the MCP server ended: ${g.text}`);
      await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key });
    }),
  },
  {
    name: 'issue 31 (real clients): two @playwright/mcp servers on one session at once (one on cdp_ws_url, one on its http discovery form /browser/cdp/<token>) share its tabs; each drives its own tab (a click in the tab it brought to front, an evaluate in the background at the same time), and killing one leaves the other working',
    timeout: 120000,
    fn: () => withServer(async (s, st, out) => {
      const b = await create(s, { headless: true, viewport: { width: 800, height: 600 } });
      const tok = new URL(b.cdp_ws_url).searchParams.get('jwt');
      const one = await startMcp(b.cdp_ws_url, out);
      let two;
      try {
        two = await startMcp(`${s.base}/browser/cdp/${tok}`, out);
        await one.call('browser_navigate', { url: `${st.url}/` });
        await two.call('browser_tabs', { action: 'new', url: `${st.url}/second` });
        // Each sees both tabs; each has its own current one.
        const a = tabsOf(await one.call('browser_tabs', { action: 'list' }));
        const c = tabsOf(await two.call('browser_tabs', { action: 'list' }));
        eq(a.map((t) => t.title).join(','), 'home,second', `the first server's tabs: ${JSON.stringify(a)}`);
        eq(c.map((t) => t.title).join(','), 'home,second', `the second server's tabs: ${JSON.stringify(c)}`);
        assert(a[0].current && c[1].current, `each its own current tab: ${JSON.stringify([a, c])}`);
        // Both act at once on their own tabs. A click needs its tab in front
        // (a background tab is hidden and does not paint, in any Chromium:
        // the same with a plain local one), so the first selects its tab; an
        // evaluate works in the background.
        await one.call('browser_tabs', { action: 'select', index: 0 });
        const snap = await one.call('browser_snapshot');
        await Promise.all([
          one.call('browser_click', { element: 'press me button', target: refOf(snap, 'button', 'press me') }),
          two.call('browser_evaluate', { function: '() => { document.title = "renamed"; return 1; }' }),
        ]);
        assert(/button "pressed 1"/.test(await one.call('browser_snapshot')), 'the first server\'s click');
        assert(/Page Title: renamed/.test(await two.call('browser_snapshot')), 'the second server\'s evaluate');
        await one.stop();
        // The other one goes on.
        await two.call('browser_navigate', { url: `${st.url}/popup` });
        const t = tabsOf(await two.call('browser_tabs', { action: 'list' }));
        eq(t.map((x) => x.title).join(','), 'home,opener', `after the first server ended: ${JSON.stringify(t)}`);
      } finally { await one.stop(); if (two) await two.stop(); }
      await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key });
    }),
  },
  {
    name: 'issue 31 (real clients): @playwright/mcp on a headful kiosk session (1024x700): the page is the whole screen, so browser_take_screenshot is exactly the viewport (Chromium made a window of the screen\'s size 1 pixel smaller each way)',
    timeout: 90000,
    fn: () => withServer(async (s, st, out) => {
      const b = await create(s, { headless: false, kiosk_mode: true, viewport: { width: 1024, height: 700 } });
      const mcp = await startMcp(b.cdp_ws_url, out);
      try {
        await mcp.call('browser_navigate', { url: `${st.url}/` });
        const shot = await mcp.call('browser_take_screenshot', { type: 'png', scale: 'css' });
        eq(imageSize(shot.images[0]).join('x'), '1024x700', 'the screenshot is the session\'s viewport');
        const seen = await mcp.call('browser_evaluate', { function: '() => [outerWidth, outerHeight, innerWidth, innerHeight].join("x")' });
        assert(seen.includes('"1024x700x1024x700"'), `the window and the page are the screen: ${seen}`);
      } finally { await mcp.stop(); }
      await request(s.base, 'DELETE', `/browsers/${b.session_id}`, { key: s.key });
    }),
  },
];
