// KERNEL_API.md Organization: /org/projects and /org/api_keys, and the list
// conventions (bare array, limit/offset, X-Has-More, X-Next-Offset).
import { startServer, request, assert, eq, isError } from './lib.mjs';

const ADMIN = 'admin-token-for-tests';
const ID = /^[a-z0-9]{24}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const DAY = 86400000;

async function withServer(fn) {
  const s = await startServer({ args: ['--admin-token', ADMIN] });
  try {
    await fn(s);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

function ok2xx(r, what) {
  assert(r.status >= 200 && r.status < 300, `${what}: ${r.status} ${r.text}`);
  return r.json;
}

function admin(s, method, path, body) {
  return request(s.base, method, path, { body, headers: { authorization: `Bearer ${ADMIN}` } });
}

async function newOrg(s, body) {
  const org = ok2xx(await admin(s, 'POST', '/admin/orgs', body), 'create org');
  const k = ok2xx(await admin(s, 'POST', `/admin/orgs/${org.id}/api_keys`, { name: 'main' }), 'create key');
  return { org, key: k.key, keyId: k.id };
}

function checkProject(p, name, status = 'active') {
  eq(Object.keys(p).sort(), ['created_at', 'id', 'name', 'status', 'updated_at'], 'project record keys');
  assert(ID.test(p.id), `project id ${p.id}`);
  eq([p.name, p.status], [name, status], 'project name/status');
  assert(RFC3339.test(p.created_at) && RFC3339.test(p.updated_at), `times ${p.created_at} ${p.updated_at}`);
}

function checkKey(k, name) {
  eq(Object.keys(k).sort(), ['created_at', 'deleted_at', 'expires_at', 'id', 'masked_key', 'name', 'project_id'], 'key record keys');
  assert(ID.test(k.id), `key id ${k.id}`);
  eq(k.name, name, 'key name');
  assert(typeof k.masked_key === 'string' && k.masked_key.length > 0, `masked_key ${k.masked_key}`);
  assert(RFC3339.test(k.created_at), `created_at ${k.created_at}`);
}

// Pages through a list with the given limit; returns all rows and the pages' headers.
async function pageAll(s, key, path, limit) {
  const rows = [], pages = [];
  let offset = 0;
  for (let guard = 0; guard < 100; guard++) {
    const r = await request(s.base, 'GET', `${path}?limit=${limit}&offset=${offset}`, { key });
    eq(r.status, 200, r.text);
    assert(Array.isArray(r.json), `bare array expected: ${r.text.slice(0, 100)}`);
    pages.push({ n: r.json.length, more: r.headers['x-has-more'], next: r.headers['x-next-offset'] });
    rows.push(...r.json);
    if (r.headers['x-has-more'] !== 'true') return { rows, pages };
    offset = Number(r.headers['x-next-offset']);
  }
  throw new Error('paging did not end');
}

export const tests = [
  {
    name: 'KERNEL_API projects: create, get by id and by name, rename, archive and unarchive via PATCH status, list, delete',
    fn: () => withServer(async (s) => {
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'web' } }), 'create');
      checkProject(p, 'web');
      eq((await request(s.base, 'GET', `/org/projects/${p.id}`, { key: s.key })).json, p, 'get by id');
      eq((await request(s.base, 'GET', '/org/projects/web', { key: s.key })).json, p, 'get by name');
      const r = ok2xx(await request(s.base, 'PATCH', `/org/projects/${p.id}`, { key: s.key, body: { name: 'web2' } }), 'rename');
      checkProject(r, 'web2');
      eq(r.id, p.id);
      isError(await request(s.base, 'GET', '/org/projects/web', { key: s.key }), 404, 'project_not_found');
      eq((await request(s.base, 'GET', '/org/projects/web2', { key: s.key })).json.id, p.id, 'get by new name');
      const a = ok2xx(await request(s.base, 'PATCH', '/org/projects/web2', { key: s.key, body: { status: 'archived' } }), 'archive');
      checkProject(a, 'web2', 'archived');
      eq((await request(s.base, 'GET', `/org/projects/${p.id}`, { key: s.key })).json.status, 'archived', 'archived project is still readable');
      const list = (await request(s.base, 'GET', '/org/projects', { key: s.key })).json;
      eq(list.map((x) => [x.name, x.status]).sort(), [['default', 'active'], ['web2', 'archived']], 'list');
      ok2xx(await request(s.base, 'PATCH', `/org/projects/${p.id}`, { key: s.key, body: { status: 'active' } }), 'unarchive');
      const d = await request(s.base, 'DELETE', `/org/projects/${p.id}`, { key: s.key });
      ok2xx(d, 'delete');
      eq(d.text, '', 'DELETE answers with no body');
      isError(await request(s.base, 'GET', `/org/projects/${p.id}`, { key: s.key }), 404, 'project_not_found');
      isError(await request(s.base, 'DELETE', `/org/projects/${p.id}`, { key: s.key }), 404, 'project_not_found');
      isError(await request(s.base, 'PATCH', `/org/projects/${p.id}`, { key: s.key, body: { name: 'x' } }), 404, 'project_not_found');
    }),
  },
  {
    name: 'KERNEL_API projects: invalid bodies (missing/empty/long/non-string name, bad status, unknown field) -> 400',
    fn: () => withServer(async (s) => {
      for (const body of [{}, { name: '' }, { name: 'x'.repeat(256) }, { name: 5 }, { name: null }, { name: 'ok', owner: 'me' }]) {
        isError(await request(s.base, 'POST', '/org/projects', { key: s.key, body }), 400, 'bad_request');
      }
      for (const body of [{ status: 'deleted' }, { status: true }, { name: '' }, { color: 'red' }]) {
        isError(await request(s.base, 'PATCH', '/org/projects/default', { key: s.key, body }), 400, 'bad_request');
      }
      eq((await request(s.base, 'GET', '/org/projects/default', { key: s.key })).json.status, 'active', 'unchanged');
      checkProject(ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'x'.repeat(255) } }), '255 chars'), 'x'.repeat(255));
    }),
  },
  {
    name: 'KERNEL_API projects: a duplicate name (create or rename) -> 409 with x-should-retry: false',
    fn: () => withServer(async (s) => {
      ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'one' } }), 'create one');
      const b = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'two' } }), 'create two');
      for (const r of [
        await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'one' } }),
        await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'default' } }),
        await request(s.base, 'PATCH', `/org/projects/${b.id}`, { key: s.key, body: { name: 'one' } }),
      ]) {
        isError(r, 409);
        eq(r.headers['x-should-retry'], 'false', 'x-should-retry');
      }
      eq((await request(s.base, 'GET', `/org/projects/${b.id}`, { key: s.key })).json.name, 'two', 'rename refused');
      // A name is unique per org only.
      const other = await newOrg(s, { name: 'other' });
      ok2xx(await request(s.base, 'POST', '/org/projects', { key: other.key, body: { name: 'one' } }), 'same name, other org');
    }),
  },
  {
    name: 'KERNEL_API projects: deleting the last project -> 409 (x-should-retry: false); the project stays',
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'solo' });
      const r = await request(s.base, 'DELETE', `/org/projects/${org.default_project.id}`, { key });
      isError(r, 409);
      eq(r.headers['x-should-retry'], 'false');
      eq((await request(s.base, 'GET', '/org/projects/default', { key })).json.id, org.default_project.id);
      // With two, one can go, then the remaining one cannot.
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key, body: { name: 'second' } }), 'second');
      ok2xx(await request(s.base, 'DELETE', '/org/projects/default', { key }), 'delete default');
      isError(await request(s.base, 'DELETE', `/org/projects/${p.id}`, { key }), 409);
      // The org still works (its default moved to the remaining project).
      eq((await request(s.base, 'GET', '/browsers', { key })).status, 200, 'project selection after the default was deleted');
    }),
  },
  {
    name: 'KERNEL_API projects: when projects are disabled for the org every project operation answers 404 projects_disabled',
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'flat' });
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key, body: { name: 'p' } }), 'create');
      const rec = ok2xx(await admin(s, 'PATCH', `/admin/orgs/${org.id}`, { projects_enabled: false }), 'disable');
      eq(rec.projects_enabled, false);
      const ops = [
        ['POST', '/org/projects', { name: 'q' }], ['GET', '/org/projects'], ['GET', `/org/projects/${p.id}`],
        ['GET', '/org/projects/p'], ['PATCH', `/org/projects/${p.id}`, { name: 'r' }], ['DELETE', `/org/projects/${p.id}`],
        ['GET', '/org/projects/nosuch'],
      ];
      for (const [m, path, body] of ops) {
        const r = await request(s.base, m, path, { key, body });
        try { isError(r, 404, 'projects_disabled'); } catch (e) { throw new Error(`${m} ${path}: ${e.message}`); }
      }
      // Keys and entitlements are unaffected.
      eq((await request(s.base, 'GET', '/org/api_keys', { key })).status, 200);
      eq((await request(s.base, 'GET', '/org/entitlements', { key })).status, 200);
      ok2xx(await admin(s, 'PATCH', `/admin/orgs/${org.id}`, { projects_enabled: true }), 'enable');
      eq((await request(s.base, 'GET', '/org/projects/p', { key })).json.id, p.id, 'back after re-enabling');
    }),
  },
  {
    name: 'KERNEL_API api keys: create returns `key` once; GET and list show masked_key only; the new key works',
    fn: () => withServer(async (s) => {
      const c = await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'ci' } });
      const made = ok2xx(c, 'create');
      assert(typeof made.key === 'string' && made.key.length >= 20, `key ${made.key}`);
      const { key: plain, ...rec } = made;
      checkKey(rec, 'ci');
      eq([rec.project_id, rec.expires_at, rec.deleted_at], [null, null, null], 'org-scoped, no expiry');
      assert(!rec.masked_key.includes(plain), 'masked_key contains the key');
      const g = await request(s.base, 'GET', `/org/api_keys/${made.id}`, { key: s.key });
      eq(g.json, rec, 'GET returns the record without key');
      assert(!g.text.includes(plain), 'GET leaks the key');
      const l = await request(s.base, 'GET', '/org/api_keys', { key: s.key });
      assert(!l.text.includes(plain), 'list leaks the key');
      assert(l.json.every((k) => !('key' in k)), 'list rows carry key');
      eq(l.json.find((k) => k.id === made.id), rec, 'list row');
      eq(l.json.length, 2, 'bootstrap key + new key');
      eq((await request(s.base, 'GET', '/org/entitlements', { key: plain })).status, 200, 'new key works');
      // days_to_expire sets expires_at; project_id scopes the key.
      const e = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'tmp', days_to_expire: 2 } }), 'expiring');
      const exp = Date.parse(e.expires_at) - Date.parse(e.created_at);
      assert(Math.abs(exp - 2 * DAY) < 60000, `expires_at ${e.expires_at} vs created_at ${e.created_at}`);
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'p' } }), 'project');
      const sc = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'scoped', project_id: p.id } }), 'scoped');
      eq(sc.project_id, p.id);
      for (const body of [{}, { name: '' }, { name: 'x', days_to_expire: 0 }, { name: 'x', days_to_expire: 1.5 }, { name: 'x', project_id: 'nosuch' }, { name: 'x', extra: 1 }]) {
        isError(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body }), 400, 'bad_request');
      }
      // A refused create stores nothing: bootstrap, ci, tmp and scoped only.
      eq((await request(s.base, 'GET', '/org/api_keys', { key: s.key })).json.length, 4, 'keys after the refused creates');
    }),
  },
  {
    name: 'KERNEL_API api keys: rename via PATCH, delete (then 404), and a key cannot delete itself (4xx, still works)',
    fn: () => withServer(async (s) => {
      const made = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'a' } }), 'create');
      const r = ok2xx(await request(s.base, 'PATCH', `/org/api_keys/${made.id}`, { key: s.key, body: { name: 'b' } }), 'rename');
      eq([r.id, r.name], [made.id, 'b']);
      eq((await request(s.base, 'GET', `/org/api_keys/${made.id}`, { key: s.key })).json.name, 'b');
      isError(await request(s.base, 'PATCH', `/org/api_keys/${made.id}`, { key: s.key, body: { name: 'c', project_id: null } }), 400);
      // Self-deletion is refused.
      const self = await request(s.base, 'DELETE', `/org/api_keys/${made.id}`, { key: made.key });
      assert(self.status >= 400 && self.status < 500, `self delete: ${self.status} ${self.text}`);
      isError(self, self.status);
      eq((await request(s.base, 'GET', '/org/entitlements', { key: made.key })).status, 200, 'still works');
      // Another key can delete it.
      const d = await request(s.base, 'DELETE', `/org/api_keys/${made.id}`, { key: s.key });
      ok2xx(d, 'delete');
      eq(d.text, '', 'no body');
      isError(await request(s.base, 'GET', `/org/api_keys/${made.id}`, { key: s.key }), 404);
      isError(await request(s.base, 'DELETE', `/org/api_keys/${made.id}`, { key: s.key }), 404);
      const l = (await request(s.base, 'GET', '/org/api_keys', { key: s.key })).json;
      assert(!l.some((k) => k.id === made.id), 'deleted key still listed');
      isError(await request(s.base, 'GET', '/org/api_keys/nosuchkey', { key: s.key }), 404);
    }),
  },
  {
    name: 'KERNEL_API api keys: rotate returns a new working key; the old one keeps working during the default 7-day grace',
    fn: () => withServer(async (s) => {
      const made = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'rot' } }), 'create');
      const before = Date.now();
      const rot = ok2xx(await request(s.base, 'POST', `/org/api_keys/${made.id}/rotate`, { key: s.key }), 'rotate');
      assert(typeof rot.key === 'string' && rot.key !== made.key, 'a new plaintext key');
      assert(rot.id !== made.id, 'a new key id');
      eq(rot.name, 'rot', 'name carried over');
      eq((await request(s.base, 'GET', '/org/entitlements', { key: rot.key })).status, 200, 'new key works');
      eq((await request(s.base, 'GET', '/org/entitlements', { key: made.key })).status, 200, 'old key works in the grace period');
      const old = (await request(s.base, 'GET', `/org/api_keys/${made.id}`, { key: s.key })).json;
      const grace = Date.parse(old.expires_at) - before;
      assert(grace > 7 * DAY - 60000 && grace < 7 * DAY + 60000, `old key expires_at ${old.expires_at}`);
      // expire_in_days sets the grace; days_to_expire the new key's life.
      const rot2 = ok2xx(await request(s.base, 'POST', `/org/api_keys/${rot.id}/rotate`, { key: s.key, body: { expire_in_days: 2, days_to_expire: 30 } }), 'rotate 2');
      const o2 = (await request(s.base, 'GET', `/org/api_keys/${rot.id}`, { key: s.key })).json;
      assert(Math.abs(Date.parse(o2.expires_at) - Date.now() - 2 * DAY) < 60000, `grace 2 days: ${o2.expires_at}`);
      assert(Math.abs(Date.parse(rot2.expires_at) - Date.now() - 30 * DAY) < 60000, `new key 30 days: ${rot2.expires_at}`);
      eq((await request(s.base, 'GET', '/org/entitlements', { key: rot2.key })).status, 200);
      isError(await request(s.base, 'POST', `/org/api_keys/${rot.id}/rotate`, { key: s.key, body: { expire_in_days: -1 } }), 400);
      isError(await request(s.base, 'POST', '/org/api_keys/nosuchkey/rotate', { key: s.key }), 404);
    }),
  },
  {
    name: 'KERNEL_API lists: limit must be 1..100 (0, 101, -1, abc -> 400); offset must be >= 0',
    fn: () => withServer(async (s) => {
      for (const path of ['/org/projects', '/org/api_keys']) {
        for (const q of ['limit=0', 'limit=101', 'limit=-1', 'limit=abc', 'limit=', 'offset=-1', 'offset=x']) {
          const r = await request(s.base, 'GET', `${path}?${q}`, { key: s.key });
          try { isError(r, 400, 'bad_request'); } catch (e) { throw new Error(`${path}?${q}: ${e.message}`); }
        }
        for (const q of ['limit=1', 'limit=100', 'offset=0']) eq((await request(s.base, 'GET', `${path}?${q}`, { key: s.key })).status, 200, q);
      }
    }),
  },
  {
    name: 'KERNEL_API lists: 26 projects page through with X-Has-More and X-Next-Offset (absolute; 0 on the last page); default limit 20',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const { key } = await newOrg(s, { name: 'many' });
      for (let i = 0; i < 25; i++) ok2xx(await request(s.base, 'POST', '/org/projects', { key, body: { name: `p${String(i).padStart(2, '0')}` } }), `create ${i}`);
      // Default limit 20.
      const d = await request(s.base, 'GET', '/org/projects', { key });
      eq([d.json.length, d.headers['x-has-more'], d.headers['x-next-offset']], [20, 'true', '20'], 'default page');
      const d2 = await request(s.base, 'GET', '/org/projects?offset=20', { key });
      eq([d2.json.length, d2.headers['x-has-more'], d2.headers['x-next-offset']], [6, 'false', '0'], 'second default page');
      // limit 10: pages 10, 10, 6.
      const { rows, pages } = await pageAll(s, key, '/org/projects', 10);
      eq(pages, [{ n: 10, more: 'true', next: '10' }, { n: 10, more: 'true', next: '20' }, { n: 6, more: 'false', next: '0' }], 'pages of 10');
      eq(rows.length, 26);
      eq(new Set(rows.map((p) => p.id)).size, 26, 'no project twice');
      eq(rows.map((p) => p.name).sort(), ['default', ...Array.from({ length: 25 }, (_, i) => `p${String(i).padStart(2, '0')}`)].sort(), 'every project');
      // Odd page size and an exact fit.
      eq((await pageAll(s, key, '/org/projects', 7)).pages.map((p) => [p.n, p.more, p.next]),
        [[7, 'true', '7'], [7, 'true', '14'], [7, 'true', '21'], [5, 'false', '0']], 'pages of 7');
      eq((await pageAll(s, key, '/org/projects', 13)).pages.map((p) => [p.n, p.more, p.next]),
        [[13, 'true', '13'], [13, 'false', '0']], 'pages of 13 (exact fit)');
      const all = await request(s.base, 'GET', '/org/projects?limit=100', { key });
      eq([all.json.length, all.headers['x-has-more'], all.headers['x-next-offset']], [26, 'false', '0'], 'limit 100');
      const beyond = await request(s.base, 'GET', '/org/projects?offset=500', { key });
      eq([beyond.json, beyond.headers['x-has-more'], beyond.headers['x-next-offset']], [[], 'false', '0'], 'offset past the end');
      // The pages agree with the full list's order.
      eq(rows.map((p) => p.id), all.json.map((p) => p.id), 'page order = full order');
    }),
  },
  {
    name: 'KERNEL_API lists: API keys page the same way (6 keys, limit 4)',
    fn: () => withServer(async (s) => {
      const { key } = await newOrg(s, { name: 'keys' });
      for (let i = 0; i < 5; i++) ok2xx(await request(s.base, 'POST', '/org/api_keys', { key, body: { name: `k${i}` } }), 'key');
      const { rows, pages } = await pageAll(s, key, '/org/api_keys', 4);
      eq(pages, [{ n: 4, more: 'true', next: '4' }, { n: 2, more: 'false', next: '0' }], 'pages');
      eq(new Set(rows.map((k) => k.id)).size, 6);
      assert(rows.every((k) => !('key' in k)), 'no plaintext in lists');
    }),
  },
];
