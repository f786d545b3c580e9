// Issue 33 item 7: "every authenticated call that changes something is an
// audit entry". Every route the binary serves (`browserd --routes`) whose
// method changes something is called once with valid credentials and a body
// no handler accepts (so nothing is created and no browser starts), and
// each route's pattern must then be in the audit log: a key's calls in the
// organization's log, the admin token's in the operator's. A route added
// without its entry fails here by name. No Chromium.
import { execFileSync } from 'node:child_process';
import { BIN, withServer, request, assert, eq } from './lib.mjs';

const ADMIN = 'admin-token-for-every-route';
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const WINDOW = () => `start=${encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}` +
  `&end=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString())}`;

function mutatingRoutes() {
  return execFileSync(BIN, ['--routes'], { encoding: 'utf8' }).trim().split('\n')
    .map((l) => { const [method, pattern, auth] = l.split(' '); return { method, pattern, auth }; })
    .filter((r) => MUTATING.has(r.method) && r.auth !== 'none');
}

// Every entry of a log, following X-Next-Page-Token.
async function allEntries(s, path, headers) {
  const out = [];
  let token = '';
  for (let page = 0; page < 100; page++) {
    const r = await request(s.base, 'GET', `${path}?${WINDOW()}&limit=100${token ? `&page_token=${encodeURIComponent(token)}` : ''}`, { headers });
    eq(r.status, 200, `${path}: ${r.text.slice(0, 300)}`);
    out.push(...r.json);
    token = r.headers['x-next-page-token'];
    if (!token || r.json.length === 0) return out;
  }
  throw new Error(`${path}: more than 100 pages`);
}

export const tests = [
  {
    name: 'issue 33.7: every served route that changes something (POST, PUT, PATCH, DELETE with a key or the admin token) makes an audit entry naming its route pattern, even when it answers 4xx',
    timeout: 120000,
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      const routes = mutatingRoutes();
      assert(routes.length > 50, `the route table lists ${routes.length} changing routes`);
      const admin = { authorization: `Bearer ${ADMIN}` };
      for (const r of routes) {
        // Path parameters name nothing that exists; a trailing * is one segment.
        const path = r.pattern.replace(/\{[^}]*\}/g, 'zz0none').replace(/\/\*$/, '/url');
        const headers = r.auth === 'admin' ? admin : { authorization: `Bearer ${s.key}` };
        // A JSON string: no handler takes one as its body (400, or 404 for an
        // object that does not exist, or a JSON-RPC error on /mcp).
        const res = await request(s.base, r.method, path, { headers: { ...headers, 'content-type': 'application/json' }, raw: '"not a request"' });
        assert(res.status !== 401 && res.status !== 500 && res.status !== 501,
          `${r.method} ${path}: ${res.status} ${res.text.slice(0, 200)}`);
      }
      const want = (r) => `${r.method} ${r.pattern}`;
      // Entries reach the store within the audit writer's batch interval:
      // poll until every route is there, or name those still missing.
      let left = [];
      for (const deadline = Date.now() + 30000; Date.now() < deadline;) {
        const org = await allEntries(s, '/audit-logs', { authorization: `Bearer ${s.key}` });
        const op = await allEntries(s, '/admin/audit-logs', admin);
        const seen = new Set([...org.filter((e) => e.auth_strategy === 'api_key'), ...op.filter((e) => e.auth_strategy === 'admin_token')]
          .map((e) => `${e.method} ${e.route}`));
        left = routes.filter((r) => !seen.has(want(r))).map(want);
        if (left.length === 0) break;
        await new Promise((res) => setTimeout(res, 200));
      }
      eq(left, [], 'routes whose calls made no audit entry');
    }),
  },
];
