// Shares no test had tried to take yet (docs/sandbox.md "Tenant fairness"):
// one organization's render searches (LIM_SEARCH_RENDER_INFLIGHT_PER_ORG)
// and the custom WebMCP tool sources the server holds
// (LIM_WEBMCP_SOURCE_BYTES_*, lowered with BROWSERD_WEBMCP_SOURCE_MB so a
// handful of sessions fill it). A hostile organization holds what it can;
// another organization is still served.
import { assertStartRefused, withServer, startSearchProvider, startHeldPages, createSession, deleteSession, request, assert, eq, isError, waitFor, newOrg } from '../blackbox/lib.mjs';

const ADMIN = 'redteam-shares-admin';

// /hold* pages are held (never finish loading) until release(); /page answers.
const pages = () => startHeldPages((rq, rs) => {
  rs.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  rs.end('<!doctype html><title>P</title><p>Served page</p>');
});

const render = (s, key, id, url, timeout_ms = 30000) => request(s.base, 'POST', '/search', {
  key,
  body: { query: `urls:${url}`, content: { source: 'browser', browser: { browser_id: id, mode: 'render' }, format: 'text', timeout_ms } },
});

// A page-backed custom tool source of exactly `bytes` bytes (a string
// literal of padding inside the expression).
function source(name, bytes) {
  const head = '(() => { const pad = "';
  const tail = `"; return [{ kind: 'page', match: { url_patterns: ['http://127.0.0.1:*/*'] }, tool: { name: ${JSON.stringify(name)}, description: 'padding' }, execute: async () => pad.length }]; })()`;
  return head + 'a'.repeat(bytes - head.length - tail.length) + tail;
}
const addCustom = (s, key, id, ns, bytes) =>
  request(s.base, 'POST', `/browsers/${id}/webmcp/custom-tools`, { key, body: { namespace: ns, source: source(ns, bytes) } });

export const tests = [
  {
    name: 'redteam shares: render searches in flight are a per-organization share (LIM_SEARCH_RENDER_INFLIGHT_PER_ORG 4): an organization whose two sessions hold two never-finishing renders each is refused a fifth in a third session with 429, Retry-After and a message naming the organization\'s share, while another organization\'s render is served; the units come back when the pages end',
    timeout: 180000,
    fn: async () => {
      const pg = await pages();
      const pv = await startSearchProvider();
      try {
        await withServer({
          args: [...pg.allow, '--admin-token', ADMIN],
          env: { BROWSERD_SEARCH_PROVIDERS: JSON.stringify([{ name: 'fake', protocol: 'searxng', endpoint: pv.url }]) },
        }, async (s) => {
          const a1 = await createSession(s), a2 = await createSession(s), a3 = await createSession(s);
          const other = await newOrg(s, ADMIN, { name: 'other-93' });
          const b = await createSession(s, {}, other.key);
          const holding = [a1, a1, a2, a2].map((id, i) => render(s, s.key, id, `${pg.url}/hold${i}`));
          await waitFor(() => pg.held.length >= 4, 'four pages held by the organization\'s render searches', 90000);
          const r = await render(s, s.key, a3, `${pg.url}/page`);
          isError(r, 429, 'rate_limited');
          assert(Number(r.headers['retry-after']) > 0, `Retry-After: ${r.headers['retry-after']}`);
          assert(/organization/.test(r.json.message) && /render/.test(r.json.message), `names the organization's render share: ${r.text}`);
          const o = await render(s, other.key, b, `${pg.url}/page`);
          eq(o.status, 200, `another organization is served: ${o.text.slice(0, 300)}`);
          eq([o.json.results[0].content.status, o.json.results[0].content.method], ['ok', 'browser_render'], JSON.stringify(o.json.results[0].content));
          assert(o.json.results[0].content.text.includes('Served page'), o.text.slice(0, 300));
          pg.release();
          const done = await Promise.all(holding);
          eq(done.map((x) => x.status), [200, 200, 200, 200], done.map((x) => x.text.slice(0, 200)).join(' '));
          const again = await render(s, s.key, a3, `${pg.url}/page`);
          eq([again.status, again.json.results[0].content.status], [200, 'ok'], again.text.slice(0, 300));
        });
      } finally {
        pg.close(); pv.close();
      }
    },
  },
  {
    name: 'redteam shares: custom WebMCP tool sources held by the server (BROWSERD_WEBMCP_SOURCE_MB 5: the server 5,000,000 bytes, an organization a fifth): one organization cannot take the server\'s budget alone (its second session is refused by the organization\'s share, 429 naming source and the organization, while the server has room); five organizations fill it and a sixth is refused 429 naming source and the server with Retry-After, then served once another organization deletes its tool',
    timeout: 180000,
    fn: async () => {
      await withServer({ args: ['--admin-token', ADMIN], env: { BROWSERD_WEBMCP_SOURCE_MB: '5' } }, async (s) => {
        const SIZE = 900000;
        // The first organization: one session holds 0.9 MB; a second session
        // of it is refused by the organization's share (1,000,000 bytes).
        const a1 = await createSession(s);
        let r = await addCustom(s, s.key, a1, 'a1', SIZE);
        eq(r.status, 200, `the first organization's first source: ${r.text.slice(0, 300)}`);
        const a2 = await createSession(s);
        r = await addCustom(s, s.key, a2, 'a2', SIZE);
        isError(r, 429, 'rate_limited');
        assert(/source/.test(r.json.message) && /organization/.test(r.json.message) && /1000000/.test(r.json.message),
          `the organization's share refuses it first: ${r.text}`);
        assert(Number(r.headers['retry-after']) > 0, `Retry-After: ${r.headers['retry-after']}`);
        await deleteSession(s, a2);
        // Four more organizations each hold 0.9 MB: 4.5 MB of the 5 are held.
        const orgs = [];
        for (let i = 0; i < 4; i++) {
          const o = await newOrg(s, ADMIN, { name: `fill-93-${i}` });
          const id = await createSession(s, {}, o.key);
          r = await addCustom(s, o.key, id, `fill${i}`, SIZE);
          eq(r.status, 200, `organization ${i}'s source: ${r.text.slice(0, 300)}`);
          orgs.push({ ...o, id, tool: r.json.tools[0].id });
        }
        const late = await newOrg(s, ADMIN, { name: 'late-93' });
        const f = await createSession(s, {}, late.key);
        r = await addCustom(s, late.key, f, 'late', SIZE);
        isError(r, 429, 'rate_limited');
        assert(/source/.test(r.json.message) && /server/.test(r.json.message), `the server's budget: ${r.text}`);
        assert(Number(r.headers['retry-after']) > 0, `Retry-After: ${r.headers['retry-after']}`);
        r = await request(s.base, 'DELETE', `/browsers/${orgs[0].id}/webmcp/custom-tools/${orgs[0].tool}`, { key: orgs[0].key });
        eq(r.status, 204, r.text);
        r = await addCustom(s, late.key, f, 'late', SIZE);
        eq(r.status, 200, `served once another organization's source is deleted: ${r.text.slice(0, 300)}`);
      });
    },
  },
  {
    name: 'redteam shares: BROWSERD_WEBMCP_SOURCE_MB can only lower the server\'s source budget: 161, 0 and a non-integer stop the server at start (exit 2) naming the variable',
    timeout: 60000,
    fn: async () => assertStartRefused('BROWSERD_WEBMCP_SOURCE_MB', ['161', '0', 'x']),
  },
];
