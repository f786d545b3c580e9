// The official SDK (@onkernel/sdk 0.84.x) against the real browserd binary
// (issue 8). The client is configured the way a user configures it: only the
// KERNEL_BASE_URL and KERNEL_API_KEY environment variables (plus the
// projectID option where a test selects a project).
//
// Every test is named `sdk <method>: ...` after the SDK method it checks, and
// records its outcome per method in build/compat-results.json:
//   served      the method works against browserd (the test passed)
//   not_served  browserd answers 501 with an Error record naming the feature
//   pending     the test is written, but the feature still answers 501
//   failed      the test failed (see "detail")
// scripts/compat_table.mjs turns that file into the README's table.
//
// Methods without a test of their own below get a generated test that
// expects the 501 (see the end of this file), so every SDK method is covered.
import { appendFileSync, chmodSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import Kernel, {
  APIError, AuthenticationError, BadRequestError, ConflictError, InternalServerError,
  KernelError, NotFoundError, PermissionDeniedError, RateLimitError,
} from '@onkernel/sdk';
import { startServer, startSite, request, assert, eq } from '../blackbox/lib.mjs';
import { sdkMethods, SDK_VERSION } from './sdk_methods.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const RESULTS = process.env.COMPAT_RESULTS || join(here, '..', '..', 'build', 'compat-results.json');

// ---- results file ----------------------------------------------------------

const results = { sdk: SDK_VERSION, started_at: new Date().toISOString(), methods: {}, tests: {} };
const RANK = { served: 0, not_served: 1, pending: 2, failed: 3 };

// Records one test's outcome and rewrites the file; a method's outcome is the
// worst of its tests' outcomes.
function record(test, methods, outcome, detail) {
  results.tests[test] = { methods, outcome, ...(detail ? { detail } : {}) };
  results.methods = {};
  for (const [name, t] of Object.entries(results.tests)) {
    for (const m of t.methods) {
      const cur = results.methods[m];
      if (!cur) results.methods[m] = { outcome: t.outcome, tests: [name], ...(t.detail ? { detail: t.detail } : {}) };
      else {
        cur.tests.push(name);
        if (RANK[t.outcome] > RANK[cur.outcome] || (t.outcome === cur.outcome && !cur.detail && t.detail)) {
          cur.outcome = t.outcome;
          if (t.detail) cur.detail = t.detail; else delete cur.detail;
        }
      }
    }
  }
  results.finished_at = new Date().toISOString();
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(RESULTS, `${JSON.stringify(results, null, 1)}\n`);
}

// One test about `method` (and the methods in `also`). fn(ctx) may call
// ctx.pending(reason) when the feature still answers 501, or
// ctx.notServed(reason). A test that fails or never finishes (runner timeout)
// leaves "failed" behind: it is recorded first and replaced on completion.
const tests = [];
const explicit = new Set();
function sdkTest(method, title, fn, timeout = 60000, also = []) {
  const name = `sdk ${method}: ${title}`;
  const methods = [method, ...also];
  methods.forEach((m) => explicit.add(m));
  tests.push({
    name, timeout,
    fn: async () => {
      const ctx = {
        outcome: 'served', detail: undefined,
        pending(why) { this.outcome = 'pending'; this.detail = why; console.log(`  skipped: ${method}: ${why}`); },
        notServed(why) { this.outcome = 'not_served'; this.detail = why; },
      };
      record(name, methods, 'failed', 'did not finish (timed out?)');
      try {
        await fn(ctx);
      } catch (e) {
        record(name, methods, 'failed', String(e && e.message || e).split('\n')[0].slice(0, 300));
        throw e;
      }
      record(name, methods, ctx.outcome, ctx.detail);
    },
  });
}

// ---- helpers ---------------------------------------------------------------

// A server on loopback with a temporary data folder; the client built from the
// environment, exactly as a user would.
async function withServer(fn, { env = {}, args = [] } = {}) {
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: 'compat-admin-token', ...env }, args });
  const saved = { base: process.env.KERNEL_BASE_URL, key: process.env.KERNEL_API_KEY };
  try {
    s.client = (opts) => {
      process.env.KERNEL_BASE_URL = s.base;
      process.env.KERNEL_API_KEY = s.key;
      return new Kernel(opts);
    };
    s.clientWithKey = (key, opts) => {
      process.env.KERNEL_BASE_URL = s.base;
      process.env.KERNEL_API_KEY = key;
      return new Kernel(opts);
    };
    await fn(s, s.client());
  } finally {
    process.env.KERNEL_BASE_URL = saved.base;
    process.env.KERNEL_API_KEY = saved.key;
    if (saved.base === undefined) delete process.env.KERNEL_BASE_URL;
    if (saved.key === undefined) delete process.env.KERNEL_API_KEY;
    await s.stop();
    s.cleanup();
  }
}

// Access-log lines of the server for one request line, e.g. "POST /org/projects 409".
// The SDK throws only after its retries, so every attempt was answered by then;
// the log line of the last one may still be on its way through the pipe.
async function accessLines(s, what) {
  const count = () => s.log.split('\n').filter((l) => l.includes(` access ${what} `)).length;
  const end = Date.now() + 3000;
  while (count() === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 100));
  return count();
}

// Runs fn, expecting it to throw an APIError of class cls with this status.
async function rejects(fn, cls, status, what) {
  let err;
  try { await fn(); } catch (e) { err = e; }
  assert(err, `${what}: expected ${cls.name} (${status}), got success`);
  assert(err instanceof cls, `${what}: expected ${cls.name}, got ${err && err.constructor.name}: ${err && err.message}`);
  eq(err.status, status, `${what}: status`);
  assert(err.error && typeof err.error.code === 'string' && typeof err.error.message === 'string',
    `${what}: Error record expected, got ${JSON.stringify(err.error)}`);
  // The SDK shows our message to users: "<status> <message>".
  eq(err.message, `${status} ${err.error.message}`, `${what}: the SDK's message is ours`);
  return err;
}

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
const ID = /^[a-z0-9]{24}$/;
function isTime(v, what) { assert(typeof v === 'string' && RFC3339.test(v), `${what}: RFC 3339 time expected, got ${JSON.stringify(v)}`); }
function isTimeOrNull(v, what) { if (v !== null) isTime(v, what); }
function keysOnly(obj, allowed, what) {
  for (const k of Object.keys(obj)) assert(allowed.includes(k), `${what}: unexpected field ${k}`);
}

// Checks a Browser record field by field against the interface document's table.
const BROWSER_FIELDS = ['session_id', 'created_at', 'cdp_ws_url', 'webdriver_ws_url', 'region', 'stealth', 'headless',
  'memory', 'timeout_seconds', 'base_url', 'browser_live_view_url', 'chrome_policy', 'deleted_at', 'gpu', 'kiosk_mode',
  'name', 'network', 'pool', 'profile', 'profile_save_changes', 'proxy', 'proxy_id', 'start_url', 'tags', 'telemetry',
  'usage', 'usage_status', 'vaults', 'viewport',
  // browserd's own (issue 38): the classic WebDriver URL beside webdriver_ws_url.
  'webdriver_url'];
function checkBrowser(b, what) {
  assert(b && typeof b === 'object', `${what}: Browser record expected`);
  keysOnly(b, BROWSER_FIELDS, what);
  assert(ID.test(b.session_id), `${what}: session_id ${b.session_id}`);
  isTime(b.created_at, `${what}.created_at`);
  assert(/^wss?:\/\/[^/]+\/browser\/cdp\?jwt=[\w-]+\.[\w-]+\.[\w-]+$/.test(b.cdp_ws_url), `${what}: cdp_ws_url ${b.cdp_ws_url}`);
  assert(typeof b.webdriver_ws_url === 'string' && /^wss?:\/\//.test(b.webdriver_ws_url), `${what}: webdriver_ws_url`);
  if ('webdriver_url' in b) assert(/^https?:\/\/[^/]+\/browser\/wd\/[\w.-]+$/.test(b.webdriver_url), `${what}: webdriver_url ${b.webdriver_url}`);
  assert(['us-east', 'eu-west', 'ap-southeast'].includes(b.region), `${what}: region ${b.region}`);
  eq(typeof b.stealth, 'boolean', `${what}.stealth`);
  eq(typeof b.headless, 'boolean', `${what}.headless`);
  assert(['1GiB', '2GiB', '6GiB', '8GiB', '16GiB'].includes(b.memory), `${what}: memory ${b.memory}`);
  assert(Number.isInteger(b.timeout_seconds), `${what}: timeout_seconds`);
  if ('deleted_at' in b) isTime(b.deleted_at, `${what}.deleted_at`);
  if ('usage_status' in b) assert(['pending', 'ready'].includes(b.usage_status), `${what}: usage_status`);
  if ('usage' in b) assert(Number.isInteger(b.usage.uptime_ms), `${what}: usage.uptime_ms`);
  if ('viewport' in b) {
    assert(Number.isInteger(b.viewport.width) && b.viewport.width >= 1, `${what}: viewport.width`);
    assert(Number.isInteger(b.viewport.height) && b.viewport.height >= 1, `${what}: viewport.height`);
  }
  if ('tags' in b) assert(b.tags && typeof b.tags === 'object', `${what}: tags`);
  if ('pool' in b) assert(typeof b.pool.id === 'string', `${what}: pool.id`);
  // base_url makes the SDK route curl and telemetry/stream (and browsers.fetch) to the session's
  // own URL: a live session has one, below the server's address; an ended one has none.
  if (b.deleted_at) assert(!('base_url' in b), `${what}: an ended session has no base_url`);
  else assert(typeof b.base_url === 'string' && /\/browser\/sessions\/[a-z0-9]+$/.test(b.base_url) && b.base_url.endsWith(b.session_id), `${what}: base_url ${b.base_url}`);
}

async function collect(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

// Creates a session through the SDK and always deletes it afterwards.
async function withBrowser(client, body, fn) {
  const b = await client.browsers.create({ headless: true, ...body });
  try { return await fn(b); } finally {
    await client.browsers.deleteByID(b.session_id).catch(() => {});
  }
}

// A second organization through the admin API (its plan and overrides given).
async function adminOrg(s, body) {
  const o = await request(s.base, 'POST', '/admin/orgs', { key: 'compat-admin-token', body });
  eq(o.status, 201, `admin org: ${o.text}`);
  const k = await request(s.base, 'POST', `/admin/orgs/${o.json.id}/api_keys`, { key: 'compat-admin-token', body: { name: 'compat' } });
  eq(k.status, 201, `admin key: ${k.text}`);
  return { org: o.json, key: k.json.key };
}


// ---- the client itself -----------------------------------------------------

tests.push({
  name: 'sdk client: configured only by KERNEL_BASE_URL and KERNEL_API_KEY, the client sends our key to our server',
  fn: () => withServer(async (s, client) => {
    eq(client.baseURL, s.base, 'baseURL from KERNEL_BASE_URL');
    eq(client.apiKey, s.key, 'apiKey from KERNEL_API_KEY');
    const page = await client.apiKeys.list();
    assert(page.getPaginatedItems().length >= 1, 'the bootstrap key is listed');
  }),
});

sdkTest('client.get', "GET /org/entitlements through the client's generic get: every field of the interface document", (ctx) =>
  withServer(async (s, client) => {
    const e = await client.get('/org/entitlements');
    keysOnly(e, ['features', 'limits', 'plan'], 'entitlements');
    const F = {
      browser_extensions: ['enabled', 'max_stored_per_org'], browser_pools: ['enabled'],
      browser_replays: ['enabled', 'retention_days'], credential_providers: ['enabled'], credentials: ['enabled'],
      custom_proxies: ['enabled'], file_io: ['enabled'], gpu: ['enabled'],
      managed_auth: ['enabled', 'health_check_interval_default_seconds', 'health_check_interval_min_seconds',
        'health_check_interval_max_seconds', 'max_connections'],
      managed_proxies: ['enabled'], profiles: ['enabled'], proxy_bypass_hosts: ['enabled'], search: ['enabled'], vaults: ['enabled'],
    };
    eq(Object.keys(e.features).sort(), Object.keys(F).sort(), 'features');
    for (const [f, keys] of Object.entries(F)) {
      eq(Object.keys(e.features[f]).sort(), [...keys].sort(), `features.${f}`);
      eq(e.features[f].enabled, true, `features.${f}.enabled on enterprise`);
    }
    eq(e.features.browser_extensions.max_stored_per_org, null, 'unlimited on enterprise');
    eq(e.features.browser_replays.retention_days, 90);
    eq(e.features.managed_auth.health_check_interval_default_seconds, 3600);
    eq(e.features.managed_auth.health_check_interval_min_seconds, 300);
    eq(e.features.managed_auth.health_check_interval_max_seconds, 86400);
    // The interface document's limits, plus the profile quotas this server
    // adds to the shape (docs/operator.md; issue 29.12), null on enterprise.
    eq(e.limits, { default_max_concurrent_invocations_per_app: 50, max_concurrent_browsers: null,
      max_concurrent_invocations: null, max_vaults: null, max_profiles: null, max_profile_bytes: null }, 'limits of enterprise');
    eq(e.plan, { id: 'enterprise', effective_id: 'enterprise', is_trialing: false, status: 'active', trial_ends_at: null }, 'plan');
  }), 30000);

// ---- browsers --------------------------------------------------------------

sdkTest('browsers.create', 'realistic arguments, the Browser record checked field by field', (ctx) =>
  withServer(async (s, client) => {
    const b = await client.browsers.create({
      headless: true, name: 'compat-create', tags: { team: 'qa', run: 'sdk-1' }, timeout_seconds: 120,
      viewport: { width: 1280, height: 800, refresh_rate: 60 }, stealth: false,
    });
    try {
      checkBrowser(b, 'created');
      eq(b.name, 'compat-create'); eq(b.tags, { team: 'qa', run: 'sdk-1' }); eq(b.timeout_seconds, 120);
      eq(b.viewport, { width: 1280, height: 800, refresh_rate: 60 }); eq(b.headless, true); eq(b.stealth, false);
      eq(b.region, 'us-east');
      assert(!('deleted_at' in b) && !('usage_status' in b), 'deleted_at/usage_status only on deleted sessions');
      assert(!b.cdp_ws_url.includes(s.key), 'the API key never appears in the CDP URL');
    } finally {
      await client.browsers.deleteByID(b.session_id);
    }
  }), 90000);

sdkTest('browsers.retrieve', 'by id and by name; include_deleted after deletion; unknown id -> NotFoundError', (ctx) =>
  withServer(async (s, client) => {
    const b = await client.browsers.create({ headless: true, name: 'compat-retrieve' });
    let deleted = false;
    try {
      const byId = await client.browsers.retrieve(b.session_id);
      checkBrowser(byId, 'by id');
      eq(byId.session_id, b.session_id); eq(byId.created_at, b.created_at); eq(byId.name, 'compat-retrieve');
      const byName = await client.browsers.retrieve('compat-retrieve');
      eq(byName.session_id, b.session_id, 'retrieve by name');
      await client.browsers.deleteByID(b.session_id);
      deleted = true;
      const e = await rejects(() => client.browsers.retrieve(b.session_id), NotFoundError, 404, 'deleted, without include_deleted');
      eq(e.error.code, 'not_found');
      const gone = await client.browsers.retrieve(b.session_id, { include_deleted: true });
      checkBrowser(gone, 'deleted');
      isTime(gone.deleted_at, 'deleted_at');
      assert(['pending', 'ready'].includes(gone.usage_status), 'usage_status on a deleted session');
    } finally {
      if (!deleted) await client.browsers.deleteByID(b.session_id).catch(() => {});
    }
    await rejects(() => client.browsers.retrieve('nosuchsession000000000000'), NotFoundError, 404, 'unknown id');
  }), 90000);

sdkTest('browsers.update', 'name, tags (replace), start_url; Browser record returned; invalid viewport -> BadRequestError', (ctx) =>
  withServer(async (s, client) => {
    await withBrowser(client, { name: 'compat-update', tags: { a: '1' } }, async (b) => {
      const u = await client.browsers.update(b.session_id, { name: 'compat-renamed', tags: { b: '2' }, start_url: 'about:blank' });
      checkBrowser(u, 'updated');
      eq(u.session_id, b.session_id); eq(u.name, 'compat-renamed'); eq(u.tags, { b: '2' }, 'a map replaces the whole tag set');
      eq(u.start_url, 'about:blank', 'start_url records what was requested');
      const cleared = await client.browsers.update('compat-renamed', { tags: {} });
      assert(!cleared.tags || Object.keys(cleared.tags).length === 0, '{} clears all tags');
      const e = await rejects(() => client.browsers.update(b.session_id, { viewport: { width: 0, height: 600 } }),
        BadRequestError, 400, 'viewport.width 0');
      eq(e.error.code, 'bad_request');
      assert(Array.isArray(e.error.details) && e.error.details.some((d) => d.code === 'invalid_input' && /viewport\.width/.test(d.message)),
        `details name viewport.width: ${JSON.stringify(e.error.details)}`);
      const p = await rejects(() => client.browsers.update(b.session_id, { proxy: {} }), BadRequestError, 400, 'empty proxy object');
      assert(/proxy/.test(JSON.stringify(p.error)), 'the error names proxy');
    });
  }), 90000);

sdkTest('browsers.list', 'auto-pagination across several pages (limit 1 and 2), status, query and tags filters', (ctx) =>
  withServer(async (s, client) => {
    // Three live sessions, and four ended ones to page through with status=deleted.
    const ended = [];
    for (let i = 0; i < 4; i++) {
      const b = await client.browsers.create({ headless: true, name: `compat-old-${i}` });
      await client.browsers.deleteByID(b.session_id);
      ended.push(b.session_id);
    }
    const live = [];
    try {
      for (let i = 0; i < 3; i++) live.push(await client.browsers.create({ headless: true, name: `compat-live-${i}`, tags: { slot: String(i) } }));
      const first = await client.browsers.list({ limit: 1 });
      eq(first.getPaginatedItems().length, 1, 'one item per page');
      eq(first.has_more, true, 'X-Has-More on the first page');
      eq(first.next_offset, 1, 'X-Next-Offset is the absolute offset of the next page');
      const all = await collect(client.browsers.list({ limit: 1 }));
      eq(all.map((b) => b.session_id).sort(), live.map((b) => b.session_id).sort(), 'auto-pagination, limit 1 (3 pages)');
      all.forEach((b, i) => checkBrowser(b, `listed ${i}`));
      const old = await collect(client.browsers.list({ status: 'deleted', limit: 2 }));
      eq(old.map((b) => b.session_id).sort(), [...ended].sort(), 'status=deleted, limit 2 (2 pages)');
      old.forEach((b) => isTime(b.deleted_at, 'deleted_at of a listed deleted session'));
      const every = await collect(client.browsers.list({ status: 'all', limit: 3 }));
      eq(every.length, 7, 'status=all');
      const q = await collect(client.browsers.list({ query: 'live-1' }));
      eq(q.map((b) => b.name), ['compat-live-1'], 'query is a substring of the name');
      const t = await collect(client.browsers.list({ tags: { slot: '2' } }));
      eq(t.map((b) => b.name), ['compat-live-2'], 'tags[slot]=2');
      const last = await client.browsers.list({ limit: 100 });
      eq(last.has_more, false, 'X-Has-More false on the last page');
      eq(last.next_offset, 0, 'X-Next-Offset 0 on the last page');
      eq(last.hasNextPage(), false, 'the SDK stops');
    } finally {
      for (const b of live) await client.browsers.deleteByID(b.session_id).catch(() => {});
    }
  }), 240000);

sdkTest('browsers.deleteByID', 'by id and by name, 204 resolves to null; the session ends; twice -> NotFoundError', (ctx) =>
  withServer(async (s, client) => {
    const a = await client.browsers.create({ headless: true });
    eq(await client.browsers.deleteByID(a.session_id), null, 'DELETE answers 2xx with no body');
    const b = await client.browsers.create({ headless: true, name: 'compat-delete' });
    await client.browsers.deleteByID('compat-delete');
    eq((await client.browsers.retrieve(b.session_id, { include_deleted: true })).session_id, b.session_id);
    await rejects(() => client.browsers.deleteByID(a.session_id), NotFoundError, 404, 'second delete');
    eq((await collect(client.browsers.list())).length, 0, 'no live sessions left');
  }), 90000);

sdkTest('browsers.create', 'invalid arguments -> BadRequestError with one invalid_input detail per problem', (ctx) =>
  withServer(async (s, client) => {
    const e = await rejects(() => client.browsers.create({ timeout_seconds: 5, viewport: { width: -1, height: 10 }, tags: { 'bad key!': 'v' } }),
      BadRequestError, 400, 'three problems');
    eq(e.error.code, 'bad_request');
    const msgs = (e.error.details || []).map((d) => `${d.code} ${d.message}`).join('\n');
    for (const f of ['timeout_seconds', 'viewport.width', 'tags'])
      assert(msgs.includes(f), `a detail names ${f}:\n${msgs}`);
    assert(e.error.details.every((d) => d.code === 'invalid_input'), 'detail codes');
    eq(await accessLines(s, 'POST /browsers 400'), 1, 'a 400 is not retried');
  }), 30000);

sdkTest('browsers.create', 'over limits.max_concurrent_browsers -> RateLimitError (the SDK retries twice, honouring Retry-After)', (ctx) =>
  withServer(async (s) => {
    const { key } = await adminOrg(s, { name: 'compat-limited', plan: 'developer', overrides: { limits: { max_concurrent_browsers: 0 } } });
    const client = s.clientWithKey(key);
    const e = await rejects(() => client.browsers.create({ headless: true }), RateLimitError, 429, 'limit 0');
    assert(/max_concurrent_browsers/.test(e.error.message), `message names the limit: ${e.error.message}`);
    assert(Number(e.headers.get('retry-after')) > 0, 'Retry-After');
    eq(await accessLines(s, 'POST /browsers 429'), 3, 'first attempt and two retries');
  }), 60000);

sdkTest('browsers.create', 'the projectID option selects the project (X-Kernel-Project-Id); an unknown project -> NotFoundError', (ctx) =>
  withServer(async (s, client) => {
    const p = await client.projects.create({ name: 'compat-proj' });
    const inProject = s.client({ projectID: p.id });
    const b = await inProject.browsers.create({ headless: true, name: 'compat-in-project' });
    try {
      eq((await collect(inProject.browsers.list())).map((x) => x.session_id), [b.session_id], 'listed in its project');
      eq((await collect(client.browsers.list())).length, 0, 'not in the default project');
      await rejects(() => client.browsers.retrieve(b.session_id), NotFoundError, 404, 'from the default project');
      eq((await s.client({ projectID: 'compat-proj' }).browsers.retrieve(b.session_id)).session_id, b.session_id, 'project selected by name');
    } finally {
      await inProject.browsers.deleteByID(b.session_id);
    }
    const e = await rejects(() => s.client({ projectID: 'nosuchproject' }).browsers.list(), NotFoundError, 404, 'unknown project');
    eq(e.error.code, 'project_not_found');
  }), 90000);

sdkTest('browsers.fetch', 'through {base_url}/curl/raw with the session jwt: the target\'s status, headers and body; POST bodies; a target 404 is an APIError sent once (x-should-retry: false)', async () => {
  let hits = 0;
  const site = http.createServer((rq, rs) => {
    hits++;
    let body = '';
    rq.on('data', (d) => { body += d; });
    rq.on('end', () => {
      if (rq.url === '/missing') { rs.writeHead(404, { 'content-type': 'text/plain' }); return rs.end('nope'); }
      rs.writeHead(200, { 'content-type': 'application/json', 'x-site': 'yes' });
      rs.end(JSON.stringify({ method: rq.method, body, ua: rq.headers['user-agent'], auth: rq.headers.authorization || null, stainless: Object.keys(rq.headers).filter((k) => k.startsWith('x-stainless')) }));
    });
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${site.address().port}`;
  try {
    await withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      let r = await client.browsers.fetch(b.session_id, `${base}/x`);
      eq(r.status, 200, 'status');
      eq(r.headers.get('x-site'), 'yes', 'a target header');
      let j = await r.json();
      eq(j.method, 'GET', 'method');
      assert(/Chrome/.test(j.ua), `the browser's User-Agent, not the client's: ${j.ua}`);
      eq(j.auth, null, 'no Authorization reaches the target');
      eq(j.stainless.length, 0, 'no X-Stainless-* header reaches the target');
      r = await client.browsers.fetch(b.session_id, `${base}/x`, { method: 'POST', body: 'payload', headers: { 'content-type': 'text/plain' } });
      j = await r.json();
      eq(j.method, 'POST', 'POST');
      eq(j.body, 'payload', 'POST body');
      const before = hits;
      let err;
      try { await client.browsers.fetch(b.session_id, `${base}/missing`); } catch (e) { err = e; }
      assert(err instanceof APIError && err.status === 404, `a target 404 is an APIError: ${err}`);
      eq(hits - before, 1, 'sent once');
      assert(!/jwt=/.test(s.log), 'no jwt= in the server log');
      await client.browsers.deleteByID(b.session_id);
    }, { args: ['--allow-loopback', `127.0.0.1:${site.address().port}`] });
  } finally { site.close(); }
}, 120000);

// ---- computer controls (issue 17) ------------------------------------------

// A loopback page for the agent's hands: a button, a form that submits on
// Enter, a scrollable body, and a box that follows mouse drags.
const COMPUTER_PAGE = `<title>t</title><body style="margin:0;height:4000px">
<button id=b style="position:absolute;left:10px;top:10px;width:100px;height:40px" onclick="this.textContent='clicked'">go</button>
<form id=f onsubmit="event.preventDefault();document.title='submitted:'+document.getElementById('i').value"><input id=i style="position:absolute;left:10px;top:70px;width:200px;height:30px"></form>
<div id=d style="position:absolute;left:10px;top:120px;width:50px;height:50px;background:red"></div>
<script>let drag=null;const d=document.getElementById('d');
d.onmousedown=(e)=>{drag={x:e.clientX-d.offsetLeft,y:e.clientY-d.offsetTop}};
onmousemove=(e)=>{if(drag){d.style.left=(e.clientX-drag.x)+'px';d.style.top=(e.clientY-drag.y)+'px'}};
onmouseup=()=>{drag=null};</script></body>`;

// Width and height of a PNG (its IHDR chunk).
function pngSize(buf) {
  eq(buf.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'a PNG signature');
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}

sdkTest('browsers.computer.clickMouse', 'every computer method on a real page, headless and headful: click, type, Enter submits, scroll, drag, move and position, clipboard round trip and paste, screenshot and region, batch, cursor; bounds -> BadRequestError', (ctx) =>
  (async () => {
    const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end(COMPUTER_PAGE); });
    try {
      await withServer(async (s, client) => {
        for (const headless of [true, false]) {
          const b = await client.browsers.create({ headless, start_url: `${site.url}/` });
          const pw = await chromium.connectOverCDP(b.cdp_ws_url);
          try {
            const page = pw.contexts()[0].pages()[0];
            await page.waitForSelector('#b');
            const c = client.browsers.computer;
            const mode = headless ? 'headless' : 'headful';
            // Headful input is the X screen's (the page starts below the
            // browser's UI) and reaches the page a moment after the call.
            const [ox, oy] = headless ? [0, 0] : await page.evaluate(() => [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]);
            // Chrome drops input to a page until it has presented a frame of it.
            await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
            await c.clickMouse(b.session_id, { x: ox + 60, y: oy + 30 });
            await page.waitForFunction(() => document.getElementById('b').textContent === 'clicked');
            eq(await page.textContent('#b'), 'clicked', `${mode}: the click reached the button`);
            await c.clickMouse(b.session_id, { x: ox + 100, y: oy + 85 });
            await c.typeText(b.session_id, { text: 'abc' });
            await page.waitForFunction(() => document.getElementById('i').value === 'abc');
            eq(await page.inputValue('#i'), 'abc', `${mode}: typed text lands in the focused input`);
            await c.pressKey(b.session_id, { keys: ['Return'] });
            await page.waitForFunction(() => document.title.startsWith('submitted'));
            eq(await page.title(), 'submitted:abc', `${mode}: Return submits the form`);
            await c.scroll(b.session_id, { x: ox + 300, y: oy + 300, delta_y: 3 });
            await page.waitForFunction(() => window.scrollY > 0);
            // Back to the top once the wheel's smooth scrolling is over.
            for (let y = -1, now; (now = await page.evaluate(() => window.scrollY)) !== y; y = now) await page.waitForTimeout(150);
            await page.evaluate(() => window.scrollTo(0, 0));
            await c.dragMouse(b.session_id, { path: [[ox + 35, oy + 145], [ox + 135, oy + 195], [ox + 235, oy + 245]] });
            await page.waitForFunction(() => Math.abs(parseInt(document.getElementById('d').style.left, 10) - 210) <= 2).catch(() => {});
            const left = await page.evaluate(() => parseInt(document.getElementById('d').style.left, 10));
            assert(Math.abs(left - 210) <= 2, `${mode}: the drag moved the box to x=210 (got ${left})`);
            await c.moveMouse(b.session_id, { x: 400, y: 401 });
            eq(await c.getMousePosition(b.session_id), { x: 400, y: 401 }, `${mode}: the position reads back`);
            await c.writeClipboard(b.session_id, { text: `clip ${mode}` });
            eq(await c.readClipboard(b.session_id), { text: `clip ${mode}` }, `${mode}: the clipboard round-trips`);
            await c.clickMouse(b.session_id, { x: ox + 100, y: oy + 85 });
            await c.pressKey(b.session_id, { keys: ['ctrl+a'] });
            await c.pressKey(b.session_id, { keys: ['Ctrl+v'] });
            await page.waitForFunction((t) => document.getElementById('i').value === t, `clip ${mode}`, { timeout: 20000 }).catch(() => {});
            eq(await page.inputValue('#i'), `clip ${mode}`, `${mode}: the page's paste sees the clipboard`);
            const shot = Buffer.from(await (await c.captureScreenshot(b.session_id)).arrayBuffer());
            eq(pngSize(shot), [1920, 1080], `${mode}: a screenshot has the screen's size`);
            const crop = Buffer.from(await (await c.captureScreenshot(b.session_id, { region: { x: 5, y: 5, width: 200, height: 100 } })).arrayBuffer());
            eq(pngSize(crop), [200, 100], `${mode}: a region has the region's size`);
            await c.batch(b.session_id, { actions: [
              { type: 'move_mouse', move_mouse: { x: 10, y: 10, smooth: false } },
              { type: 'sleep', sleep: { duration_ms: 10 } },
              { type: 'type_text', type_text: { text: 'z' } },
              { type: 'click_mouse', click_mouse: { x: 61, y: 31 } },
            ] });
            eq(await c.getMousePosition(b.session_id), { x: 61, y: 31 }, `${mode}: a batch applies in order`);
            eq(await c.setCursorVisibility(b.session_id, { hidden: true }), { ok: true });
            await rejects(() => c.clickMouse(b.session_id, { x: 1920, y: 5 }), BadRequestError, 400, 'x off the screen');
            await rejects(() => c.pressKey(b.session_id, { keys: [] }), BadRequestError, 400, 'no keys');
            await rejects(() => c.batch(b.session_id, { actions: [] }), BadRequestError, 400, 'empty batch');
            await rejects(() => c.batch(b.session_id, { actions: Array.from({ length: 101 }, () => ({ type: 'sleep', sleep: { duration_ms: 0 } })) }),
              BadRequestError, 400, '101 actions');
            const bad = await rejects(() => c.batch(b.session_id, { actions: [{ type: 'sleep', sleep: { duration_ms: 0 } }, { type: 'warp' }] }),
              BadRequestError, 400, 'unknown action type');
            assert(/actions\[1\].*unsupported action type: warp/.test(bad.error.message), bad.error.message);
          } finally { await pw.close(); }
          await client.browsers.deleteByID(b.session_id);
          await rejects(() => client.browsers.computer.clickMouse(b.session_id, { x: 1, y: 1 }), ConflictError, 409, 'an ended session');
        }
        await rejects(() => client.browsers.computer.clickMouse('aaaaaaaaaaaaaaaaaaaaaaaa', { x: 1, y: 1 }), NotFoundError, 404, 'an unknown session');
      }, { args: site.allow });
    } finally { site.close(); }
  })(), 120000, ['browsers.computer.batch', 'browsers.computer.captureScreenshot', 'browsers.computer.dragMouse',
  'browsers.computer.getMousePosition', 'browsers.computer.moveMouse', 'browsers.computer.pressKey',
  'browsers.computer.readClipboard', 'browsers.computer.scroll', 'browsers.computer.setCursorVisibility',
  'browsers.computer.typeText', 'browsers.computer.writeClipboard']);

sdkTest('browsers.computer.typeText', 'two sessions typed into at once never see each other\'s input; each call is a platform telemetry event (issue 33.5)', (ctx) =>
  (async () => {
    const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end(COMPUTER_PAGE); });
    try {
      await withServer(async (s, client) => {
        const [a, b] = await Promise.all([1, 2].map(() => client.browsers.create({ headless: true, start_url: `${site.url}/`, telemetry: { enabled: true, browser: { platform: { enabled: true } } } })));
        const pws = await Promise.all([a, b].map((x) => chromium.connectOverCDP(x.cdp_ws_url)));
        try {
          const pages = pws.map((p) => p.contexts()[0].pages()[0]);
          await Promise.all(pages.map((p) => p.waitForSelector('#i')));
          await Promise.all([a, b].map((x) => client.browsers.computer.clickMouse(x.session_id, { x: 100, y: 85 })));
          await Promise.all([[a, 'first-session-text'], [b, 'second-session-text']].map(([x, t]) =>
            client.browsers.computer.typeText(x.session_id, { text: t, delay: 5 })));
          eq(await pages[0].inputValue('#i'), 'first-session-text', 'session A has only its own text');
          eq(await pages[1].inputValue('#i'), 'second-session-text', 'session B has only its own text');
        } finally { await Promise.all(pws.map((p) => p.close())); }
        const evs = [];
        for await (const e of client.browsers.telemetry.events(a.session_id, { category: 'platform' })) evs.push(e);
        const calls = evs.map((e) => e.event).filter((e) => e.type === 'api_call');
        assert(calls.some((e) => e.data.operation_id === 'typeText' && e.data.status === 200 && e.data.duration_ms >= 0),
          `a platform event for typeText (issue 33.5): ${JSON.stringify(calls)}`);
      }, { args: site.allow });
    } finally { site.close(); }
  })(), 90000);

// ---- logs (issue 20, part) ---------------------------------------------------

sdkTest('browsers.logs.stream', "a session's own logs as SSE LogEvents: the browser's (supervisor chromium), a file of its own named as its processes see it (/tmp/agent.log), follow delivers new lines; host paths, .. and symlinks out -> NotFoundError naming no host path", (ctx) =>
  withServer(async (s, client) => {
    const b = await client.browsers.create({ headless: true });
    const logs = client.browsers.logs;
    const all = [];
    for await (const ev of await logs.stream(b.session_id, { source: 'supervisor', supervisor_process: 'chromium', follow: false })) all.push(ev);
    assert(all.length > 0, 'the browser has logged something');
    for (const ev of all) {
      eq(ev.event, 'log');
      assert(typeof ev.message === 'string' && ev.message.length > 0, 'a message');
      assert(!Number.isNaN(Date.parse(ev.timestamp)), `a timestamp: ${ev.timestamp}`);
    }
    // The session's own files (its /tmp) on the owner node's host; the path
    // the client names is the session's own (issue 31.7).
    const home = s.sessionDir(b.session_id);
    const file = join(`${home}.root`, 'tmp', 'agent.log');
    writeFileSync(file, 'first\n\nsecond\n');
    chmodSync(file, 0o644);
    const lines = [];
    for await (const ev of await logs.stream(b.session_id, { source: 'path', path: '/tmp/agent.log', follow: false })) lines.push(ev.message);
    eq(lines, ['first', 'second'], 'a file of the session, line by line (empty lines skipped)');
    // follow: only lines written after the stream opened.
    const live = await logs.stream(b.session_id, { source: 'path', path: '/tmp/agent.log' });
    const it = live[Symbol.asyncIterator]();
    const next = it.next();
    appendFileSync(file, 'third\n');
    eq((await next).value.message, 'third', 'follow delivers a new line');
    live.controller.abort();
    symlinkSync('/etc/shadow', join(`${home}.root`, 'tmp', 'shadow'));
    for (const path of [join(s.dir, 'bootstrap-api-key'), file, '/tmp/../../../etc/shadow', '/tmp/shadow', '/etc/passwd']) {
      const e = await rejects(() => logs.stream(b.session_id, { source: 'path', path, follow: false }), NotFoundError, 404, `${path} is refused`);
      assert(!String(e.message).includes(s.dir), `the refusal names no host path: ${e.message}`);
    }
    await rejects(() => logs.stream(b.session_id, { source: 'path', path: '/tmp', follow: false }), BadRequestError, 400, 'a folder');
    await rejects(() => logs.stream(b.session_id, { source: 'supervisor', supervisor_process: 'sshd', follow: false }), BadRequestError, 400, 'unknown process');
    await rejects(() => logs.stream(b.session_id, { source: 'supervisor', supervisor_process: 'xvfb', follow: false }), NotFoundError, 404, 'headless: no X server log');
    await client.browsers.deleteByID(b.session_id);
  }), 60000);

// ---- projects --------------------------------------------------------------

const PROJECT_FIELDS = ['id', 'name', 'status', 'created_at', 'updated_at'];
function checkProject(p, what) {
  eq(Object.keys(p).sort(), [...PROJECT_FIELDS].sort(), `${what}: fields`);
  assert(ID.test(p.id), `${what}: id`);
  assert(['active', 'archived'].includes(p.status), `${what}: status`);
  isTime(p.created_at, `${what}.created_at`); isTime(p.updated_at, `${what}.updated_at`);
}

sdkTest('projects.create', 'record field by field; duplicate name -> ConflictError, not retried', (ctx) =>
  withServer(async (s, client) => {
    const p = await client.projects.create({ name: 'compat-a' });
    checkProject(p, 'created'); eq(p.name, 'compat-a'); eq(p.status, 'active');
    const e = await rejects(() => client.projects.create({ name: 'compat-a' }), ConflictError, 409, 'duplicate');
    eq(e.headers.get('x-should-retry'), 'false', 'x-should-retry: false');
    eq(await accessLines(s, 'POST /org/projects 409'), 1, 'the SDK sent the conflicting request once');
    await rejects(() => client.projects.create({ name: '' }), BadRequestError, 400, 'empty name');
  }), 30000);

sdkTest('projects.retrieve', 'by id and by name; unknown -> NotFoundError', (ctx) =>
  withServer(async (s, client) => {
    const p = await client.projects.create({ name: 'compat-r' });
    const r = await client.projects.retrieve(p.id);
    checkProject(r, 'retrieved'); eq(r, p, 'same record');
    eq((await client.projects.retrieve('compat-r')).id, p.id, 'by name');
    await rejects(() => client.projects.retrieve('nosuchproject00000000000'), NotFoundError, 404, 'unknown');
  }), 30000);

sdkTest('projects.update', 'rename and archive; archived project selected -> NotFoundError project_not_found', (ctx) =>
  withServer(async (s, client) => {
    const p = await client.projects.create({ name: 'compat-u' });
    const u = await client.projects.update(p.id, { name: 'compat-u2' });
    checkProject(u, 'renamed'); eq(u.name, 'compat-u2'); eq(u.created_at, p.created_at);
    const a = await client.projects.update(p.id, { status: 'archived' });
    eq(a.status, 'archived');
    const e = await rejects(() => s.client({ projectID: p.id }).browsers.list(), NotFoundError, 404, 'archived project');
    eq(e.error.code, 'project_not_found');
    eq((await client.projects.update(p.id, { status: 'active' })).status, 'active', 'unarchive');
  }), 30000);

sdkTest('projects.list', 'auto-pagination across several pages', (ctx) =>
  withServer(async (s, client) => {
    for (let i = 0; i < 5; i++) await client.projects.create({ name: `compat-l${i}` });
    const page = await client.projects.list({ limit: 2 });
    eq(page.getPaginatedItems().length, 2); eq(page.has_more, true); eq(page.next_offset, 2);
    const all = await collect(client.projects.list({ limit: 2 }));
    eq(all.length, 6, 'default + 5 over 3 pages');
    eq(new Set(all.map((p) => p.id)).size, 6, 'no project twice');
    all.forEach((p, i) => checkProject(p, `listed ${i}`));
  }), 30000);

sdkTest('projects.list', "the SDK's filters: name (exact) and query (substring)", (ctx) =>
  withServer(async (s, client) => {
    await client.projects.create({ name: 'alpha' });
    await client.projects.create({ name: 'beta' });
    eq((await collect(client.projects.list({ name: 'alpha' }))).map((p) => p.name), ['alpha'], 'name=alpha');
    eq((await collect(client.projects.list({ query: 'et' }))).map((p) => p.name), ['beta'], 'query=et');
  }), 30000);

sdkTest('projects.delete', '204 resolves to null; gone afterwards; the last project -> ConflictError', (ctx) =>
  withServer(async (s, client) => {
    const p = await client.projects.create({ name: 'compat-d' });
    eq(await client.projects.delete(p.id), null);
    await rejects(() => client.projects.retrieve(p.id), NotFoundError, 404, 'deleted');
    const [only] = await collect(client.projects.list());
    const e = await rejects(() => client.projects.delete(only.id), ConflictError, 409, 'last project');
    eq(e.headers.get('x-should-retry'), 'false');
  }), 30000);

// ---- API keys --------------------------------------------------------------

const KEY_FIELDS = ['id', 'name', 'masked_key', 'project_id', 'created_at', 'expires_at', 'deleted_at'];
function checkKey(k, what) {
  for (const f of KEY_FIELDS) assert(f in k, `${what}: field ${f} missing`);
  assert(ID.test(k.id), `${what}: id`);
  assert(typeof k.masked_key === 'string' && k.masked_key.length > 0, `${what}: masked_key`);
  isTime(k.created_at, `${what}.created_at`); isTimeOrNull(k.expires_at, `${what}.expires_at`); isTimeOrNull(k.deleted_at, `${what}.deleted_at`);
  assert(k.project_id === null || typeof k.project_id === 'string', `${what}: project_id`);
}

sdkTest('apiKeys.create', 'plaintext key shown once, works for a client; project-scoped key; expiry', (ctx) =>
  withServer(async (s, client) => {
    const k = await client.apiKeys.create({ name: 'compat-ci', days_to_expire: 30 });
    checkKey(k, 'created'); eq(k.name, 'compat-ci'); eq(k.project_id, null);
    assert(typeof k.key === 'string' && k.key.length > 20, 'plaintext key');
    assert(!k.masked_key.includes(k.key), 'masked');
    const days = (Date.parse(k.expires_at) - Date.parse(k.created_at)) / 86400000;
    assert(Math.abs(days - 30) < 0.01, `expires in 30 days (${days})`);
    eq((await s.clientWithKey(k.key).get('/org/entitlements')).plan.id, 'enterprise', 'the new key works');
    const p = await client.projects.create({ name: 'compat-kp' });
    const pk = await client.apiKeys.create({ name: 'compat-scoped', project_id: p.id });
    eq(pk.project_id, p.id);
    assert(!('key' in await client.apiKeys.retrieve(k.id)), 'the key is never shown again');
  }), 30000);

sdkTest('apiKeys.retrieve', 'field by field; deleted key -> NotFoundError unless include_deleted', (ctx) =>
  withServer(async (s, client) => {
    const k = await client.apiKeys.create({ name: 'compat-r' });
    const r = await client.apiKeys.retrieve(k.id);
    checkKey(r, 'retrieved'); eq(r.name, 'compat-r'); eq(r.masked_key, k.masked_key); eq(r.deleted_at, null);
    await client.apiKeys.delete(k.id);
    await rejects(() => client.apiKeys.retrieve(k.id), NotFoundError, 404, 'deleted');
    const d = await client.apiKeys.retrieve(k.id, { include_deleted: true }).catch((e) => {
      throw new Error(`retrieve(id, {include_deleted: true}) of a deleted key: ${e.message}`);
    });
    isTime(d.deleted_at, 'deleted_at');
  }), 30000);

sdkTest('apiKeys.update', 'rename', (ctx) =>
  withServer(async (s, client) => {
    const k = await client.apiKeys.create({ name: 'compat-u' });
    const u = await client.apiKeys.update(k.id, { name: 'compat-u2' });
    checkKey(u, 'updated'); eq(u.name, 'compat-u2'); eq(u.id, k.id);
    await rejects(() => client.apiKeys.update('nosuchkey000000000000000', { name: 'x' }), NotFoundError, 404, 'unknown');
  }), 30000);

sdkTest('apiKeys.list', 'auto-pagination across several pages; a wrong key -> AuthenticationError', (ctx) =>
  withServer(async (s, client) => {
    for (let i = 0; i < 4; i++) await client.apiKeys.create({ name: `compat-l${i}` });
    const all = await collect(client.apiKeys.list({ limit: 2 }));
    eq(all.length, 5, 'bootstrap + 4 over 3 pages');
    eq(new Set(all.map((k) => k.id)).size, 5);
    all.forEach((k, i) => checkKey(k, `listed ${i}`));
    const e = await rejects(() => s.clientWithKey('bd_thisisnotavalidkeyatall000000000000000').apiKeys.list(), AuthenticationError, 401, 'wrong key');
    eq(await accessLines(s, 'GET /org/api_keys 401'), 1, 'a 401 is not retried');
    assert(e.error.message.length > 0);
  }), 30000);

sdkTest('apiKeys.list', "the SDK's filters: name, status=deleted|all, include_deleted", (ctx) =>
  withServer(async (s, client) => {
    const a = await client.apiKeys.create({ name: 'compat-gone' });
    await client.apiKeys.create({ name: 'compat-kept' });
    await client.apiKeys.delete(a.id);
    eq((await collect(client.apiKeys.list({ name: 'compat-kept' }))).map((k) => k.name), ['compat-kept'], 'name');
    eq((await collect(client.apiKeys.list({ status: 'deleted' }))).map((k) => k.id), [a.id], 'status=deleted');
    eq((await collect(client.apiKeys.list({ status: 'all' }))).length, 3, 'status=all');
    eq((await collect(client.apiKeys.list({ include_deleted: true }))).length, 3, 'include_deleted (deprecated)');
  }), 30000);

sdkTest('apiKeys.delete', '204 resolves to null; the deleted key stops working; a key cannot delete itself', (ctx) =>
  withServer(async (s, client) => {
    const k = await client.apiKeys.create({ name: 'compat-d' });
    eq(await client.apiKeys.delete(k.id), null);
    await rejects(() => s.clientWithKey(k.key).apiKeys.list(), AuthenticationError, 401, 'deleted key');
    const [self] = (await collect(client.apiKeys.list())).filter((x) => x.masked_key && s.key.endsWith(x.masked_key.replace(/^.*[*.]/, '')));
    if (self) {
      let err;
      try { await client.apiKeys.delete(self.id); } catch (e) { err = e; }
      assert(err instanceof APIError && err.status >= 400 && err.status < 500, `deleting itself is refused: ${err}`);
    }
  }), 30000);

sdkTest('apiKeys.rotate', 'returns a new plaintext key; both work during the grace period', (ctx) =>
  withServer(async (s, client) => {
    const k = await client.apiKeys.create({ name: 'compat-rot' });
    const r = await client.apiKeys.rotate(k.id, { days_to_expire: 10, expire_in_days: 1 });
    assert(typeof r.key === 'string' && r.key !== k.key, 'new plaintext key');
    checkKey(r, 'rotated');
    await s.clientWithKey(r.key).apiKeys.list();
    await s.clientWithKey(k.key).apiKeys.list();
  }), 30000);

sdkTest('projects.list', 'a project-scoped key on organization operations -> PermissionDeniedError', (ctx) =>
  withServer(async (s, client) => {
    const p = await client.projects.create({ name: 'compat-perm' });
    const other = await client.projects.create({ name: 'compat-other' });
    const k = await client.apiKeys.create({ name: 'compat-scoped', project_id: p.id });
    const scoped = s.clientWithKey(k.key);
    const e = await rejects(() => scoped.projects.list(), PermissionDeniedError, 403, 'scoped key, org operation');
    assert(e.error.message.length > 0);
    await rejects(() => s.clientWithKey(k.key, { projectID: other.id }).browsers.list(), PermissionDeniedError, 403,
      'scoped key used with a different project');
    eq(await accessLines(s, 'GET /org/projects 403'), 1, 'a 403 is not retried');
  }), 30000);

// ---- browser pools ---------------------------------------------------------

const POOL_FIELDS = ['id', 'name', 'region', 'created_at', 'acquired_count', 'available_count', 'browser_pool_config',
  'extension_ids', 'profile_id'];
function checkPool(p, what) {
  keysOnly(p, POOL_FIELDS, what);
  for (const f of ['id', 'region', 'created_at', 'acquired_count', 'available_count', 'browser_pool_config', 'extension_ids'])
    assert(f in p, `${what}: field ${f} missing`);
  assert(ID.test(p.id), `${what}: id`);
  isTime(p.created_at, `${what}.created_at`);
  assert(['us-east', 'eu-west', 'ap-southeast'].includes(p.region), `${what}: region`);
  assert(Number.isInteger(p.acquired_count) && p.acquired_count >= 0, `${what}: acquired_count`);
  assert(Number.isInteger(p.available_count) && p.available_count >= 0, `${what}: available_count`);
  assert(Array.isArray(p.extension_ids), `${what}: extension_ids`);
  const c = p.browser_pool_config;
  assert(Number.isInteger(c.size) && c.size >= 1, `${what}: browser_pool_config.size`);
  assert(Number.isInteger(c.timeout_seconds), `${what}: browser_pool_config.timeout_seconds`);
  assert(typeof c.fill_rate_per_minute === 'number', `${what}: browser_pool_config.fill_rate_per_minute`);
}

// Creates a pool through the SDK (size 1 unless given): fn(pool), then deletes
// it with force. Pools are served: a 501 here is a failure, not a pending test.
async function withPool(ctx, client, body, fn) {
  let pool;
  try {
    pool = await client.browserPools.create({ size: 1, headless: true, timeout_seconds: 600, ...body });
  } catch (e) {
    throw e;
  }
  try { await fn(pool); } finally {
    await client.browserPools.delete(pool.id, { force: true }).catch(() => {});
  }
}

// Waits until the pool has an available browser (fill rate permitting).
async function untilAvailable(client, id, n = 1, ms = 90000) {
  const end = Date.now() + ms;
  for (;;) {
    const p = await client.browserPools.retrieve(id);
    if (p.available_count >= n) return p;
    if (Date.now() > end) throw new Error(`pool ${id} never had ${n} available browsers: ${JSON.stringify(p)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

sdkTest('browserPools.create', 'size, name, viewport, timeout; the pool record field by field; duplicate name -> ConflictError', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, {
    name: 'compat-pool', viewport: { width: 1280, height: 800 }, timeout_seconds: 300, fill_rate_per_minute: 100,
  }, async (p) => {
    checkPool(p, 'created');
    eq(p.name, 'compat-pool'); eq(p.browser_pool_config.size, 1); eq(p.browser_pool_config.timeout_seconds, 300);
    eq(p.browser_pool_config.viewport.width, 1280); eq(p.browser_pool_config.viewport.height, 800);
    eq(p.browser_pool_config.fill_rate_per_minute, 100); eq(p.extension_ids, []);
    assert(!('profile_id' in p), 'profile_id omitted when no profile');
    const e = await rejects(() => client.browserPools.create({ size: 1, name: 'compat-pool' }), ConflictError, 409, 'duplicate pool name');
    eq(e.headers.get('x-should-retry'), 'false');
    await rejects(() => client.browserPools.create({ size: 0 }), BadRequestError, 400, 'size 0');
  })), 120000);

sdkTest('browserPools.retrieve', 'by id and by name; unknown -> NotFoundError', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-pr' }, async (p) => {
    const r = await client.browserPools.retrieve(p.id);
    checkPool(r, 'retrieved'); eq(r.id, p.id); eq(r.created_at, p.created_at);
    eq((await client.browserPools.retrieve('compat-pr')).id, p.id, 'by name');
    await rejects(() => client.browserPools.retrieve('nosuchpool00000000000000'), NotFoundError, 404, 'unknown');
  })), 120000);

sdkTest('browserPools.list', 'auto-pagination across pages; name (exact) and query filters', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-pl-a' }, async (a) =>
    withPool(ctx, client, { name: 'compat-pl-b' }, async (b) => {
      const page = await client.browserPools.list({ limit: 1 });
      eq(page.getPaginatedItems().length, 1); eq(page.has_more, true); eq(page.next_offset, 1);
      const all = await collect(client.browserPools.list({ limit: 1 }));
      eq(all.map((p) => p.id).sort(), [a.id, b.id].sort(), 'two pages');
      all.forEach((p, i) => checkPool(p, `listed ${i}`));
      eq((await collect(client.browserPools.list({ name: 'compat-pl-b' }))).map((p) => p.id), [b.id], 'name is exact');
      eq((await collect(client.browserPools.list({ name: 'compat-pl' }))).length, 0, 'name is not a substring');
      eq((await collect(client.browserPools.list({ query: 'pl-' }))).length, 2, 'query is a substring');
    }))), 180000);

sdkTest('browserPools.update', 'size, timeout_seconds, start_url; omitted fields unchanged; empty profile object -> BadRequestError', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-pu', timeout_seconds: 600 }, async (p) => {
    const u = await client.browserPools.update(p.id, { timeout_seconds: 900, start_url: 'about:blank' });
    checkPool(u, 'updated'); eq(u.id, p.id);
    eq(u.browser_pool_config.timeout_seconds, 900); eq(u.browser_pool_config.start_url, 'about:blank');
    eq(u.browser_pool_config.size, 1, 'size unchanged'); eq(u.name, 'compat-pu', 'name unchanged');
    eq((await client.browserPools.update('compat-pu', { name: '' })).name, 'compat-pu', 'empty name is a no-op');
    const e = await rejects(() => client.browserPools.update(p.id, { profile: {} }), BadRequestError, 400, 'empty profile');
    eq(e.error.code, 'bad_request');
    await rejects(() => client.browserPools.update(p.id, { timeout_seconds: 5 }), BadRequestError, 400, 'timeout 5');
  })), 120000);

sdkTest('browserPools.acquire', 'a Browser record with pool; an empty pool answers 204, which the SDK turns into null', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-pa', fill_rate_per_minute: 100 }, async (p) => {
    await untilAvailable(client, p.id);
    const b = await client.browserPools.acquire(p.id, { acquire_timeout_seconds: 60 });
    checkBrowser(b, 'acquired');
    eq(b.pool.id, p.id, 'pool.id'); eq(b.pool.name, 'compat-pa', 'pool.name');
    const after = await client.browserPools.retrieve(p.id);
    eq(after.acquired_count, 1); eq(after.available_count, 0);
    const none = await client.browserPools.acquire(p.id, { acquire_timeout_seconds: 1 });
    eq(none, null, '204 becomes null');
    await client.browserPools.release(p.id, { session_id: b.session_id, reuse: false });
  })), 180000);

sdkTest('browserPools.release', 'reuse true makes the browser available again; 204 resolves to null', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-prl', fill_rate_per_minute: 100 }, async (p) => {
    await untilAvailable(client, p.id);
    const b = await client.browserPools.acquire(p.id, {});
    eq(await client.browserPools.release(p.id, { session_id: b.session_id, reuse: true }), null);
    const r = await client.browserPools.retrieve(p.id);
    eq(r.acquired_count, 0); eq(r.available_count, 1, 'reuse: true returns it at once');
    const again = await client.browserPools.acquire(p.id, { acquire_timeout_seconds: 30 });
    eq(again.session_id, b.session_id, 'the same browser is handed out again');
    await client.browserPools.release(p.id, { session_id: again.session_id, reuse: false });
    await rejects(() => client.browserPools.release(p.id, { session_id: 'nosuchsession00000000000' }), NotFoundError, 404, 'unknown session');
  })), 180000);

sdkTest('browserPools.flush', 'destroys idle browsers only; 204 resolves to null', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-pf', fill_rate_per_minute: 100 }, async (p) => {
    await untilAvailable(client, p.id);
    const idle = (await collect(client.browsers.list())).map((b) => b.session_id);
    eq(await client.browserPools.flush(p.id), null);
    const r = await client.browserPools.retrieve(p.id);
    assert(r.acquired_count === 0, 'nothing acquired');
    for (const id of idle) {
      const gone = await client.browsers.retrieve(id, { include_deleted: true }).catch(() => null);
      assert(!gone || gone.deleted_at, `idle browser ${id} destroyed by flush`);
    }
  })), 180000);

sdkTest('browserPools.delete', 'refused while a browser is acquired (ConflictError), then force: true; gone afterwards', (ctx) =>
  withServer(async (s, client) => withPool(ctx, client, { name: 'compat-pd', fill_rate_per_minute: 100 }, async (p) => {
    await untilAvailable(client, p.id);
    const b = await client.browserPools.acquire(p.id, {});
    const e = await rejects(() => client.browserPools.delete(p.id), ConflictError, 409, 'browsers acquired');
    eq(e.headers.get('x-should-retry'), 'false');
    eq(await client.browserPools.delete(p.id, { force: true }), null);
    await rejects(() => client.browserPools.retrieve(p.id), NotFoundError, 404, 'deleted pool');
    const gone = await client.browsers.retrieve(b.session_id, { include_deleted: true }).catch(() => null);
    assert(!gone || gone.deleted_at, 'the acquired browser ended with its pool');
  })), 180000);

// ---- profiles and proxies (served: any 501 fails the test) -----------------

function checkProfile(p, what) {
  keysOnly(p, ['id', 'created_at', 'name', 'updated_at', 'last_used_at'], what);
  assert(ID.test(p.id), `${what}: id`); isTime(p.created_at, `${what}.created_at`);
  assert(p.name === null || typeof p.name === 'string', `${what}: name`);
  if ('updated_at' in p) isTimeOrNull(p.updated_at, `${what}.updated_at`);
  if ('last_used_at' in p) isTimeOrNull(p.last_used_at, `${what}.last_used_at`);
}
async function withProfile(ctx, client, name, fn) {
  let p;
  try { p = await client.profiles.create({ name }); } catch (e) {
    throw e;
  }
  try { await fn(p); } finally { await client.profiles.delete(p.id).catch(() => {}); }
}

sdkTest('profiles.create', 'record field by field; duplicate name -> ConflictError', (ctx) =>
  withServer(async (s, client) => withProfile(ctx, client, 'compat-prof', async (p) => {
    checkProfile(p, 'created'); eq(p.name, 'compat-prof');
    const e = await rejects(() => client.profiles.create({ name: 'compat-prof' }), ConflictError, 409, 'duplicate');
    eq(e.headers.get('x-should-retry'), 'false');
  })), 30000);
sdkTest('profiles.retrieve', 'by id and by name', (ctx) =>
  withServer(async (s, client) => withProfile(ctx, client, 'compat-prof-r', async (p) => {
    checkProfile(await client.profiles.retrieve(p.id), 'by id');
    eq((await client.profiles.retrieve('compat-prof-r')).id, p.id);
    await rejects(() => client.profiles.retrieve('nosuchprofile00000000000'), NotFoundError, 404, 'unknown');
  })), 30000);
sdkTest('profiles.update', 'rename', (ctx) =>
  withServer(async (s, client) => withProfile(ctx, client, 'compat-prof-u', async (p) => {
    const u = await client.profiles.update(p.id, { name: 'compat-prof-u2' });
    checkProfile(u, 'updated'); eq(u.name, 'compat-prof-u2');
  })), 30000);
sdkTest('profiles.list', 'auto-pagination; name and query filters', (ctx) =>
  withServer(async (s, client) => withProfile(ctx, client, 'compat-pa', async (a) =>
    withProfile(ctx, client, 'compat-pb', async (b) => {
      eq((await collect(client.profiles.list({ limit: 1 }))).map((p) => p.id).sort(), [a.id, b.id].sort(), 'two pages');
      eq((await collect(client.profiles.list({ name: 'compat-pb' }))).map((p) => p.id), [b.id], 'name');
      eq((await collect(client.profiles.list({ query: 'compat-p' }))).length, 2, 'query');
    }))), 30000);
sdkTest('profiles.delete', '204 resolves to null; gone afterwards', (ctx) =>
  withServer(async (s, client) => withProfile(ctx, client, 'compat-prof-d', async (p) => {
    eq(await client.profiles.delete(p.id), null);
    await rejects(() => client.profiles.retrieve(p.id), NotFoundError, 404, 'deleted');
  })), 30000);

sdkTest('profiles.download', 'no saved state -> NotFoundError; after a session with save_changes ends, an archive (format tar too)', (ctx) =>
  withServer(async (s, client) => withProfile(ctx, client, 'compat-prof-dl', async (p) => {
    await rejects(() => client.profiles.download(p.id), NotFoundError, 404, 'nothing saved yet');
    const b = await client.browsers.create({ headless: true, profile: { name: 'compat-prof-dl', save_changes: true } });
    try {
      checkBrowser(b, 'with profile');
      eq(b.profile && b.profile.id, p.id, 'profile on the Browser record');
      eq(b.profile_save_changes, true, 'profile_save_changes');
    } finally {
      await client.browsers.deleteByID(b.session_id);
    }
    const res = await client.profiles.download('compat-prof-dl');
    assert(res.ok, `download status ${res.status}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert(bytes.length > 0, 'a non-empty archive');
    const ct = res.headers.get('content-type') || '';
    assert(!/json/.test(ct) || bytes[0] === 0x7b, `content-type ${ct}`);
    const tar = await client.profiles.download(p.id, { format: 'tar' });
    assert(tar.ok, `format=tar status ${tar.status}`);
    // The SDK documents format: 'tar.zst' (default) | 'tar' (uncompressed).
    const t = Buffer.from(await tar.arrayBuffer());
    assert(t.length >= 512 && t.subarray(257, 262).toString() === 'ustar', `download({format: 'tar'}) is not a tar archive (content-type ${tar.headers.get('content-type')})`);
    const used = await client.profiles.retrieve(p.id);
    isTime(used.last_used_at, 'last_used_at after a session used the profile');
  })), 120000);

// created_at: sent by browserd, in neither KERNEL_API.md's record nor the SDK's type (harmless).
const PROXY_FIELDS = ['created_at', 'id', 'type', 'name', 'protocol', 'bypass_hosts', 'config', 'status', 'last_checked', 'ip_address'];
function checkProxy(p, what) {
  keysOnly(p, PROXY_FIELDS, what);
  assert(ID.test(p.id), `${what}: id`);
  assert(['datacenter', 'isp', 'residential', 'mobile', 'custom'].includes(p.type), `${what}: type`);
  if ('status' in p) assert(['available', 'unavailable'].includes(p.status), `${what}: status`);
  if (p.type === 'custom') {
    assert(!('password' in p.config), `${what}: the password is never echoed`);
    eq(typeof p.config.has_password, 'boolean', `${what}: config.has_password`);
  }
}
// The custom proxy of these tests is on loopback: the operator names it.
const PROXY_ARGS = { args: ['--allow-loopback', '127.0.0.1:3128'] };
async function withProxy(ctx, client, name, fn) {
  let p;
  try {
    p = await client.proxies.create({ type: 'custom', name, protocol: 'http',
      config: { host: '127.0.0.1', port: 3128, username: 'u', password: 'secret' } });
  } catch (e) {
    throw e;
  }
  try { await fn(p); } finally { await client.proxies.delete(p.id).catch(() => {}); }
}

sdkTest('proxies.create', 'custom proxy; password never echoed', (ctx) =>
  withServer(async (s, client) => withProxy(ctx, client, 'compat-px', async (p) => {
    checkProxy(p, 'created'); eq(p.type, 'custom'); eq(p.name, 'compat-px');
    eq(p.config.host, '127.0.0.1'); eq(p.config.port, 3128); eq(p.config.has_password, true);
    await rejects(() => client.proxies.create({ type: 'nonsense' }), BadRequestError, 400, 'bad type');
  }), PROXY_ARGS), 30000);
sdkTest('proxies.retrieve', 'by id', (ctx) =>
  withServer(async (s, client) => withProxy(ctx, client, 'compat-px-r', async (p) => {
    const r = await client.proxies.retrieve(p.id);
    checkProxy(r, 'retrieved'); eq(r.id, p.id);
    await rejects(() => client.proxies.retrieve('nosuchproxy0000000000000'), NotFoundError, 404, 'unknown');
  }), PROXY_ARGS), 30000);
sdkTest('proxies.update', 'rename', (ctx) =>
  withServer(async (s, client) => withProxy(ctx, client, 'compat-px-u', async (p) => {
    const u = await client.proxies.update(p.id, { name: 'compat-px-u2' });
    checkProxy(u, 'updated'); eq(u.name, 'compat-px-u2');
  }), PROXY_ARGS), 30000);
sdkTest('proxies.list', 'auto-pagination', (ctx) =>
  withServer(async (s, client) => withProxy(ctx, client, 'compat-px-a', async (a) =>
    withProxy(ctx, client, 'compat-px-b', async (b) => {
      eq((await collect(client.proxies.list({ limit: 1 }))).map((p) => p.id).sort(), [a.id, b.id].sort(), 'two pages');
    })), PROXY_ARGS), 30000);
sdkTest('proxies.delete', '204 resolves to null; gone afterwards', (ctx) =>
  withServer(async (s, client) => withProxy(ctx, client, 'compat-px-d', async (p) => {
    eq(await client.proxies.delete(p.id), null);
    await rejects(() => client.proxies.retrieve(p.id), NotFoundError, 404, 'deleted');
  }), PROXY_ARGS), 30000);
sdkTest('proxies.check', 'returns the record with status and last_checked', (ctx) =>
  withServer(async (s, client) => withProxy(ctx, client, 'compat-px-c', async (p) => {
    const c = await client.proxies.check(p.id, {});
    checkProxy(c, 'checked'); eq(c.id, p.id);
    assert(['available', 'unavailable'].includes(c.status), 'status');
    isTime(c.last_checked, 'last_checked');
  }), PROXY_ARGS), 60000);

// ---- telemetry ---------------------------------------------------------------

// A session with telemetry on, attached to and left once by Playwright, so that
// the connection category has cdp_connect / cdp_disconnect events.
async function withTelemetrySession(client, fn) {
  await withBrowser(client, { telemetry: { enabled: true } }, async (b) => {
    eq(b.telemetry && b.telemetry.browser && b.telemetry.browser.connection && b.telemetry.browser.connection.enabled, true,
      `telemetry.browser.connection on: ${JSON.stringify(b.telemetry)}`);
    const pw = await chromium.connectOverCDP(b.cdp_ws_url);
    const ctx = pw.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.evaluate(() => 1 + 1);
    await pw.close();
    await fn(b);
  });
}
function checkEvent(e, what) {
  assert(Number.isInteger(e.seq) && e.seq >= 0, `${what}: seq`);
  assert(e.event && typeof e.event.type === 'string' && typeof e.event.category === 'string',
    `${what}: the SDK's BrowserTelemetryEvent has type, category, ts (Unix us), source; got ${JSON.stringify(e.event)}`);
  // The SDK's BrowserTelemetryEvent: ts is Unix microseconds; source says which producer emitted it.
  assert(Number.isInteger(e.event.ts) && e.event.ts > 1e15, `${what}: event.ts in Unix microseconds: ${e.event.ts}`);
  assert(e.event.source && ['cdp', 'kernel_api', 'extension', 'local_process'].includes(e.event.source.kind),
    `${what}: event.source.kind`);
}

sdkTest('browsers.telemetry.events', 'a session attached once by Playwright lists cdp_connect; category filter; auto-pagination', (ctx) =>
  withServer(async (s, client) => withTelemetrySession(client, async (b) => {
    let all = [];
    const end = Date.now() + 10000;
    while (Date.now() < end) {
      all = await collect(client.browsers.telemetry.events(b.session_id, { limit: 1 }));
      if (all.some((e) => e.event.type === 'cdp_disconnect')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    all.forEach((e, i) => checkEvent(e, `event ${i}`));
    assert(all.some((e) => e.event.type === 'cdp_connect'), `cdp_connect listed: ${all.map((e) => e.event.type)}`);
    assert(all.length >= 2, 'several pages of one event');
    for (let i = 1; i < all.length; i++) assert(all[i].seq > all[i - 1].seq, 'seq ascending, no event twice');
    const conn = await collect(client.browsers.telemetry.events(b.session_id, { category: ['connection'] }));
    assert(conn.length > 0 && conn.every((e) => e.event.category === 'connection'), 'category=connection');
  })), 120000);

sdkTest('browsers.telemetry.stream', 'SSE with replay=all yields {seq, event} records; the stream can be aborted', (ctx) =>
  withServer(async (s, client) => withTelemetrySession(client, async (b) => {
    const stream = await client.browsers.telemetry.stream(b.session_id, { replay: 'all' });
    const got = [];
    const timer = setTimeout(() => stream.controller.abort(), 15000);
    try {
      for await (const e of stream) {
        got.push(e);
        if (e.event.type === 'cdp_connect') break;
      }
    } catch (e) {
      if (!stream.controller.signal.aborted) throw e;
    } finally {
      clearTimeout(timer);
      stream.controller.abort();
    }
    assert(got.length > 0, 'at least one event replayed');
    got.forEach((e, i) => checkEvent(e, `streamed ${i}`));
    assert(got.some((e) => e.event.type === 'cdp_connect'), `cdp_connect streamed: ${got.map((e) => e.event.type)}`);
  })), 120000);

// ---- every other SDK method: 501 naming the feature --------------------------

// Placeholder arguments built from the method's declared parameter names.
const PLACEHOLDER_ID = 'aaaaaaaaaaaaaaaaaaaaaaaa';
function argsFor(m) {
  return m.params.map((p) => {
    if (/(^id$|ID$|IdOrName$|idOrName)/.test(p)) return PLACEHOLDER_ID;
    if (p === 'params') return { id: PLACEHOLDER_ID, path: '/tmp/x' };
    if (p === 'contents') return Buffer.from('x');
    if (p === 'destination') return new Writable({ write(c, e, cb) { cb(); } });
    if (p === 'options') return undefined;
    return {};
  });
}

// The feature a 501 must name, from the path the SDK calls: the interface
// document's areas (Browser Computer Controls, Browser Filesystem, ...).
const FEATURES = [
  [/^\/browsers\/\{\w+\}\/computer\//, /computer/i], [/^\/browsers\/\{\w+\}\/playwright\//, /playwright/i],
  [/^\/browsers\/\{\w+\}\/fs\//, /file ?system/i], [/^\/browsers\/\{\w+\}\/process\//, /process/i],
  [/^\/browsers\/\{\w+\}\/replays/, /replay/i], [/^\/browsers\/\{\w+\}\/logs\//, /log/i],
  [/^\/browsers\/\{\w+\}\/telemetry\//, /telemetry/i], [/^\/browsers\/\{\w+\}\/extensions$/, /extension/i],
  [/^\/browsers\/\{\w+\}\/curl$/, /curl|http/i], [/^\/browser_pools/, /pool/i], [/^\/profiles/, /profile/i],
  [/^\/proxies/, /prox/i], [/^\/extensions/, /extension/i], [/^\/apps/, /app/i], [/^\/deployments/, /deployment/i],
  [/^\/invocations/, /invocation/i], [/^\/auth\//, /auth/i], [/^\/credentials/, /credential/i],
  [/^\/org\/credential_providers/, /credential provider/i], [/^\/org\/(projects\/\{\w+\}\/)?limits/, /limit/i],
  [/^\/audit-logs/, /audit/i],
];
function featureFor(path) {
  const f = FEATURES.find(([re]) => re.test(path));
  return f ? f[1] : /./;
}

function resolveMethod(client, name) {
  const parts = name.split('.');
  let obj = client;
  for (const p of parts.slice(0, -1)) obj = obj[p];
  return obj[parts.at(-1)].bind(obj);
}

// SDK tests of one area each (fs, process, extensions, replays, ...) live in
// tests/compat/sdk/*.mjs: each exports register(t), with t the helpers above,
// and calls t.sdkTest like the tests of this file. Their methods count as
// explicit, so the generated 501 test below skips them.
const sdkDir = join(here, 'sdk');
for (const f of (existsSync(sdkDir) ? readdirSync(sdkDir) : []).filter((n) => n.endsWith('.mjs')).sort()) {
  const mod = await import(pathToFileURL(join(sdkDir, f)).href);
  mod.register({
    sdkTest, withServer, rejects, accessLines, assert, eq, request, startSite,
    errors: { APIError, AuthenticationError, BadRequestError, ConflictError, InternalServerError, KernelError, NotFoundError, PermissionDeniedError, RateLimitError },
  });
}

for (const m of sdkMethods()) {
  if (explicit.has(m.name)) continue;
  sdkTest(m.name, `not served yet: ${m.http} ${m.path} -> APIError 501 with an Error record naming the feature`, (ctx) =>
    withServer(async (s, client) => {
      let err;
      try {
        const r = await resolveMethod(client, m.name)(...argsFor(m));
        if (r && typeof r[Symbol.asyncIterator] === 'function' && typeof r.controller === 'object') r.controller.abort();
      } catch (e) { err = e; }
      assert(err, `${m.name}: expected a 501, the call succeeded`);
      assert(err instanceof APIError, `${m.name}: APIError expected, got ${err.constructor.name}: ${err.message}`);
      assert(err.status === 501, `answers ${err.status} ${err.error && err.error.code} instead of 501 (${err.message})`);
      assert(err instanceof InternalServerError, `${m.name}: a 501 is an InternalServerError`);
      eq(err.error && err.error.code, 'not_implemented', `${m.name}: code`);
      const msg = err.error.message;
      assert(/^[a-z][a-z ]+: not implemented/.test(msg), `${m.name}: the message names the feature: ${msg}`);
      const feature = msg.split(':')[0];
      assert(featureFor(m.path).test(feature), `the 501 names "${feature}", not the feature of ${m.path} (${featureFor(m.path)})`);
      eq(err.message, `501 ${msg}`, `${m.name}: the SDK shows our message`);
      eq(err.headers.get('x-should-retry'), 'false', `${m.name}: x-should-retry`);
      const line = `${m.http} ${new URL(m.path.replace(/\{\w+\}/g, PLACEHOLDER_ID), 'http://x').pathname} 501`;
      eq(await accessLines(s, line), 1, `${m.name}: one request (${line}), no retries`);
      ctx.notServed(`501 naming "${msg.split(':')[0]}"`);
    }), 30000);
}

export { tests };
