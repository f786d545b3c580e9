// Issue 33.4 (KERNEL_API_NEWER.md 1.4 "Org / project limits"): GET/PATCH
// /org/limits and /org/projects/{id_or_name}/limits, and the enforcement of a
// project's max_concurrent_sessions: its standalone sessions and its pools'
// sizes together, with the organization's default for projects that set none,
// the same 429 as the organization's limit for a create and the same 403 as
// the organization's limit for a pool. Few headless browsers (at most four).
import { startServer, request, assert, eq, isError, ok2xx, newOrg } from '../blackbox/lib.mjs';

const ADMIN = 'limits-admin-token';

const api = (s, method, path, body, headers) => request(s.base, method, path, { key: s.key, body, headers });
const inProject = (name) => ({ 'X-Kernel-Project': name });

// A 400 Error record whose details name field.
function namesField(r, field) {
  isError(r, 400);
  assert((r.json.details || []).some((d) => d.field === field || (d.path || '') === field || (d.message || '').includes(field))
    || r.json.message.includes(field), `400 names ${field}: ${r.text}`);
}

async function withOne(fn) {
  const s = await startServer({ args: ['--admin-token', ADMIN] });
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

export const tests = [
  {
    name: 'issue 33.4: /org/limits shows the plan\'s figures and only its project default changes; /org/projects/{id_or_name}/limits stores its caps (0 removes one), max_pooled_sessions is always null and refused when set; bad values are 400 naming the field',
    timeout: 30000,
    fn: () => withOne(async (s) => {
      const org = ok2xx(await api(s, 'GET', '/org/limits'), 'GET /org/limits');
      const ent = ok2xx(await api(s, 'GET', '/org/entitlements'), 'GET /org/entitlements');
      eq(org.max_concurrent_sessions ?? null, ent.limits.max_concurrent_browsers ?? null, 'max_concurrent_sessions is the plan\'s concurrent-browser limit');
      eq(org.default_project_max_concurrent_sessions ?? null, null, 'no project default at first');
      eq(org.auth_connections_used, 0, 'no managed-auth connection yet');
      assert(Number.isInteger(org.min_health_check_interval_seconds), `min_health_check_interval_seconds: ${JSON.stringify(org)}`);
      eq(org.max_auth_connections ?? null, ent.features.managed_auth.max_connections ?? null, 'max_auth_connections is the plan\'s');

      for (const f of ['max_concurrent_sessions', 'auth_connections_used', 'max_auth_connections', 'min_health_check_interval_seconds']) {
        namesField(await api(s, 'PATCH', '/org/limits', { [f]: 3 }), f);
      }
      for (const bad of [-1, 2.5, '3', true]) {
        namesField(await api(s, 'PATCH', '/org/limits', { default_project_max_concurrent_sessions: bad }), 'default_project_max_concurrent_sessions');
      }
      namesField(await api(s, 'PATCH', '/org/limits', { nonsense: 1 }), 'nonsense');
      eq(ok2xx(await api(s, 'PATCH', '/org/limits', { default_project_max_concurrent_sessions: 4 }), 'PATCH').default_project_max_concurrent_sessions, 4, 'set');
      eq((await api(s, 'GET', '/org/limits')).json.default_project_max_concurrent_sessions, 4, 'kept');
      eq(ok2xx(await api(s, 'PATCH', '/org/limits', { default_project_max_concurrent_sessions: 0 }), 'PATCH 0').default_project_max_concurrent_sessions ?? null, null, '0 removes it');
      // The default cannot exceed the organization's own limit.
      const { org: small, key } = await newOrg(s, ADMIN, { name: 'small', plan: 'developer', overrides: { limits: { max_concurrent_browsers: 3 } } });
      const asSmall = (m, p, b) => request(s.base, m, p, { key, body: b });
      eq((await asSmall('GET', '/org/limits')).json.max_concurrent_sessions, 3, `the org's limit (${small.id})`);
      namesField(await asSmall('PATCH', '/org/limits', { default_project_max_concurrent_sessions: 4 }), 'default_project_max_concurrent_sessions');
      eq(ok2xx(await asSmall('PATCH', '/org/limits', { default_project_max_concurrent_sessions: 3 }), 'PATCH 3').default_project_max_concurrent_sessions, 3, 'up to the limit');

      const p = ok2xx(await api(s, 'POST', '/org/projects', { name: 'lim' }), 'create project');
      eq(ok2xx(await api(s, 'GET', '/org/projects/lim/limits'), 'GET by name'),
        { max_concurrent_sessions: null, max_concurrent_invocations: null, max_pooled_sessions: null }, 'no caps at first');
      eq(ok2xx(await api(s, 'PATCH', '/org/projects/lim/limits', { max_concurrent_sessions: 2, max_concurrent_invocations: 5 }), 'PATCH'),
        { max_concurrent_sessions: 2, max_concurrent_invocations: 5, max_pooled_sessions: null }, 'PATCH answer');
      eq(ok2xx(await api(s, 'GET', `/org/projects/${p.id}/limits`), 'GET by id'),
        { max_concurrent_sessions: 2, max_concurrent_invocations: 5, max_pooled_sessions: null }, 'read back by id');
      namesField(await api(s, 'PATCH', '/org/projects/lim/limits', { max_pooled_sessions: 3 }), 'max_pooled_sessions');
      for (const bad of [-1, 1.5, 'x']) {
        namesField(await api(s, 'PATCH', '/org/projects/lim/limits', { max_concurrent_sessions: bad }), 'max_concurrent_sessions');
        namesField(await api(s, 'PATCH', '/org/projects/lim/limits', { max_concurrent_invocations: bad }), 'max_concurrent_invocations');
      }
      eq((await api(s, 'GET', '/org/projects/lim/limits')).json.max_concurrent_sessions, 2, 'a refused PATCH changes nothing');
      eq(ok2xx(await api(s, 'PATCH', '/org/projects/lim/limits', { max_concurrent_sessions: 0 }), 'PATCH 0'),
        { max_concurrent_sessions: null, max_concurrent_invocations: 5, max_pooled_sessions: null }, '0 removes the cap');
      isError(await api(s, 'GET', '/org/projects/nope/limits'), 404);
    }),
  },
  {
    name: 'issue 33.4: a project\'s max_concurrent_sessions caps its sessions and pool browsers together (429 rate_limited with Retry-After for a create, 403 for a pool); the org\'s default applies to projects without their own; other projects are not held; 0 removes the cap',
    timeout: 90000,
    fn: () => withOne(async (s) => {
      ok2xx(await api(s, 'POST', '/org/projects', { name: 'capped' }), 'create capped');
      ok2xx(await api(s, 'POST', '/org/projects', { name: 'plain' }), 'create plain');
      ok2xx(await api(s, 'PATCH', '/org/projects/capped/limits', { max_concurrent_sessions: 2 }), 'cap 2');

      // A pool of 1 and one session fill the project's 2.
      const pool = ok2xx(await api(s, 'POST', '/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 0 }, inProject('capped')), 'pool of 1');
      const one = await api(s, 'POST', '/browsers', { headless: true }, inProject('capped'));
      eq(one.status, 200, `first create in capped: ${one.text}`);
      const over = await api(s, 'POST', '/browsers', { headless: true }, inProject('capped'));
      isError(over, 429, 'rate_limited');
      assert(over.headers['retry-after'], '429 carries Retry-After');
      assert(/max_concurrent_sessions/.test(over.json.message), over.json.message);
      const grow = await api(s, 'PATCH', `/browser_pools/${pool.id}`, { size: 2 }, inProject('capped'));
      isError(grow, 403, 'pool_limit_exceeded');
      assert(/max_concurrent_sessions/.test(grow.json.message), grow.json.message);
      isError(await api(s, 'POST', '/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 0 }, inProject('capped')), 403, 'pool_limit_exceeded');

      // The org's default holds "plain", which sets no cap of its own.
      ok2xx(await api(s, 'PATCH', '/org/limits', { default_project_max_concurrent_sessions: 1 }), 'default 1');
      eq((await api(s, 'POST', '/browsers', { headless: true }, inProject('plain'))).status, 200, 'first create in plain');
      isError(await api(s, 'POST', '/browsers', { headless: true }, inProject('plain')), 429, 'rate_limited');

      // 0 removes capped's own cap: the default (1) holds it now, then
      // without the default nothing does.
      ok2xx(await api(s, 'PATCH', '/org/projects/capped/limits', { max_concurrent_sessions: 0 }), 'cap 0');
      isError(await api(s, 'PATCH', `/browser_pools/${pool.id}`, { size: 2 }, inProject('capped')), 403, 'pool_limit_exceeded');
      ok2xx(await api(s, 'PATCH', '/org/limits', { default_project_max_concurrent_sessions: 0 }), 'default 0');
      ok2xx(await api(s, 'PATCH', `/browser_pools/${pool.id}`, { size: 2 }, inProject('capped')), 'the pool grows without a cap');

      // Deleting a pool frees its share.
      ok2xx(await api(s, 'PATCH', '/org/projects/capped/limits', { max_concurrent_sessions: 1 }), 'cap 1');
      eq((await api(s, 'DELETE', `/browser_pools/${pool.id}`, { force: true }, inProject('capped'))).status, 204, 'delete the pool');
      isError(await api(s, 'POST', '/browsers', { headless: true }, inProject('capped')), 429, 'rate_limited');
      eq((await api(s, 'DELETE', `/browsers/${one.json.session_id}`, undefined, inProject('capped'))).status, 204, 'delete the session');
      eq((await api(s, 'POST', '/browsers', { headless: true }, inProject('capped'))).status, 200, 'a freed slot is usable');
    }),
  },
];
