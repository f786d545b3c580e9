// Authentication (interface document, Authentication 1-4; KERNEL_API wire
// conventions), project selection, org isolation, and the admin token.
import { setTimeout as sleep } from 'node:timers/promises';
import { startServer, request, assert, eq, isError } from './lib.mjs';

const ADMIN = 'admin-token-for-tests';

async function withServer(fn, opts = { args: ['--admin-token', ADMIN] }) {
  const s = await startServer(opts);
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

// Creates an org through the admin API plus an org-scoped key; returns {org, key}.
async function newOrg(s, body) {
  const org = ok2xx(await admin(s, 'POST', '/admin/orgs', body), 'create org');
  const k = ok2xx(await admin(s, 'POST', `/admin/orgs/${org.id}/api_keys`, { name: 'main' }), 'create key');
  return { org, key: k.key, keyId: k.id };
}

const works = async (s, key) => (await request(s.base, 'GET', '/org/entitlements', { key })).status;

export const tests = [
  {
    name: 'Authentication 2: missing or malformed Authorization ("Basic x", "Bearer", "Bearer ", a bare key) -> 401 unauthorized',
    fn: () => withServer(async (s) => {
      isError(await request(s.base, 'GET', '/org/entitlements'), 401, 'unauthorized');
      for (const h of ['Basic x', `Basic ${s.key}`, 'Bearer', 'Bearer ', s.key, `Token ${s.key}`]) {
        const r = await request(s.base, 'GET', '/org/entitlements', { headers: { authorization: h } });
        try { isError(r, 401, 'unauthorized'); } catch (e) { throw new Error(`Authorization: ${JSON.stringify(h)}: ${e.message}`); }
      }
      eq(await works(s, s.key), 200, 'the bootstrap key itself works');
    }),
  },
  {
    name: 'Authentication 2: an unknown key (random, or the real key with a character changed) -> 401 unauthorized',
    fn: () => withServer(async (s) => {
      const last = s.key.slice(-1) === 'a' ? 'b' : 'a';
      for (const k of ['bd_doesnotexist', s.key.slice(0, -1) + last, s.key + 'x', 'x'.repeat(5000)]) {
        isError(await request(s.base, 'GET', '/org/entitlements', { key: k }), 401, 'unauthorized');
      }
    }),
  },
  {
    name: 'Authentication 2: a rotated key with expire_in_days 0 stops working (expired) while the new key works',
    fn: () => withServer(async (s) => {
      const made = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'short', days_to_expire: 1 } }), 'create key');
      eq(await works(s, made.key), 200, 'fresh key');
      assert(typeof made.expires_at === 'string' && Date.parse(made.expires_at) > Date.now(), `expires_at ${made.expires_at}`);
      const rot = ok2xx(await request(s.base, 'POST', `/org/api_keys/${made.id}/rotate`, { key: s.key, body: { expire_in_days: 0 } }), 'rotate');
      // The server keeps the old key for 1 ms; wait past it (not a timed assertion).
      await sleep(20);
      isError(await request(s.base, 'GET', '/org/entitlements', { key: made.key }), 401, 'unauthorized');
      eq(await works(s, rot.key), 200, 'new key after rotation');
    }),
  },
  {
    name: 'Authentication 2: a deleted key -> 401 unauthorized',
    fn: () => withServer(async (s) => {
      const made = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'doomed' } }), 'create key');
      eq(await works(s, made.key), 200, 'before delete');
      const d = await request(s.base, 'DELETE', `/org/api_keys/${made.id}`, { key: s.key });
      ok2xx(d, 'delete');
      isError(await request(s.base, 'GET', '/org/entitlements', { key: made.key }), 401, 'unauthorized');
      isError(await request(s.base, 'GET', '/org/projects', { key: made.key }), 401, 'unauthorized');
    }),
  },
  {
    name: 'KERNEL_API X-Kernel-Project-Id: by id and by name select the project; unknown -> 404 project_not_found',
    fn: () => withServer(async (s) => {
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'alpha' } }), 'create project');
      // /browsers is authenticated with project selection, then lists the project's sessions.
      for (const h of [p.id, 'alpha', 'default']) {
        const r = await request(s.base, 'GET', '/browsers', { key: s.key, headers: { 'x-kernel-project-id': h } });
        eq(r.status, 200, `header ${h}: ${r.text}`);
      }
      for (const h of ['nosuch', 'aaaaaaaaaaaaaaaaaaaaaaaa']) {
        isError(await request(s.base, 'GET', '/browsers', { key: s.key, headers: { 'x-kernel-project-id': h } }), 404, 'project_not_found');
      }
    }),
  },
  {
    name: 'KERNEL_API X-Kernel-Project-Id: an archived project (by id or name) -> 404 project_not_found; active again -> selectable',
    fn: () => withServer(async (s) => {
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'old' } }), 'create project');
      ok2xx(await request(s.base, 'PATCH', `/org/projects/${p.id}`, { key: s.key, body: { status: 'archived' } }), 'archive');
      for (const h of [p.id, 'old']) {
        isError(await request(s.base, 'GET', '/browsers', { key: s.key, headers: { 'x-kernel-project-id': h } }), 404, 'project_not_found');
      }
      ok2xx(await request(s.base, 'PATCH', `/org/projects/${p.id}`, { key: s.key, body: { status: 'active' } }), 'unarchive');
      eq((await request(s.base, 'GET', '/browsers', { key: s.key, headers: { 'x-kernel-project-id': 'old' } })).status, 200);
    }),
  },
  {
    name: 'KERNEL_API: a project-scoped key used with a different project -> 403; with its own project or no header -> served',
    fn: () => withServer(async (s) => {
      const a = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'pa' } }), 'project a');
      const b = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'pb' } }), 'project b');
      const k = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'scoped', project_id: a.id } }), 'scoped key');
      eq(k.project_id, a.id, 'project_id of the scoped key');
      for (const h of [b.id, 'pb', 'default']) {
        isError(await request(s.base, 'GET', '/browsers', { key: k.key, headers: { 'x-kernel-project-id': h } }), 403);
      }
      for (const h of [a.id, 'pa', undefined]) {
        const headers = h ? { 'x-kernel-project-id': h } : {};
        eq((await request(s.base, 'GET', '/browsers', { key: k.key, headers })).status, 200, `header ${h}`);
      }
      // Organization administration needs an organization-scoped key.
      isError(await request(s.base, 'GET', '/org/projects', { key: k.key }), 403);
      isError(await request(s.base, 'POST', '/org/api_keys', { key: k.key, body: { name: 'x' } }), 403);
    }),
  },
  {
    name: 'KERNEL_API: a project-scoped key stops working when its project is archived (404 project_not_found) or deleted (401)',
    fn: () => withServer(async (s) => {
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'tmp' } }), 'project');
      const k = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'scoped', project_id: p.id } }), 'scoped key');
      eq((await request(s.base, 'GET', '/browsers', { key: k.key })).status, 200, 'before');
      ok2xx(await request(s.base, 'PATCH', `/org/projects/${p.id}`, { key: s.key, body: { status: 'archived' } }), 'archive');
      isError(await request(s.base, 'GET', '/browsers', { key: k.key }), 404, 'project_not_found');
      ok2xx(await request(s.base, 'DELETE', `/org/projects/${p.id}`, { key: s.key }), 'delete');
      isError(await request(s.base, 'GET', '/browsers', { key: k.key }), 401, 'unauthorized');
    }),
  },
  {
    name: 'isolation: org B never sees org A\'s projects or keys (404, never 403, never A\'s data); lists show only its own',
    fn: () => withServer(async (s) => {
      const A = { key: s.key };
      const pa = ok2xx(await request(s.base, 'POST', '/org/projects', { key: A.key, body: { name: 'secret-a' } }), 'A project');
      const ka = ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: A.key, body: { name: 'a-key' } }), 'A key');
      const B = await newOrg(s, { name: 'org-b', plan: 'startup' });
      // A's data: ids, names, the key. An error may echo what was asked for.
      const aIds = [pa.id, ka.id, ka.key, ka.masked_key, 'secret-a', 'a-key'];
      const noLeak = (r, what, asked = '') => {
        for (const id of aIds) {
          if (!asked.includes(id)) assert(!r.text.includes(id), `${what} leaks ${id}: ${r.text}`);
        }
      };
      const probes = [
        ['GET', `/org/projects/${pa.id}`], ['GET', '/org/projects/secret-a'],
        ['PATCH', `/org/projects/${pa.id}`, { name: 'stolen' }], ['DELETE', `/org/projects/${pa.id}`],
        ['GET', `/org/api_keys/${ka.id}`], ['PATCH', `/org/api_keys/${ka.id}`, { name: 'stolen' }],
        ['DELETE', `/org/api_keys/${ka.id}`], ['POST', `/org/api_keys/${ka.id}/rotate`, {}],
      ];
      for (const [m, p, body] of probes) {
        const r = await request(s.base, m, p, { key: B.key, body });
        try { isError(r, 404); noLeak(r, `${m} ${p}`, p); } catch (e) { throw new Error(`${m} ${p}: ${e.message}`); }
      }
      isError(await request(s.base, 'GET', '/browsers', { key: B.key, headers: { 'x-kernel-project-id': pa.id } }), 404, 'project_not_found');
      isError(await request(s.base, 'GET', '/browsers', { key: B.key, headers: { 'x-kernel-project-id': 'secret-a' } }), 404, 'project_not_found');
      const scoped = await request(s.base, 'POST', '/org/api_keys', { key: B.key, body: { name: 'x', project_id: pa.id } });
      isError(scoped, 400);
      const bp = await request(s.base, 'GET', '/org/projects?limit=100', { key: B.key });
      eq(bp.json.map((p) => p.name), ['default'], 'B project list');
      noLeak(bp, 'B project list');
      const bk = await request(s.base, 'GET', '/org/api_keys?limit=100', { key: B.key });
      eq(bk.json.map((k) => k.id), [B.keyId], 'B key list');
      noLeak(bk, 'B key list');
      // A is untouched and lists only its own.
      const ap = await request(s.base, 'GET', `/org/projects/${pa.id}`, { key: A.key });
      eq(ap.json.name, 'secret-a');
      eq(await works(s, ka.key), 200, 'A key still works');
      const al = await request(s.base, 'GET', '/org/projects?limit=100', { key: A.key });
      eq(al.json.map((p) => p.name).sort(), ['default', 'secret-a'], 'A project list');
      const akl = await request(s.base, 'GET', '/org/api_keys?limit=100', { key: A.key });
      assert(!akl.json.some((k) => k.id === B.keyId), 'A key list shows B\'s key');
      // Each org's entitlements are its own.
      eq((await request(s.base, 'GET', '/org/entitlements', { key: B.key })).json.plan.id, 'startup');
      eq((await request(s.base, 'GET', '/org/entitlements', { key: A.key })).json.plan.id, 'enterprise');
    }),
  },
  {
    name: 'OPERATOR admin API: no admin token configured -> 404 on every admin route',
    fn: () => withServer(async (s) => {
      for (const [m, p, body] of [['GET', '/admin/plans'], ['POST', '/admin/orgs', { name: 'x' }], ['GET', '/admin/orgs/abc'],
        ['PUT', '/admin/plans/p', { entitlements: {} }]]) {
        isError(await request(s.base, m, p, { body }), 404);
        isError(await request(s.base, m, p, { body, headers: { authorization: `Bearer ${ADMIN}` } }), 404);
        // An API key is not an admin token either.
        isError(await request(s.base, m, p, { body, key: s.key }), 404);
      }
    }, {}),
  },
  {
    name: 'OPERATOR admin API: a wrong or missing admin token -> 401; an API key is not an admin token',
    fn: () => withServer(async (s) => {
      for (const auth of [undefined, `Bearer ${ADMIN}x`, `Bearer ${ADMIN.slice(0, -1)}`, `Basic ${ADMIN}`, `Bearer ${s.key}`, 'Bearer']) {
        const headers = auth ? { authorization: auth } : {};
        isError(await request(s.base, 'GET', '/admin/plans', { headers }), 401, 'unauthorized');
        isError(await request(s.base, 'POST', '/admin/orgs', { headers, body: { name: 'x' } }), 401, 'unauthorized');
      }
      eq((await admin(s, 'GET', '/admin/plans')).status, 200, 'right token');
      // With the right token, unknown orgs are 404 Error records.
      isError(await admin(s, 'GET', '/admin/orgs/nosuch'), 404);
      isError(await admin(s, 'PATCH', '/admin/orgs/nosuch', { plan: 'startup' }), 404);
      isError(await admin(s, 'POST', '/admin/orgs/nosuch/api_keys', {}), 404);
    }),
  },
];
