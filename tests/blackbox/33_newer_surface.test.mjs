// Issue 33 items 1-3: the hosted service's newer surface (KERNEL_API_NEWER.md
// 1.2-1.4) that needs no new subsystem: its paths we do not serve answer 501
// (never 404), GET /auth/context, the X-Kernel-Project header, projects by
// name and OTLP destinations at /telemetry/destinations. No Chromium.
import { request, assert, eq, isError, withServer, ok2xx } from './lib.mjs';

const ADMIN = 'admin-token-for-tests';
// A loopback collector port the operator opens (no session exports to it here).
const OTLP = 'http://127.0.0.1:4318/v1/logs';

const server = (fn) => withServer({ args: ['--admin-token', ADMIN, '--allow-loopback', '127.0.0.1:4318'] }, fn);

// A project-scoped API key of project p (made with the org key s.key).
async function projectKey(s, p) {
  return ok2xx(await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: `k-${p.name}`, project_id: p.id } }), 'create project key');
}

// The service's paths (KERNEL_API_NEWER.md 1.2 and 1.4) with the methods its
// clients use, and the feature the 501 must name (search and the config
// registry are served since issue 40: tests/compat/40_search.test.mjs,
// tests/compat/40_config_registry.test.mjs).
const NOT_SERVED = [
  ['POST', '/vaults/main/items/k/collect', 'vaults'],
  ['POST', '/vault-provider-configs', 'vault provider configs'],
  ['GET', '/vault-provider-configs', 'vault provider configs'],
  ['GET', '/vault-provider-configs/link', 'vault provider configs'],
  ['PATCH', '/vault-provider-configs/link', 'vault provider configs'],
  ['DELETE', '/vault-provider-configs/link', 'vault provider configs'],
  ['POST', '/audit-logs/export/destinations', 'audit logs'],
  ['GET', '/audit-logs/export/destinations', 'audit logs'],
  ['GET', '/audit-logs/export/destinations/abc', 'audit logs'],
  ['PATCH', '/audit-logs/export/destinations/abc', 'audit logs'],
  ['DELETE', '/audit-logs/export/destinations/abc', 'audit logs'],
  ['POST', '/audit-logs/export/destinations/abc/test', 'audit logs'],
  ['GET', '/credential_providers', 'credential providers'], // /org/credential_providers is served (issue 35.3), /auth/connections too (35.4)
];

export const tests = [
  {
    name: 'issue 33.1: every path of the service we do not serve answers 501 with an Error record naming its feature (never 404), 401 without a key',
    fn: () => server(async (s) => {
      for (const [method, path, feature] of NOT_SERVED) {
        const body = method === 'GET' || method === 'DELETE' ? undefined : {};
        try {
          const r = await request(s.base, method, path, { key: s.key, body });
          isError(r, 501, 'not_implemented');
          assert(r.json.message.startsWith(`${feature}:`), `message does not name ${feature}: ${r.json.message}`);
          eq(r.headers['x-should-retry'], 'false', 'x-should-retry');
          isError(await request(s.base, method, path, { body }), 401, 'unauthorized');
        } catch (e) { throw new Error(`${method} ${path}: ${e.message}`); }
      }
    }),
  },
  {
    name: 'issue 33.1: /org/config/* and /org/audit_logs are not the service\'s paths: 404 like any unknown path',
    fn: () => server(async (s) => {
      for (const [method, path] of [['GET', '/org/audit_logs'], ['GET', '/org/config/sites'],
        ['POST', '/org/config/sites'], ['DELETE', '/org/config/sites/x']]) {
        const r = await request(s.base, method, path, { key: s.key, body: method === 'POST' ? {} : undefined });
        try { isError(r, 404, 'not_found'); } catch (e) { throw new Error(`${method} ${path}: ${e.message}`); }
      }
    }),
  },
  {
    name: 'issue 33.2: GET /auth/context names the method, source, key, its scope and the effective project, organization and principal',
    fn: () => server(async (s) => {
      const ent = ok2xx(await request(s.base, 'GET', '/org/api_keys', { key: s.key }), 'list keys');
      const orgKeyId = ent.find((k) => k.project_id === null).id;
      const def = ok2xx(await request(s.base, 'GET', '/org/projects/default', { key: s.key }), 'default project');
      const web = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'web' } }), 'create project');
      const ctx = async (key, headers) => ok2xx(await request(s.base, 'GET', '/auth/context', { key, headers }), 'auth context');
      const expect = (keyId, cred, eff, org) => ({
        authentication: { method: 'api_key', source: 'api_key', credential_id: keyId },
        authorization: { credential_scope: cred ? { project_id: cred } : {}, effective_scope: { project_id: eff } },
        organization: { id: org },
        principal: { id: keyId, type: 'api_key' },
      });
      // An organization key: no credential scope, acting on the default project.
      const a = await ctx(s.key);
      assert(/^[a-z0-9]{24}$/.test(a.organization.id), `organization id ${a.organization.id}`);
      eq(a, expect(orgKeyId, null, def.id, a.organization.id), 'org key');
      // The same key with the project headers (id, or name): that project is the effective scope.
      eq(await ctx(s.key, { 'X-Kernel-Project-Id': web.id }), expect(orgKeyId, null, web.id, a.organization.id), 'org key + X-Kernel-Project-Id');
      eq(await ctx(s.key, { 'X-Kernel-Project': 'web' }), expect(orgKeyId, null, web.id, a.organization.id), 'org key + X-Kernel-Project');
      // A project-scoped key: its project is both scopes.
      const pk = await projectKey(s, web);
      eq(await ctx(pk.key), expect(pk.id, web.id, web.id, a.organization.id), 'project key');
      isError(await request(s.base, 'GET', '/auth/context', { key: pk.key, headers: { 'X-Kernel-Project': 'default' } }), 403, 'forbidden');
      // No key, or a wrong one.
      isError(await request(s.base, 'GET', '/auth/context'), 401, 'unauthorized');
      isError(await request(s.base, 'GET', '/auth/context', { key: 'bd_not_a_key' }), 401, 'unauthorized');
    }),
  },
  {
    name: 'issue 33.3: X-Kernel-Project selects a project by name or id beside X-Kernel-Project-Id; unknown -> 404, the two disagreeing -> 400',
    fn: () => server(async (s) => {
      const web = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'web' } }), 'create project');
      const inWeb = ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, headers: { 'X-Kernel-Project': 'web' }, body: { name: 'p-by-name' } }), 'profile by project name');
      ok2xx(await request(s.base, 'POST', '/profiles', { key: s.key, headers: { 'X-Kernel-Project': web.id }, body: { name: 'p-by-id' } }), 'profile by project id');
      const names = async (headers) => ok2xx(await request(s.base, 'GET', '/profiles', { key: s.key, headers }), 'list').map((p) => p.name).sort();
      eq(await names({ 'X-Kernel-Project-Id': web.id }), ['p-by-id', 'p-by-name'], 'profiles of web');
      eq(await names({}), [], 'profiles of the default project');
      eq(ok2xx(await request(s.base, 'GET', '/profiles/p-by-name', { key: s.key, headers: { 'X-Kernel-Project': 'web', 'X-Kernel-Project-Id': web.id } }), 'both headers agree').id, inWeb.id, 'both headers');
      const nf = await request(s.base, 'GET', '/profiles', { key: s.key, headers: { 'X-Kernel-Project': 'nope' } });
      isError(nf, 404, 'project_not_found');
      assert(nf.json.message.includes('X-Kernel-Project'), `names the header: ${nf.json.message}`);
      const two = await request(s.base, 'GET', '/profiles', { key: s.key, headers: { 'X-Kernel-Project': 'default', 'X-Kernel-Project-Id': web.id } });
      isError(two, 400);
      assert(/X-Kernel-Project\b.*X-Kernel-Project-Id/.test(two.json.message), `names both headers: ${two.json.message}`);
    }),
  },
  {
    name: 'issue 33.3: /org/projects/{id_or_name}: a project is read, renamed and deleted by its name as by its id',
    fn: () => server(async (s) => {
      const p = ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'named' } }), 'create');
      eq(ok2xx(await request(s.base, 'GET', '/org/projects/named', { key: s.key }), 'get by name').id, p.id, 'get by name');
      eq(ok2xx(await request(s.base, 'PATCH', '/org/projects/named', { key: s.key, body: { name: 'renamed' } }), 'patch by name').id, p.id, 'patch by name');
      isError(await request(s.base, 'GET', '/org/projects/named', { key: s.key }), 404, 'project_not_found');
      const del = await request(s.base, 'DELETE', '/org/projects/renamed', { key: s.key });
      eq(del.status, 204, del.text);
      isError(await request(s.base, 'GET', `/org/projects/${p.id}`, { key: s.key }), 404, 'project_not_found');
    }),
  },
  {
    name: 'issue 33.3: OTLP destinations at /telemetry/destinations[/{id_or_name}], the same records as /org/telemetry/destinations',
    fn: () => server(async (s) => {
      const d = ok2xx(await request(s.base, 'POST', '/telemetry/destinations', { key: s.key, body: { name: 'collector', endpoint: OTLP } }), 'create');
      eq(d.name, 'collector', 'name');
      const list = ok2xx(await request(s.base, 'GET', '/telemetry/destinations', { key: s.key }), 'list');
      eq((Array.isArray(list) ? list : list.data || []).map((x) => x.id), [d.id], 'list');
      eq(ok2xx(await request(s.base, 'GET', '/telemetry/destinations/collector', { key: s.key }), 'get by name').id, d.id, 'get by name');
      eq(ok2xx(await request(s.base, 'GET', `/org/telemetry/destinations/${d.id}`, { key: s.key }), 'old path').id, d.id, 'old path');
      const up = ok2xx(await request(s.base, 'PATCH', '/telemetry/destinations/collector', { key: s.key, body: { name: 'collector2' } }), 'patch by name');
      eq([up.id, up.name], [d.id, 'collector2'], 'patched');
      const pk = await projectKey(s, ok2xx(await request(s.base, 'GET', '/org/projects/default', { key: s.key }), 'default'));
      isError(await request(s.base, 'POST', '/telemetry/destinations', { key: pk.key, body: { name: 'x', endpoint: OTLP } }), 403, 'forbidden');
      isError(await request(s.base, 'POST', '/telemetry/destinations', { key: s.key, body: { name: 'x', endpoint: 'ftp://a' } }), 400);
      const del = await request(s.base, 'DELETE', '/telemetry/destinations/collector2', { key: s.key });
      eq(del.status, 204, del.text);
      isError(await request(s.base, 'GET', `/telemetry/destinations/${d.id}`, { key: s.key }), 404, 'not_found');
      isError(await request(s.base, 'GET', `/org/telemetry/destinations/${d.id}`, { key: s.key }), 404, 'not_found');
    }),
  },
];
