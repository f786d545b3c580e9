// Memory pressure inside a session (issue 30.6, docs/sandbox.md "Memory
// pressure inside a session"): a page that fills its session's memory limit
// while the host's page cache is under pressure (withLoad) must end in a
// prompt out-of-memory kill inside that session, reported as a `system`
// telemetry event, not in minutes of the kernel reclaiming and re-reading
// the session's pages while every tenant slows down. Outcomes only: the page
// is killed, the event is there, the session and another organization's
// session still answer. Every byte the test allocates is allocated by pages
// inside the session, whose 1 GiB limit is the cap.
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor, withLoad, newOrg } from '../blackbox/lib.mjs';

const ADMIN = 'thrash-admin-token';
const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body, key) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body }, key);
  eq(r.status, 200, `create session: ${r.text}`);
  return r.json;
}

// A page whose workers allocate and touch ArrayBuffers, 8 MiB at a time,
// keeping every one reachable, until the page is killed.
const HOG = `<title>hog</title><script>
const src = 'const keep = []; (function step() { const b = new Uint8Array(8 << 20); for (let i = 0; i < b.length; i += 4096) b[i] = 1; keep.push(b); setTimeout(step, 20); })();';
window.workers = [0, 1].map(() => new Worker(URL.createObjectURL(new Blob([src]))));
</script>`;

// The session's telemetry events of category system.
async function systemEvents(s, id) {
  const r = await api(s, 'GET', `/browsers/${id}/telemetry/events`);
  const list = (r.json && (r.json.events || r.json.data || r.json)) || [];
  return (Array.isArray(list) ? list : []).map((e) => e.event || e).filter((e) => e.category === 'system');
}

// A fresh page of the session's browser evaluates 6 * 7.
async function answers(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url, { timeout: 30000 });
  try {
    const pg = await br.contexts()[0].newPage();
    return await pg.evaluate(() => 6 * 7);
  } finally { await br.close().catch(() => {}); }
}

export const tests = [
  {
    name: 'issue 30.6: a page that fills its 1GiB session\'s memory on a host whose page cache is under pressure is killed inside the session (the page crashes, a system_oom_kill event), and the session and another organization\'s session still answer',
    timeout: 120000,
    fn: async () => {
      const w = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end(rq.url.startsWith('/hog') ? HOG : '<title>x</title>'); });
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN }, args: w.allow });
      try {
        const other = await newOrg(s, ADMIN, { name: 'neighbour', plan: 'enterprise' });
        const hog = await create(s, { memory: '1GiB', telemetry: { enabled: true } });
        const neighbour = await create(s, {}, other.key);
        await withLoad(async () => {
          const br = await chromium.connectOverCDP(hog.cdp_ws_url);
          try {
            const ctx = br.contexts()[0];
            let crashed = 0;
            for (let i = 0; i < 3; i++) {
              const pg = await ctx.newPage();
              pg.on('crash', () => { crashed++; });
              await pg.goto(`${w.url}/hog${i}`);
            }
            await waitFor(() => crashed > 0, 'a page of the session killed', 60000, 250);
            for (const pg of ctx.pages()) await pg.close().catch(() => {});
          } finally { await br.close().catch(() => {}); }
        });
        const ev = await waitFor(async () => (await systemEvents(s, hog.session_id)).find((e) => e.type === 'system_oom_kill'), 'a system_oom_kill event', 30000, 250);
        assert(ev.data && (ev.data.pid > 0 || ev.data.process_name), `the event names the killed process: ${JSON.stringify(ev)}`);
        const rec = await api(s, 'GET', `/browsers/${hog.session_id}`);
        eq(rec.status, 200, `the session is still live: ${rec.text}`);
        eq(await answers(hog), 42, 'the session answers');
        eq(await answers(neighbour), 42, 'the other organization\'s session answers');
      } finally { await s.stop(); s.cleanup(); w.close(); }
    },
  },
];
