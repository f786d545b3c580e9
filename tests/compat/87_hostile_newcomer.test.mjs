// Issue h7.1: several tenants together cannot starve the others. Every share
// of a server-wide cap (core/share.h) keeps its last units for organizations
// holding none (LIM_SHARE_RESERVE_DIV): eight organizations each at their
// share of search provider calls in flight (LIM_SEARCH_INFLIGHT_PER_ORG 4 of
// LIM_SEARCH_INFLIGHT 32) once filled the cap and refused a ninth; now the
// ninth still searches. A fake SearXNG on loopback holds every "hang" query
// until released.
import { startServer, startSearchProvider, request, assert, eq, isError, newOrg, waitFor } from '../blackbox/lib.mjs';

const ORGS = 8;
const PER_ORG = 4;

export const tests = [
  {
    name: 'issue h7.1: eight organizations each holding their share of search provider calls leave the newcomer reserve: a ninth organization still searches; the others past it get 429 with Retry-After',
    timeout: 60000,
    fn: async () => {
      const up = await startSearchProvider({ hold: 'hang' });
      const { held, release } = up;
      const providers = [{ name: 'slow', protocol: 'searxng', endpoint: `${up.url}/` }];
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: 'adm', BROWSERD_SEARCH_PROVIDERS: JSON.stringify(providers) } });
      const search = (key, query) => request(s.base, 'POST', '/search', { key, body: { query, timeout_ms: 50000 } });
      try {
        const orgs = [];
        for (let i = 0; i < ORGS + 1; i++) orgs.push(await newOrg(s, 'adm', { name: `tenant-${i}` }));
        const fresh = orgs.pop();
        const answered = [];
        const calls = [];
        for (const o of orgs) {
          for (let j = 0; j < PER_ORG; j++) calls.push(search(o.key, 'hang').then((r) => { answered.push(r); return r; }, (e) => ({ status: 0, text: String(e) })));
        }
        // Every call is either held by the provider or already refused.
        await waitFor(() => held.length + answered.length === ORGS * PER_ORG, 'every hostile call held or refused', 30000);
        const r = await search(fresh.key, 'x');
        eq(r.status, 200, `a ninth organization searches while ${held.length} calls are held: ${r.text}`);
        assert(answered.length > 0, `the organizations holding units were refused past the reserve (${held.length} held)`);
        for (const x of answered) {
          isError(x, 429, 'rate_limited');
          assert(Number(x.headers['retry-after']) >= 1, `Retry-After ${x.headers['retry-after']}`);
          assert(/kept for organizations holding none/.test(x.json.message), `the message names the reserve: ${x.json.message}`);
        }
        release();
        for (const c of await Promise.all(calls)) assert(c.status === 200 || c.status === 429, c.text);
      } finally { release(); await s.stop(); s.cleanup(); up.close(); }
    },
  },
];
