// Issue 40 item 2: the config registry, self-hosted (KERNEL_API_NEWER.md 1.4
// "Config Registry"; docs/config-registry.md). A loopback page that answers
// 403 to a headless browser's user agent ("HeadlessChrome") and 200 to
// others; resolve tries each candidate configuration with a real session,
// classifies each visit, and recommends the admitted configuration, which
// lookup returns and POST /browsers accepts as is. The registry's list with
// its sort and search, another organization's 404, the cap on analyses in
// flight (429), and 400s naming the field. Raw requests: @onkernel/sdk
// 0.84.0 has no config registry methods.
import { startServer, startSite, request, assert, eq, isError, newOrg, deleteSession, waitFor } from '../blackbox/lib.mjs';

// The page: 403 "Access denied" to HeadlessChrome, 200 otherwise; a path
// starting /hold is held until release() (and answered at once after).
async function picky() {
  const seen = [];
  const held = [];
  let holding = true;
  const site = await startSite((rq, rs) => {
    const ua = rq.headers['user-agent'] || '';
    seen.push({ url: rq.url, ua });
    if (rq.url.startsWith('/hold') && holding) { held.push(rs); return; }
    if (ua.includes('HeadlessChrome')) {
      rs.writeHead(403, { 'content-type': 'text/html' });
      return rs.end('<html><body><h1>Access denied</h1></body></html>');
    }
    rs.writeHead(200, { 'content-type': 'text/html' });
    rs.end('<html><body><h1>Welcome, person</h1></body></html>');
  });
  const release = () => { holding = false; for (const rs of held.splice(0)) { rs.writeHead(200); rs.end('<p>late</p>'); } };
  return { ...site, seen, held, release, close: () => { release(); site.close(); } };
}

async function withRegistry(fn, { chromium = true } = {}) {
  const site = await picky();
  const s = await startServer({ args: chromium ? site.allow : [], env: { BROWSERD_ADMIN_TOKEN: 'adm' } });
  try { await fn(s, site); } finally { await s.stop(); s.cleanup(); site.close(); }
}

const post = (s, path, body, key = s.key) => request(s.base, 'POST', path, { key, body });
const get = (s, path, key = s.key) => request(s.base, 'GET', path, { key });

// Waits until analysis id has ended; its record.
async function ended(s, id) {
  return waitFor(async () => {
    const r = await get(s, `/config-registry/analyses/${id}`);
    eq(r.status, 200, r.text);
    return r.json.status !== 'running' && r.json;
  }, `analysis ${id} to end`, 90000, 250);
}

export const tests = [
  {
    name: 'issue 40.2: resolve tries each candidate with a real session and classifies each visit; the recommendation is the admitted configuration, lookup returns it, POST /browsers takes it as is and loads the page; another organization gets 404',
    timeout: 150000,
    fn: () => withRegistry(async (s, site) => {
      const target = `${site.url}/page?x=1#top`;
      const before = await post(s, '/config-registry/lookup', { url: target });
      eq(before.status, 200, before.text);
      eq(before.json.target, { domain: '127.0.0.1', host: '127.0.0.1', normalized: `${site.url}/page` }, 'target');
      eq(before.json.recommendation, null, 'nothing known before an analysis');
      eq(site.seen.length, 0, 'lookup visits nothing');

      const r = await post(s, '/config-registry/resolve', { url: target });
      eq(r.status, 200, r.text);
      assert(/^cra_/.test(r.json.analysis.id), `analysis id ${r.text}`);
      eq(r.json.analysis.status, 'running', 'the analysis runs in the background');
      eq(r.json.target.domain, '127.0.0.1', 'target');
      // A second resolve of the same domain while it runs answers the same analysis.
      const again = await post(s, '/config-registry/resolve', { url: `${site.url}/other` });
      eq(again.status, 200, again.text);
      eq(again.json.analysis.id, r.json.analysis.id, 'one analysis per domain at a time');

      const a = await ended(s, r.json.analysis.id);
      eq(a.status, 'completed', JSON.stringify(a));
      eq(a.failure, null, 'failure');
      assert(a.finished_at, 'finished_at');
      eq(a.attempts.length, 3, `three candidates: ${JSON.stringify(a.attempts)}`);
      const byKind = (h, st) => a.attempts.find((x) => x.browser.headless === h && x.browser.stealth === st);
      const plain = byKind(true, false), stealth = byKind(true, true), headful = byKind(false, true);
      assert(plain && stealth && headful, `headless, headless stealth and headful candidates: ${JSON.stringify(a.attempts)}`);
      eq([plain.outcome, plain.reason, plain.http_status], ['blocked', 'http_403', 403], 'headless Chromium is refused');
      eq([stealth.outcome, stealth.http_status], ['accessed', 200], 'headless with stealth is admitted');
      eq([headful.outcome, headful.http_status], ['accessed', 200], 'headful is admitted');
      assert(a.attempts.every((x) => typeof x.session_id === 'string' && x.proxy.mode === 'direct'), 'each attempt had its session');
      // Each visit was a real browser's request, and each session was deleted.
      assert(site.seen.some((x) => x.ua.includes('HeadlessChrome')) && site.seen.some((x) => !x.ua.includes('HeadlessChrome')), 'browsers visited');
      for (const x of a.attempts) {
        const b = await get(s, `/browsers/${x.session_id}`);
        assert(b.status === 404 || (b.json && b.json.deleted_at), `session ${x.session_id} ended: ${b.text}`);
      }

      const rec = a.recommendation;
      eq(rec.type, 'recommendation', JSON.stringify(rec));
      eq(rec.browser, stealth.browser, 'the first admitted candidate');
      eq(rec.proxy, { mode: 'direct' }, 'proxy');
      eq([rec.evidence.accessed, rec.evidence.blocked, rec.evidence.inconclusive, rec.evidence.run_count], [2, 1, 0, 3], 'evidence');
      eq(rec.verification, 'verified', 'verification');

      const l = await post(s, '/config-registry/lookup', { url: target });
      eq(l.json.recommendation.browser, rec.browser, 'lookup returns it');
      eq(l.json.recommendation.match_scope, 'exact', 'match_scope');
      const l2 = await post(s, '/config-registry/lookup', { url: `${site.url}/elsewhere` });
      eq(l2.json.recommendation.match_scope, 'host', 'another path of the host');

      // The recommendation is a POST /browsers body.
      const b = await post(s, '/browsers', l.json.recommendation.browser);
      eq(b.status, 200, b.text);
      try {
        const c = await post(s, `/browsers/${b.json.session_id}/curl`, { url: `${site.url}/page` });
        eq(c.status, 200, c.text);
        eq(c.json.status, 200, 'the recommended browser is admitted');
        assert(c.json.body.includes('Welcome'), c.json.body);
      } finally { await deleteSession(s, b.json.session_id); }

      const other = await newOrg(s, 'adm', { name: 'other-org' });
      isError(await get(s, `/config-registry/analyses/${a.id}`, other.key), 404, 'not_found');
      eq((await get(s, '/config-registry', other.key)).json, [], 'another org sees no entry');
      eq((await get(s, '/config-registry/analyses', other.key)).json, [], 'nor analyses');
      eq((await post(s, '/config-registry/lookup', { url: target }, other.key)).json.recommendation, null, 'nor a recommendation');
    }),
  },
  {
    name: 'issue 40.2: the registry list sorts by target and success_rate and searches by domain; a target the sessions\' network rules refuse is inconclusive, with no recommendation',
    timeout: 150000,
    fn: () => withRegistry(async (s, site) => {
      // localhost on another port: not in --allow-loopback, the sessions' egress refuses it.
      const refused = 'http://localhost:1/';
      const r1 = await post(s, '/config-registry/resolve', { url: `${site.url}/` });
      const r2 = await post(s, '/config-registry/resolve', { url: refused });
      eq(r1.status, 200, r1.text);
      eq(r2.status, 200, r2.text);
      await ended(s, r1.json.analysis.id);
      const a2 = await ended(s, r2.json.analysis.id);
      assert(a2.attempts.length > 0 && a2.attempts.every((x) => x.outcome === 'inconclusive'), `refused by the egress: ${JSON.stringify(a2.attempts)}`);
      eq([a2.recommendation.type, a2.recommendation.code], ['no_recommendation', 'inconclusive'], 'no recommendation');
      eq((await post(s, '/config-registry/lookup', { url: refused })).json.recommendation, null, 'lookup');

      const list = async (q) => {
        const r = await get(s, `/config-registry${q}`);
        eq(r.status, 200, r.text);
        return r.json.map((e) => e.target.domain);
      };
      eq(await list(''), ['127.0.0.1', 'localhost'], 'by target, ascending by default');
      eq(await list('?sort_by=target&sort_order=desc'), ['localhost', '127.0.0.1'], 'target desc');
      eq(await list('?sort_by=success_rate&sort_order=asc'), ['localhost', '127.0.0.1'], 'success_rate asc');
      eq(await list('?sort_by=success_rate&sort_order=desc'), ['127.0.0.1', 'localhost'], 'success_rate desc');
      eq(await list('?search=LOCAL'), ['localhost'], 'search');
      eq(await list('?limit=1'), ['127.0.0.1'], 'limit');
      const e = (await get(s, '/config-registry?search=127')).json[0];
      eq(e.analysis.status, 'completed', 'entry analysis');
      eq(e.recommended_config, 'headless stealth direct', 'recommended_config');
      assert(Math.abs(e.success_rate - 2 / 3) < 0.01, `success_rate ${e.success_rate}`);
      const an = await get(s, '/config-registry/analyses?search=localhost');
      eq(an.json.map((x) => x.id), [a2.id], 'analyses search');
    }),
  },
  {
    name: 'issue 40.2: analyses in flight are capped per organization (429 with Retry-After); a stopping server ends the running ones',
    timeout: 90000,
    fn: async () => {
      const site = await picky();
      const s = await startServer({ args: site.allow, env: { BROWSERD_ADMIN_TOKEN: 'adm' } });
      let ids = [];
      try {
        // Two analyses whose first visit the page holds: both in flight.
        const a = await post(s, '/config-registry/resolve', { url: `${site.url}/hold` });
        const b = await post(s, '/config-registry/resolve', { url: `http://localhost:${site.hostport.split(':')[1]}/hold` });
        eq([a.status, b.status], [200, 200], `${a.text} ${b.text}`);
        ids = [a.json.analysis.id, b.json.analysis.id];
        const c = await post(s, '/config-registry/resolve', { url: 'http://example.com/' });
        isError(c, 429, 'rate_limited');
        assert(Number(c.headers['retry-after']) > 0, `Retry-After ${c.headers['retry-after']}`);
        // Another organization has its own share.
        const other = await newOrg(s, 'adm', { name: 'other-org' });
        const d = await post(s, '/config-registry/resolve', { url: 'http://127.0.0.1:1/' }, other.key);
        eq(d.status, 200, d.text);
      } finally {
        const stopped = s.stop();
        site.release();
        await stopped;
      }
      // The stop ended both analyses (after their current candidate), as failed.
      const again = await startServer({ dataDir: s.dir, args: site.allow });
      try {
        for (const id of ids) {
          const r = await get(again, `/config-registry/analyses/${id}`);
          eq([r.json.status, r.json.failure && r.json.failure.code], ['failed', 'server_stopping'], r.text);
          assert(r.json.attempts.length < 3, `ended early: ${r.text}`);
        }
      } finally { await again.stop(); again.cleanup(); site.close(); }
    },
  },
  {
    name: 'issue 40.2: bad input is a 400 naming the field (url, allowed_proxy_countries, sort_by, sort_order); targets are normalized to the registrable domain; allowed countries no proxy serves are proxy_restricted',
    timeout: 30000,
    fn: () => withRegistry(async (s) => {
      const bad = async (path, body, field) => {
        const r = await post(s, path, body);
        eq(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert(r.text.includes(field), `${JSON.stringify(body)} names ${field}: ${r.text}`);
      };
      for (const path of ['/config-registry/lookup', '/config-registry/resolve']) {
        await bad(path, {}, 'url');
        await bad(path, { url: 5 }, 'url');
        await bad(path, { url: 'ftp://example.com/' }, 'url');
        await bad(path, { url: 'http://user:pw@example.com/' }, 'url');
        await bad(path, { url: `http://example.com/${'a'.repeat(3000)}` }, 'url');
        await bad(path, { url: 'http://example.com/', allowed_proxy_countries: 'US' }, 'allowed_proxy_countries');
        await bad(path, { url: 'http://example.com/', allowed_proxy_countries: ['usa'] }, 'allowed_proxy_countries');
      }
      const q = async (query, field) => {
        const r = await get(s, `/config-registry${query}`);
        eq(r.status, 400, r.text);
        assert(r.text.includes(field), `${query} names ${field}: ${r.text}`);
      };
      await q('?sort_by=size', 'sort_by');
      await q('?sort_order=up', 'sort_order');
      isError(await get(s, '/config-registry/analyses/cra_nosuch'), 404, 'not_found');
      const n = await post(s, '/config-registry/lookup', { url: 'HTTPS://WWW.Shop.Example.co.uk:443/a/b?q=1#f' });
      eq(n.json.target, { domain: 'example.co.uk', host: 'www.shop.example.co.uk', normalized: 'https://www.shop.example.co.uk/a/b' }, 'normalized');
      const p = await post(s, '/config-registry/resolve', { url: 'https://example.com/', allowed_proxy_countries: ['DE'] });
      eq(p.status, 200, p.text);
      eq(p.json.analysis, null, 'no analysis');
      eq([p.json.recommendation.type, p.json.recommendation.code], ['no_recommendation', 'proxy_restricted'], 'proxy_restricted');
    }, { chromium: false }),
  },
];
