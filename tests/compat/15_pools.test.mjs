// Browser pools on real Chromium (issue 5; interface document: GET and PATCH
// /browser_pools/{id_or_name}; KERNEL_API.md: create, list, delete, acquire,
// release, flush).
import http from 'node:http';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, isError, waitFor, runningSessions } from '../blackbox/lib.mjs';

async function withServer(fn, opts) {
  const s = await startServer(opts);
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

const until = (fn, what, ms = 30000) => waitFor(fn, what, ms, 150);

async function makePool(s, body) {
  const r = await api(s, 'POST', '/browser_pools', { headless: true, fill_rate_per_minute: 6000, ...body });
  eq(r.status, 200, `create pool: ${r.text}`);
  return r.json;
}

const poolGet = async (s, id) => (await api(s, 'GET', `/browser_pools/${id}`)).json;
const filled = (s, id, n) => until(async () => (await poolGet(s, id)).available_count === n, `${n} available in ${id}`);

// The sessions of this server with processes running (lib.mjs).
const running = runningSessions;

export const tests = [
  {
    name: 'GET /browser_pools/{id_or_name}: the record (id, name, region, created_at, counts, browser_pool_config as configured, extension_ids [], profile_id omitted)',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { name: 'rec', size: 1, viewport: { width: 1280, height: 800 } });
      for (const id of [p.id, 'rec']) {
        const g = await api(s, 'GET', `/browser_pools/${id}`);
        eq(g.status, 200, g.text);
        eq(g.json.id, p.id); eq(g.json.name, 'rec'); eq(g.json.region, 'us-east');
        assert(!Number.isNaN(Date.parse(g.json.created_at)), 'created_at');
        eq(typeof g.json.acquired_count, 'number'); eq(typeof g.json.available_count, 'number');
        eq(g.json.browser_pool_config.size, 1);
        eq(g.json.browser_pool_config.viewport, { width: 1280, height: 800 });
        eq(g.json.extension_ids, []);
        assert(!('profile_id' in g.json), 'profile_id omitted when no profile');
      }
      isError(await api(s, 'GET', '/browser_pools/nope'), 404, 'not_found');
      const l = await api(s, 'GET', '/browser_pools?name=rec');
      eq(l.json.map((x) => x.id), [p.id]);
      eq(l.headers['x-has-more'], 'false');
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
    }),
  },
  {
    name: 'pool record: profile_id is the resolved profile ID (the config echoes the selector as sent); an unknown profile is 404 at create',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const prof = (await api(s, 'POST', '/profiles', { name: 'pp' })).json;
      const p = await makePool(s, { size: 1, fill_rate_per_minute: 0, profile: { name: 'pp' } });
      eq(p.profile_id, prof.id, 'resolved from a name selector');
      eq(p.browser_pool_config.profile, { name: 'pp' }, 'selector echoed as sent');
      isError(await api(s, 'POST', '/browser_pools', { size: 1, profile: { name: 'nope' } }), 404);
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
    }),
  },
  {
    name: 'filler: a pool of 3 fills to 3 at its rate; counts in GET always equal the browsers that run',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { size: 3 });
      await filled(s, p.id, 3);
      const g = await poolGet(s, p.id);
      eq(g.acquired_count + g.available_count, 3);
      eq(running(s.dir).size, 3, 'three Chromium processes run for the pool');
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`)).status, 204);
      await until(() => running(s.dir).size === 0, 'pool browsers stopped after delete');
    }),
  },
  {
    name: 'filler: fill_rate_per_minute 0 means the pool does not refill; a slow rate warms one browser at a time',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { size: 3, fill_rate_per_minute: 0 });
      await filled(s, p.id, 1); // the first browser starts at once
      await new Promise((r) => setTimeout(r, 1500));
      eq((await poolGet(s, p.id)).available_count, 1, 'rate 0: no further browsers');
      const r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
      eq(r.status, 200);
      const w = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
      eq(w.status, 204, 'rate 0: the default wait is 0, so an empty pool answers 204 at once');
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
    }),
  },
  {
    name: 'acquire: three browsers handed over at once with pool set; the fourth waits and gets 204 at its timeout, and gets a browser released meanwhile',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { name: 'acq', size: 3 });
      await filled(s, p.id, 3);
      const got = [];
      for (let i = 0; i < 3; i++) {
        const r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
        eq(r.status, 200, r.text);
        eq(r.json.pool, { id: p.id, name: 'acq' });
        got.push(r.json.session_id);
      }
      eq(new Set(got).size, 3);
      const g = await poolGet(s, p.id);
      eq([g.acquired_count, g.available_count], [3, 0]);
      const t0 = Date.now();
      const empty = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, { acquire_timeout_seconds: 1 });
      eq(empty.status, 204, 'the wait ends empty');
      assert(Date.now() - t0 >= 900, 'it waited');
      const parked = (s.log.match(/an acquire waits/g) || []).length;
      const waiting = api(s, 'POST', `/browser_pools/${p.id}/acquire`, { acquire_timeout_seconds: 20 });
      await until(() => (s.log.match(/an acquire waits/g) || []).length > parked, 'the acquire is parked');
      eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: got[0], reuse: true })).status, 204);
      const w = await waiting;
      eq(w.status, 200, w.text);
      eq(w.json.session_id, got[0], 'the released browser goes to the waiter');
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
    }),
  },
  {
    name: 'acquire: 20 concurrent acquirers on a pool of 5 with releases in between never share a browser; waiters served first come, first served',
    timeout: 180000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { size: 5 });
      await filled(s, p.id, 5);
      const holders = new Map();
      let shared = false;
      const worker = async () => {
        const r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, { acquire_timeout_seconds: 60 });
        eq(r.status, 200, r.text);
        const id = r.json.session_id;
        if (holders.has(id)) shared = true;
        holders.set(id, true);
        await new Promise((res) => setTimeout(res, 50));
        holders.delete(id);
        eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: id })).status, 204);
      };
      await Promise.all(Array.from({ length: 20 }, worker));
      assert(!shared, 'a browser was handed to two callers at once');
      const g = await poolGet(s, p.id);
      eq(g.acquired_count, 0);
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`)).status, 204);
    }),
  },
  {
    name: 'release reuse:true: the browser comes back clean (no cookies, one page) and available at once; reuse:false ends it and the filler replaces it',
    timeout: 120000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.setHeader('set-cookie', 'leak=1'); rs.end('<title>x</title>'); });
      const url = `${site.url}/`;
      try { await withServer(async (s) => {
        const p = await makePool(s, { size: 1 });
        await filled(s, p.id, 1);
        let r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
        const id = r.json.session_id;
        let b = await chromium.connectOverCDP(r.json.cdp_ws_url);
        const ctx = b.contexts()[0];
        await (await ctx.newPage()).goto(url);
        await (await ctx.newPage()).goto(url);
        eq((await ctx.cookies()).length, 1, 'cookie set during the lease');
        await b.close();
        eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: id, reuse: true })).status, 204);
        eq((await poolGet(s, p.id)).available_count, 1, 'available at once');
        r = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
        eq(r.json.session_id, id, 'the same browser, reused');
        b = await chromium.connectOverCDP(r.json.cdp_ws_url);
        eq((await b.contexts()[0].cookies()).length, 0, 'no cookies after release');
        const pages = b.contexts()[0].pages();
        eq(pages.length, 1, 'one page');
        eq(pages[0].url(), 'about:blank');
        await b.close();
        eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: id, reuse: false })).status, 204);
        const gone = await api(s, 'GET', `/browsers/${id}?include_deleted=true`);
        assert(gone.json.deleted_at, 'reuse:false ended the browser');
        await filled(s, p.id, 1);
        assert((await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {})).json.session_id !== id, 'replaced by a new browser');
        isError(await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: 'notacquired00000000000000' }), 404);
        isError(await api(s, 'POST', `/browser_pools/${p.id}/release`, {}), 400, 'bad_request');
        eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
      }, { args: site.allow }); } finally { site.close(); }
    },
  },
  {
    name: 'related rule 2: a browser in use while its pool is updated keeps its original configuration; released with reuse it stays stale until discard_all_idle',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { size: 1, viewport: { width: 1024, height: 768 } });
      await filled(s, p.id, 1);
      const a = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
      const width = async (wsurl) => {
        const b = await chromium.connectOverCDP(wsurl);
        try { return await b.contexts()[0].pages()[0].evaluate(() => window.outerWidth); } finally { await b.close(); }
      };
      eq(await width(a.json.cdp_ws_url), 1024);
      const u = await api(s, 'PATCH', `/browser_pools/${p.id}`, { viewport: { width: 1280, height: 800 } });
      eq(u.status, 200, u.text);
      eq(u.json.browser_pool_config.viewport, { width: 1280, height: 800 });
      eq(await width(a.json.cdp_ws_url), 1024, 'the acquired browser keeps its size');
      eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: a.json.session_id })).status, 204);
      let b = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
      eq(b.json.session_id, a.json.session_id);
      eq(await width(b.json.cdp_ws_url), 1024, 'released with reuse: still the stale configuration');
      eq((await api(s, 'POST', `/browser_pools/${p.id}/release`, { session_id: b.json.session_id })).status, 204);
      const d = await api(s, 'PATCH', `/browser_pools/${p.id}`, { discard_all_idle: true });
      eq(d.status, 200);
      await filled(s, p.id, 1);
      b = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
      assert(b.json.session_id !== a.json.session_id, 'discarded and rebuilt');
      eq(await width(b.json.cdp_ws_url), 1280, 'the rebuilt browser has the new configuration');
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
    }),
  },
  {
    name: 'PATCH rows: name ("" no-op), size >= 1, timeout_seconds 10..259200, fill_rate >= 0 without upper bound, start_url <= 2048 ("" clears), viewport not clearable, network {} removes, proxy_routes rejected, profile {} rejected, export rejected',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { name: 'rows', size: 1, start_url: 'about:blank#a' });
      const patch = (body) => api(s, 'PATCH', `/browser_pools/${p.id}`, body);
      eq((await patch({ name: '' })).json.name, 'rows', 'empty name is a no-op');
      eq((await patch({ name: 'rows2' })).json.name, 'rows2');
      isError(await patch({ name: 'bad name' }), 400, 'bad_request');
      isError(await patch({ size: 0 }), 400);
      isError(await patch({ timeout_seconds: 9 }), 400);
      isError(await patch({ timeout_seconds: 259201 }), 400);
      eq((await patch({ timeout_seconds: 259200 })).json.browser_pool_config.timeout_seconds, 259200);
      eq((await patch({ fill_rate_per_minute: 500 })).json.browser_pool_config.fill_rate_per_minute, 500, 'no upper bound here');
      isError(await patch({ fill_rate_per_minute: -1 }), 400);
      isError(await patch({ start_url: `https://x/${'a'.repeat(2048)}` }), 400);
      assert(!('start_url' in (await patch({ start_url: '' })).json.browser_pool_config), 'empty start_url clears');
      isError(await patch({ viewport: null }), 400);
      eq((await patch({ network: { private_hosts: [] } })).json.browser_pool_config.network, { private_hosts: [] });
      assert(!('network' in (await patch({ network: {} })).json.browser_pool_config), 'network {} removes');
      isError(await patch({ network: { proxy_routes: [{ hosts: ['a.example.com'], proxy: { id: 'x' } }] } }), 400);
      isError(await patch({ profile: {} }), 400);
      isError(await patch({ telemetry: { enabled: true, export: { otlp: { destination: { id: 'd' } } } } }), 400);
      isError(await patch({ bogus: 1 }), 400);
      eq((await patch({ stealth: true, headless: true, kiosk_mode: false })).json.browser_pool_config.stealth, true);
      eq((await patch({ chrome_policy: { BookmarkBarEnabled: false } })).json.browser_pool_config.chrome_policy, { BookmarkBarEnabled: false });
      assert(!Object.keys((await patch({ chrome_policy: {} })).json.browser_pool_config.chrome_policy || {}).length, 'empty object clears');
      const other = await makePool(s, { name: 'taken', size: 1 });
      const c = await patch({ name: 'taken' });
      isError(c, 409); eq(c.headers['x-should-retry'], 'false');
      for (const id of [p.id, other.id]) eq((await api(s, 'DELETE', `/browser_pools/${id}`, { force: true })).status, 204);
    }),
  },
  {
    name: 'flush destroys idle browsers only; delete refuses while leased (409) and force ends them',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const p = await makePool(s, { size: 2 });
      await filled(s, p.id, 2);
      const a = await api(s, 'POST', `/browser_pools/${p.id}/acquire`, {});
      const idle = [...running(s.dir)].filter((id) => id !== a.json.session_id);
      eq((await api(s, 'POST', `/browser_pools/${p.id}/flush`)).status, 204);
      await until(() => !running(s.dir).has(idle[0]), 'idle browser destroyed');
      assert(running(s.dir).has(a.json.session_id), 'the acquired browser survives a flush');
      isError(await api(s, 'DELETE', `/browser_pools/${p.id}`), 409);
      eq((await api(s, 'DELETE', `/browser_pools/${p.id}`, { force: true })).status, 204);
      await until(() => !running(s.dir).has(a.json.session_id), 'forced delete ended the acquired browser');
      isError(await api(s, 'GET', `/browser_pools/${p.id}`), 404);
    }),
  },
  {
    name: 'limits: the sum of pool sizes may not exceed max_concurrent_browsers (403 naming the limit); pools gated by features.browser_pools (403)',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const mk = async (overrides) => {
        const org = (await request(s.base, 'POST', '/admin/orgs', { key: 'adm', body: { name: 'o', overrides } })).json;
        return (await request(s.base, 'POST', `/admin/orgs/${org.id}/api_keys`, { key: 'adm', body: {} })).json.key;
      };
      const k = await mk({ limits: { max_concurrent_browsers: 3 } });
      const p = await api(s, 'POST', '/browser_pools', { size: 2, headless: true, fill_rate_per_minute: 0 }, k);
      eq(p.status, 200, p.text);
      const r = await api(s, 'POST', '/browser_pools', { size: 2, headless: true }, k);
      isError(r, 403);
      assert(/max_concurrent_browsers/.test(r.json.message), r.json.message);
      isError(await api(s, 'PATCH', `/browser_pools/${p.json.id}`, { size: 4 }, k), 403);
      // Pool capacity counts against standalone sessions: 3 - 2 leaves one.
      const one = await api(s, 'POST', '/browsers', { headless: true }, k);
      eq(one.status, 200, one.text);
      isError(await api(s, 'POST', '/browsers', { headless: true }, k), 429, 'rate_limited');
      eq((await api(s, 'DELETE', `/browsers/${one.json.session_id}`, undefined, k)).status, 204);
      eq((await api(s, 'DELETE', `/browser_pools/${p.json.id}`, { force: true }, k)).status, 204);
      const off = await mk({ features: { browser_pools: { enabled: false } } });
      isError(await api(s, 'POST', '/browser_pools', { size: 1 }, off), 403);
      isError(await api(s, 'GET', '/browser_pools', undefined, off), 403);
    }, { args: ['--admin-token', 'adm'] }),
  },
];
