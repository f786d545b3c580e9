// Issue 39.1: what an idle session runs (docs/runtime.md, "What an idle
// session runs"). Chromium's network service runs in the browser process
// (NetworkServiceInProcess2) instead of a utility process of its own, and
// what a page does over the network still works: its load through the
// session's egress, a fetch, and cookies (which the network service keeps).
// The GPU process stays: WebGL still draws in a headless session, with no
// shader cache written into the profile (--disable-gpu-shader-disk-cache:
// a sandboxed profile is a tmpfs, memory).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, sessionPids } from '../blackbox/lib.mjs';

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

// The command lines of a session's processes (its cgroup's tasks).
function cmdlines(s, id) {
  const out = [];
  for (const pid of sessionPids(s.dir, id)) {
    try { out.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ')); } catch { /* gone */ }
  }
  return out;
}

// WebGL in the page: a 1x1 clear to red read back.
const WEBGL = `(() => {
  const g = document.createElement('canvas').getContext('webgl');
  if (!g) return 'no webgl context';
  g.clearColor(1, 0, 0, 1); g.clear(g.COLOR_BUFFER_BIT);
  const px = new Uint8Array(4); g.readPixels(0, 0, 1, 1, g.RGBA, g.UNSIGNED_BYTE, px);
  return px.join(',');
})()`;

export const tests = [
  {
    name: 'issue 39.1: an idle session, headless or headful, runs no network service process and writes no GPU shader cache; its page still loads, fetches and keeps cookies, and WebGL draws headless',
    timeout: 120000,
    fn: async () => {
      const w = await startSite((rq, rs) => {
        if (rq.url === '/data') { rs.setHeader('content-type', 'application/json'); return rs.end(JSON.stringify({ cookie: rq.headers.cookie || '' })); }
        rs.setHeader('content-type', 'text/html');
        rs.setHeader('set-cookie', 'k=v; Path=/');
        rs.end('<title>idle</title><h1>idle</h1>');
      });
      const s = await startServer({ args: [...w.allow] });
      try {
        for (const body of [{ headless: true }, { headless: false }]) {
          const r = await api(s, 'POST', '/browsers', body);
          eq(r.status, 200, `create: ${r.text}`);
          const id = r.json.session_id;
          const br = await chromium.connectOverCDP(r.json.cdp_ws_url);
          try {
            const page = br.contexts()[0].pages()[0];
            await page.goto(`${w.url}/`);
            eq(await page.title(), 'idle');
            const got = await page.evaluate(async () => (await fetch('/data')).json());
            eq(got.cookie, 'k=v', 'the cookie set by the page load is sent with the fetch');
            if (body.headless) eq(await page.evaluate(WEBGL), '255,0,0,255', 'WebGL draws');
            // Once a page loaded over the network: the session's processes.
            const procs = cmdlines(s, id);
            assert(procs.some((c) => /--type=renderer/.test(c)), `${JSON.stringify(body)}: the session's processes are found: ${procs.join('\n')}`);
            const net = procs.filter((c) => /network\.mojom\.NetworkService/.test(c));
            eq(net.length, 0, `${JSON.stringify(body)}: a network service process runs: ${net.join('\n')}`);
            for (const cache of ['Default/GPUCache', 'Default/DawnGraphiteCache', 'Default/DawnWebGPUCache']) {
              assert(!existsSync(join(s.dir, 'sessions', id, cache)), `${JSON.stringify(body)}: the profile has ${cache}`);
            }
          } finally { await br.close(); }
          eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204);
        }
      } finally { await s.stop(); s.cleanup(); w.close(); }
    },
  },
];
