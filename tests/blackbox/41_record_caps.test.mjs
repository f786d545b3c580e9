// Tenant fairness: records an organization creates for itself in the one
// shared database (docs/sandbox.md "Tenant fairness: records without a
// count"). Proxies, projects and live API keys are capped per organization
// (limits.h LIM_PROXIES_PER_ORG, LIM_PROJECTS_PER_ORG, LIM_API_KEYS_PER_ORG,
// 1000 each): past a cap a create is 429 limit_exceeded with Retry-After and
// writes nothing, and another organization still creates. Deleted and expired
// keys are kept up to LIM_API_KEYS_ENDED_KEPT (100) per organization, so a
// loop of key creates and deletes cannot grow the table.
import { request, assert, eq, isError, newOrg, withServer as withServerOf } from './lib.mjs';

const ADMIN = 'admin-token-for-tests';
const CAP = 1000;
const ENDED_KEPT = 100;

const withServer = (fn) => withServerOf({ args: ['--admin-token', ADMIN] }, fn);
const otherOrg = async (s) => (await newOrg(s, ADMIN, { name: 'bystander' })).key;

// Creates with make(i) until the first refusal (at most CAP + 5 tries, 16 at
// a time); returns how many were created and the first refusal.
async function fill(make) {
  let made = 0, refused = null;
  for (let i = 0; i < CAP + 5 && !refused; i += 16) {
    const rs = await Promise.all(Array.from({ length: 16 }, (_, j) => make(i + j)));
    for (const r of rs) {
      if (r.status === 200) made++;
      else if (!refused) refused = r;
    }
  }
  return { made, refused };
}

// The rows of a list, paged 100 at a time (path ends in ? or a query).
async function count(s, path) {
  let n = 0;
  for (let off = 0; ; off += 100) {
    const l = await request(s.base, 'GET', `${path}${path.endsWith('?') ? '' : '&'}limit=100&offset=${off}`, { key: s.key });
    eq(l.status, 200, l.text);
    n += l.json.length;
    if (l.json.length < 100) return n;
  }
}

function isCapAnswer(r, what) {
  isError(r, 429, 'limit_exceeded');
  assert(r.headers['retry-after'], `Retry-After on the ${what} cap: ${JSON.stringify(r.headers)}`);
  assert(new RegExp(`${CAP} ${what}`).test(r.json.message), `the message names the cap: ${r.json.message}`);
}

export const tests = [
  {
    name: 'tenant fairness (records): an organization stores at most 1000 proxies; past it POST /proxies is 429 with Retry-After, nothing is stored, and another organization still creates',
    fn: () => withServer(async (s) => {
      const proxy = (key, i) => request(s.base, 'POST', '/proxies', { key, body: { type: 'custom', name: `px${i}`, config: { host: 'proxy.example.com', port: 3128 } } });
      const { made, refused } = await fill((i) => proxy(s.key, i));
      eq(made, CAP, 'proxies created before the cap');
      assert(refused, 'a create past the cap was refused');
      isCapAnswer(refused, 'proxies');
      eq(await count(s, '/proxies?'), CAP, 'no proxy past the cap was stored');
      eq((await proxy(await otherOrg(s), 0)).status, 200, 'another organization creates a proxy');
    }),
  },
  {
    name: 'tenant fairness (records): an organization has at most 1000 projects; past it POST /org/projects is 429 with Retry-After; deleting one makes room',
    fn: () => withServer(async (s) => {
      const project = (key, i) => request(s.base, 'POST', '/org/projects', { key, body: { name: `p${i}` } });
      const { made, refused } = await fill((i) => project(s.key, i));
      eq(made, CAP - 1, 'projects created beside the default one');
      assert(refused, 'a create past the cap was refused');
      isCapAnswer(refused, 'projects');
      const one = await request(s.base, 'GET', '/org/projects/p7', { key: s.key });
      eq(one.status, 200, one.text);
      eq((await request(s.base, 'DELETE', `/org/projects/${one.json.id}`, { key: s.key })).status, 204, 'delete one');
      eq((await project(s.key, 'again')).status, 200, 'room after a delete');
      eq((await project(await otherOrg(s), 0)).status, 200, 'another organization creates a project');
    }),
  },
  {
    name: 'tenant fairness (records): at most 1000 live API keys per organization (creates and rotations past it are 429); a loop of key creates and deletes keeps at most 100 ended keys',
    fn: () => withServer(async (s) => {
      const create = (i) => request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: `k${i}` } });
      // The loop first: each create keeps the newest ended keys only.
      for (let i = 0; i < ENDED_KEPT + 40; i++) {
        const k = await create(`loop${i}`);
        eq(k.status, 200, k.text);
        eq((await request(s.base, 'DELETE', `/org/api_keys/${k.json.id}`, { key: s.key })).status, 204);
      }
      // The last delete came after the last create's pruning: one more.
      const ended = await count(s, '/org/api_keys?status=deleted');
      assert(ended >= ENDED_KEPT && ended <= ENDED_KEPT + 1, `ended keys kept: ${ended}`);
      // The live cap: the server's own key is live and counts.
      const { made, refused } = await fill((i) => create(i));
      eq(made, CAP - 1, 'keys created beside the first');
      assert(refused, 'a create past the cap was refused');
      isCapAnswer(refused, 'live API keys');
      const some = (await request(s.base, 'GET', '/org/api_keys?limit=2', { key: s.key })).json;
      isCapAnswer(await request(s.base, 'POST', `/org/api_keys/${some[1].id}/rotate`, { key: s.key, body: {} }), 'live API keys');
      eq((await request(s.base, 'GET', '/org/entitlements', { key: s.key })).status, 200, 'the organization still works');
      const other = await otherOrg(s);
      const k = await request(s.base, 'POST', '/org/api_keys', { key: other, body: { name: 'x' } });
      eq(k.status, 200, `another organization creates a key: ${k.text}`);
    }),
  },
];
