// Issue 37 item 3: the OpenAPI 3.1 document of every route served, at
// /openapi.yaml and /spec.yaml (and /openapi.json: the document is written in
// JSON, which is YAML 1.2), without a key. docs/openapi.yaml is its source,
// built into the binary. The route table (`browserd --routes`) and the
// document must agree both ways; a difference names each route, so that a
// route added to src/api/routes.c without its entry (or the reverse) is found
// by name. The interface document's four endpoints
// (shared/seed/000_418491eb794b6a8e.txt, "Endpoints") are checked field by field.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { BIN, withServer, request, assert, eq } from './lib.mjs';

const SOURCE = new URL('../../docs/openapi.yaml', import.meta.url);
// A route's trailing /* (any further segments: the WebDriver relay) is
// documented as one path parameter, {command}.
const norm = (p) => p.replace(/\/\*$/, '/{}').replace(/\{[^}]*\}/g, '{}');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// The binary's routes: [{method, pattern, auth}] (auth none, key or admin).
function routes() {
  return execFileSync(BIN, ['--routes'], { encoding: 'utf8' }).trim().split('\n').map((l) => {
    const [method, pattern, auth] = l.split(' ');
    return { method, pattern, auth };
  });
}

async function served(s) {
  const res = await request(s.base, 'GET', '/openapi.yaml');
  eq(res.status, 200, `GET /openapi.yaml: ${res.text.slice(0, 200)}`);
  return JSON.parse(res.text);
}

const schemaOf = (doc, ref) => doc.components.schemas[ref.$ref.replace('#/components/schemas/', '')];
const keys = (o) => Object.keys(o || {}).sort();

export const tests = [
  {
    name: 'issue 37.3: /openapi.yaml, /spec.yaml and /openapi.json are served without a key (and with a wrong one), the bytes of docs/openapi.yaml, an OpenAPI 3.1 document that parses',
    fn: () => withServer({}, async (s) => {
      const source = readFileSync(SOURCE, 'utf8');
      for (const [path, type] of [['/openapi.yaml', /^application\/yaml/], ['/spec.yaml', /^application\/yaml/], ['/openapi.json', /^application\/json/]]) {
        const res = await request(s.base, 'GET', path);
        eq(res.status, 200, `GET ${path}: ${res.text.slice(0, 200)}`);
        assert(type.test(res.headers['content-type'] || ''), `${path} content-type ${res.headers['content-type']}`);
        assert(res.text === source, `${path} serves docs/openapi.yaml as built`);
        eq((await request(s.base, 'GET', path, { key: 'bd_not_a_key' })).status, 200, `${path} with a wrong key`);
      }
      const doc = JSON.parse(source);
      assert(/^3\.1\.\d+$/.test(doc.openapi), `openapi ${doc.openapi}`);
      assert(doc.info && doc.info.title && doc.info.version, 'info.title and info.version');
      assert(/501/.test(doc.info.description) && /left out/.test(doc.info.description), 'the description says the 501 routes are left out');
      // Every $ref resolves, every path parameter is declared.
      const refs = [];
      JSON.stringify(doc, (k, v) => { if (k === '$ref') refs.push(v); return v; });
      for (const r of refs) assert(schemaOf(doc, { $ref: r }), `unresolved ${r}`);
      for (const [p, item] of Object.entries(doc.paths))
        for (const m of METHODS.filter((x) => item[x])) {
          const names = [...p.matchAll(/\{([^}]*)\}/g)].map((x) => x[1]).sort();
          const declared = (item[m].parameters || []).filter((x) => x.in === 'path').map((x) => x.name).sort();
          eq(declared, names, `path parameters of ${m.toUpperCase()} ${p}`);
          assert(item[m].responses && Object.keys(item[m].responses).length, `responses of ${m.toUpperCase()} ${p}`);
        }
    }),
  },
  {
    name: 'issue 37.3: the route table (browserd --routes) and docs/openapi.yaml agree both ways, with the same authentication; each difference is named',
    fn: async () => {
      const doc = JSON.parse(readFileSync(SOURCE, 'utf8'));
      const table = new Map(routes().map((r) => [`${r.method} ${norm(r.pattern)}`, r]));
      const documented = new Map();
      for (const [p, item] of Object.entries(doc.paths))
        for (const m of METHODS.filter((x) => item[x])) documented.set(`${m.toUpperCase()} ${norm(p)}`, { path: p, op: item[m] });
      const problems = [];
      for (const [k, r] of table)
        if (!documented.has(k)) problems.push(`served but not in docs/openapi.yaml: ${r.method} ${r.pattern}`);
      for (const [k, d] of documented)
        if (!table.has(k)) problems.push(`in docs/openapi.yaml but not served: ${k.split(' ')[0]} ${d.path}`);
      for (const [k, r] of table) {
        const d = documented.get(k);
        if (!d) continue;
        const sec = d.op.security || doc.security;
        const auth = sec.length === 0 ? 'none' : sec.some((x) => x.adminToken) ? 'admin' : 'key';
        if (auth !== r.auth) problems.push(`${r.method} ${r.pattern}: served with auth ${r.auth}, documented as ${auth}`);
      }
      assert(problems.length === 0, `${problems.length} difference(s):\n  ${problems.join('\n  ')}`);
      assert(table.size > 100, `the table has ${table.size} routes`);
    },
  },
  {
    name: 'issue 37.3: the interface document\'s four endpoints are documented as it specifies them (PATCH /browsers/{id_or_name}, PATCH and GET /browser_pools/{id_or_name}, GET /org/entitlements)',
    fn: () => withServer({}, async (s) => {
      const doc = await served(s);
      const sessionPatch = doc.paths['/browsers/{id_or_name}'].patch;
      eq(sessionPatch.parameters.map((p) => [p.name, p.in, p.required]), [['id_or_name', 'path', true]], 'session update: id_or_name');
      assert(sessionPatch.requestBody.required === true, 'session update: the body is required');
      const upd = schemaOf(doc, sessionPatch.requestBody.content['application/json'].schema);
      eq(keys(upd.properties), ['disable_default_proxy', 'name', 'profile', 'proxy', 'proxy_id', 'start_url', 'tags', 'telemetry', 'viewport'], 'session update body fields');
      eq(upd.properties.start_url.maxLength, 2048, 'start_url max 2048');
      eq(upd.properties.viewport.properties.force.default, false, 'viewport.force default false');
      assert(upd.properties.disable_default_proxy.deprecated && upd.properties.proxy_id.deprecated, 'deprecated fields');
      eq(keys(sessionPatch.responses), ['200', '400', '401', '403', '404', '409', '500'], 'session update statuses');
      const browser = schemaOf(doc, sessionPatch.responses['200'].content['application/json'].schema);
      eq([...browser.required].sort(), ['cdp_ws_url', 'created_at', 'headless', 'memory', 'region', 'session_id', 'stealth', 'timeout_seconds', 'webdriver_ws_url'], 'Browser required fields');
      eq(keys(browser.properties), ['base_url', 'browser_live_view_url', 'cdp_ws_url', 'chrome_policy', 'created_at', 'deleted_at', 'gpu', 'headless', 'kiosk_mode', 'memory', 'name', 'network', 'pool', 'profile', 'profile_save_changes', 'proxy', 'proxy_id', 'region', 'session_id', 'start_url', 'stealth', 'tags', 'telemetry', 'timeout_seconds', 'usage', 'usage_status', 'vaults', 'viewport', 'webdriver_ws_url'], 'Browser fields');
      for (const st of ['400', '401', '403', '404', '409', '500'])
        eq(sessionPatch.responses[st].content['application/json'].schema.$ref, '#/components/schemas/Error', `${st} is an Error record`);
      const error = doc.components.schemas.Error;
      eq([...error.required].sort(), ['code', 'message'], 'Error required');
      eq(keys(error.properties), ['code', 'details', 'inner_error', 'message'], 'Error fields');
      eq(doc.components.schemas.Region.enum, ['us-east', 'eu-west', 'ap-southeast'], 'Region');
      eq(doc.components.schemas.BrowserMemory.enum, ['1GiB', '2GiB', '6GiB', '8GiB', '16GiB'], 'BrowserMemory');
      eq(doc.components.schemas.Tags.maxProperties, 50, 'Tags: up to 50 entries');
      eq(doc.components.schemas.BrowserCdpCommandMethod.enum.length, 38, 'BrowserCdpCommandMethod values');

      const poolItem = doc.paths['/browser_pools/{id_or_name}'];
      const poolUpd = schemaOf(doc, poolItem.patch.requestBody.content['application/json'].schema);
      eq(keys(poolUpd.properties), ['chrome_policy', 'discard_all_idle', 'extensions', 'fill_rate_per_minute', 'headless', 'kiosk_mode', 'name', 'network', 'profile', 'proxy_id', 'refresh_on_profile_update', 'size', 'start_url', 'stealth', 'telemetry', 'timeout_seconds', 'viewport'], 'pool update body fields');
      eq([poolUpd.properties.timeout_seconds.minimum, poolUpd.properties.timeout_seconds.maximum], [10, 259200], 'pool timeout_seconds 10..259200');
      eq(poolUpd.properties.extensions.maxItems, 20, 'pool extensions max 20');
      eq(poolUpd.properties.size.minimum, 1, 'pool size >= 1');
      eq(poolUpd.properties.fill_rate_per_minute.minimum, 0, 'fill rate >= 0');
      for (const op of [poolItem.patch, poolItem.get]) {
        eq(op.parameters.map((p) => p.name), ['id_or_name'], 'pool id_or_name');
        const pool = schemaOf(doc, op.responses['200'].content['application/json'].schema);
        eq(keys(pool.properties), ['acquired_count', 'available_count', 'browser_pool_config', 'created_at', 'extension_ids', 'id', 'name', 'profile_id', 'region'], 'BrowserPool fields');
        eq(op.responses.default.content['application/json'].schema.$ref, '#/components/schemas/Error', 'pool errors are Error records');
      }
      assert(!poolItem.get.requestBody, 'GET pool has no body');

      const entOp = doc.paths['/org/entitlements'].get;
      assert(!entOp.parameters && !entOp.requestBody, 'entitlements: no parameters, no body');
      const ent = schemaOf(doc, entOp.responses['200'].content['application/json'].schema);
      eq(keys(ent.properties.features.properties), ['browser_extensions', 'browser_pools', 'browser_replays', 'credential_providers', 'credentials', 'custom_proxies', 'file_io', 'gpu', 'managed_auth', 'managed_proxies', 'profiles', 'proxy_bypass_hosts', 'search', 'vaults'], 'entitlements features');
      eq(keys(ent.properties.limits.properties), ['default_max_concurrent_invocations_per_app', 'max_concurrent_browsers', 'max_concurrent_invocations', 'max_vaults'], 'entitlements limits');
      eq(keys(ent.properties.plan.properties), ['effective_id', 'id', 'is_trialing', 'status', 'trial_ends_at'], 'entitlements plan');
      // The server's own answer carries every documented field (it may add
      // its own, e.g. limits.max_profiles).
      const live = (await request(s.base, 'GET', '/org/entitlements', { key: s.key })).json;
      for (const part of ['features', 'limits', 'plan'])
        for (const k of keys(ent.properties[part].properties))
          assert(k in live[part], `GET /org/entitlements has the documented ${part}.${k}: ${JSON.stringify(live)}`);
      // Every endpoint of the four uses bearer authentication.
      for (const op of [sessionPatch, poolItem.patch, poolItem.get, entOp])
        assert(!op.security && doc.security.some((x) => x.bearerAuth), 'bearer authentication');
      eq(doc.components.securitySchemes.bearerAuth, { type: 'http', scheme: 'bearer', description: doc.components.securitySchemes.bearerAuth.description }, 'bearer scheme');
    }),
  },
];
