// Tenant fairness: the disk that stored telemetry events take
// (docs/telemetry.md "Persistence and retention", limits.h
// LIM_TELEMETRY_ORG_STORED_BYTES). Events were kept for the retention
// (7 days) whatever their volume: a page logging to the console in a loop
// stored about 15 MB a second on the server's disk. Now an organization's
// stored events are capped (BROWSERD_TELEMETRY_ORG_MB lowers the cap for this
// test to 1 MiB): past it its oldest events are deleted, its newest are
// kept, and another organization's events are all kept.
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor, newOrg, assertStartRefused } from '../blackbox/lib.mjs';

const ADMIN = 'telemetry-disk-admin';
const MiB = 1024 * 1024;
const api = (s, method, path, body, key) => request(s.base, method, path, { key, body });

const otherOrg = async (s) => (await newOrg(s, ADMIN, { name: 'bystander', plan: 'enterprise' })).key;

// A session with console telemetry whose page logs n lines of `size` bytes,
// the last one "last-<tag>"; waits until that line is stored. Returns the
// session's id.
async function logLines(s, site, key, n, size, tag) {
  const c = await api(s, 'POST', '/browsers', { headless: true, telemetry: { browser: { console: { enabled: true } } } }, key);
  eq(c.status, 200, `create: ${c.text}`);
  const browser = await chromium.connectOverCDP(c.json.cdp_ws_url);
  try {
    const ctx = browser.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.goto(site.url);
    await page.evaluate(([n, size, tag]) => {
      for (let i = 0; i < n - 1; i++) console.log(`${i} ${'x'.repeat(size)}`);
      console.log(`last-${tag}`);
    }, [n, size, tag]);
  } finally {
    await browser.close().catch(() => {});
  }
  const sid = c.json.session_id;
  await waitFor(async () => {
    const r = await api(s, 'GET', `/browsers/${sid}/telemetry/events?category=console&order=desc&limit=1&offset=0`, undefined, key);
    return r.status === 200 && r.json.length === 1 && JSON.stringify(r.json[0]).includes(`last-${tag}`);
  }, `the last line of ${tag} is stored`, 90000);
  return sid;
}

// The events stored for a session: how many, and their bytes as listed.
async function stored(s, key, sid) {
  let n = 0, bytes = 0;
  for (let off = 0; ; off += 100) {
    const r = await api(s, 'GET', `/browsers/${sid}/telemetry/events?category=console&limit=100&offset=${off}`, undefined, key);
    eq(r.status, 200, r.text);
    n += r.json.length;
    bytes += r.json.reduce((a, e) => a + JSON.stringify(e.event).length, 0);
    if (r.json.length < 100) return { n, bytes };
  }
}

export const tests = [
  {
    name: 'tenant fairness (disk): an organization\'s stored telemetry events are capped; past the cap its oldest events are deleted and its newest kept, and another organization keeps every event',
    timeout: 240000,
    fn: async () => {
      const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<title>log</title>'); });
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, BROWSERD_TELEMETRY_ORG_MB: '1' }, args: site.allow });
      try {
        // 2500 lines of 2 KB: about 5 MB of events from one organization.
        const flood = await logLines(s, site, s.key, 2500, 2000, 'flood');
        const f = await stored(s, s.key, flood);
        assert(f.bytes <= 1.1 * MiB, `the flooding organization keeps about its 1 MiB share: ${f.bytes} bytes in ${f.n} events`);
        assert(f.n >= 100, `its newest events are kept: ${f.n}`);
        const other = await otherOrg(s);
        const calm = await logLines(s, site, other, 50, 100, 'calm');
        eq((await stored(s, other, calm)).n, 50, 'every event of the other organization is stored');
      } finally {
        await s.stop();
        s.cleanup();
        site.close();
      }
    },
  },
  {
    name: 'tenant fairness (disk): BROWSERD_TELEMETRY_ORG_MB may only lower the share (0, 2049 or not an integer stops the server at start, naming it)',
    fn: async () => assertStartRefused('BROWSERD_TELEMETRY_ORG_MB', ['0', '2049', 'x']),
  },
];
