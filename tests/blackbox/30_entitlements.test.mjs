// GET /org/entitlements: the interface document's Organization entitlements
// table (paths and JSON types), the OPERATOR.md built-in plans, the five
// resolution steps, and the admin plan API.
import { startServer, request, assert, eq, isError } from './lib.mjs';

const ADMIN = 'admin-token-for-tests';
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
  const org = ok2xx(await admin(s, 'POST', '/admin/orgs', body), `create org ${JSON.stringify(body)}`);
  const k = ok2xx(await admin(s, 'POST', `/admin/orgs/${org.id}/api_keys`, {}), 'create key');
  return { org, key: k.key };
}

async function ent(s, key) {
  const r = await request(s.base, 'GET', '/org/entitlements', { key });
  eq(r.status, 200, r.text);
  assert(/^application\/json/.test(r.headers['content-type']), r.headers['content-type']);
  checkShape(r.json);
  return r.json;
}

async function patchOrg(s, id, body) {
  return ok2xx(await admin(s, 'PATCH', `/admin/orgs/${id}`, body), `patch org ${JSON.stringify(body)}`);
}

// ---- the table of the interface document ----
const BOOL = 'boolean', INT = 'integer', INT_NULL = 'integer or null', STR = 'string', TIME_NULL = 'timestamp or null';
const FEATURES = {
  browser_extensions: { enabled: BOOL, max_stored_per_org: INT_NULL },
  browser_pools: { enabled: BOOL },
  browser_replays: { enabled: BOOL, retention_days: INT },
  credential_providers: { enabled: BOOL },
  credentials: { enabled: BOOL },
  custom_proxies: { enabled: BOOL },
  file_io: { enabled: BOOL },
  gpu: { enabled: BOOL },
  managed_auth: {
    enabled: BOOL, health_check_interval_default_seconds: INT, health_check_interval_min_seconds: INT,
    health_check_interval_max_seconds: INT, max_connections: INT_NULL,
  },
  managed_proxies: { enabled: BOOL },
  profiles: { enabled: BOOL },
  proxy_bypass_hosts: { enabled: BOOL },
  search: { enabled: BOOL },
  vaults: { enabled: BOOL },
};
// The table says "integer"; the Limits section says null means unlimited for
// every organization limit except the per-app default, which is never null.
const LIMITS = {
  default_max_concurrent_invocations_per_app: INT,
  max_concurrent_browsers: INT_NULL,
  max_concurrent_invocations: INT_NULL,
  max_vaults: INT_NULL,
  // Added by issue 29.12 (docs/operator.md, "Entitlement limits: profiles"):
  // the document's shape is kept, these two are added.
  max_profiles: INT_NULL,
  max_profile_bytes: INT_NULL,
};
const PLAN = { id: STR, effective_id: STR, is_trialing: BOOL, status: STR, trial_ends_at: TIME_NULL };
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function typeOk(t, v) {
  switch (t) {
    case BOOL: return typeof v === 'boolean';
    case INT: return Number.isInteger(v);
    case INT_NULL: return v === null || Number.isInteger(v);
    case STR: return typeof v === 'string' && v.length > 0;
    case TIME_NULL: return v === null || (typeof v === 'string' && RFC3339.test(v) && !Number.isNaN(Date.parse(v)));
    default: return false;
  }
}

function checkObject(path, obj, shape) {
  assert(obj && typeof obj === 'object' && !Array.isArray(obj), `${path} must be an object: ${JSON.stringify(obj)}`);
  eq(Object.keys(obj).sort(), Object.keys(shape).sort(), `keys of ${path}`);
  for (const [k, t] of Object.entries(shape)) {
    assert(typeOk(t, obj[k]), `${path}.${k} must be ${t}, got ${JSON.stringify(obj[k])}`);
  }
}

function checkShape(e) {
  eq(Object.keys(e).sort(), ['features', 'limits', 'plan'], 'top-level keys');
  eq(Object.keys(e.features).sort(), Object.keys(FEATURES).sort(), 'features');
  for (const [f, shape] of Object.entries(FEATURES)) checkObject(`features.${f}`, e.features[f], shape);
  checkObject('limits', e.limits, LIMITS);
  checkObject('plan', e.plan, PLAN);
  for (const [path, v] of [['limits.max_concurrent_browsers', e.limits.max_concurrent_browsers],
    ['limits.max_concurrent_invocations', e.limits.max_concurrent_invocations],
    ['limits.max_vaults', e.limits.max_vaults], ['limits.default_max_concurrent_invocations_per_app', e.limits.default_max_concurrent_invocations_per_app],
    ['features.browser_replays.retention_days', e.features.browser_replays.retention_days]]) {
    assert(v === null || v >= 0, `${path} negative: ${v}`);
  }
}

// ---- OPERATOR.md built-in plans ----
const ALL = Object.keys(FEATURES);
const DEV_ON = ['browser_pools', 'profiles', 'custom_proxies', 'file_io', 'search'];
const HOBBY_ON = [...DEV_ON, 'browser_extensions', 'managed_proxies', 'proxy_bypass_hosts', 'browser_replays'];
const EXPECT = {
  developer: { on: DEV_ON, limits: [5, 5, 5, 1] },
  hobbyist: { on: HOBBY_ON, limits: [10, 10, 10, 5], ext: 10, replays: 7 },
  startup: { on: ALL.filter((f) => f !== 'gpu'), limits: [150, 50, 25, 50], ext: 100, replays: 30, auth: 100 },
  enterprise: { on: ALL, limits: [null, null, 50, null], ext: null, replays: 90, auth: null },
};

function checkPlanValues(e, planId, what = planId) {
  const x = EXPECT[planId];
  for (const f of ALL) eq(e.features[f].enabled, x.on.includes(f), `${what}: features.${f}.enabled`);
  const [browsers, inv, perApp, vaults] = x.limits;
  eq(e.limits.max_concurrent_browsers, browsers, `${what}: limits.max_concurrent_browsers`);
  eq(e.limits.max_concurrent_invocations, inv, `${what}: limits.max_concurrent_invocations`);
  eq(e.limits.default_max_concurrent_invocations_per_app, perApp, `${what}: limits.default_max_concurrent_invocations_per_app`);
  eq(e.limits.max_vaults, vaults, `${what}: limits.max_vaults`);
  if ('ext' in x) eq(e.features.browser_extensions.max_stored_per_org, x.ext, `${what}: browser_extensions.max_stored_per_org`);
  if ('replays' in x) eq(e.features.browser_replays.retention_days, x.replays, `${what}: browser_replays.retention_days`);
  if ('auth' in x) eq(e.features.managed_auth.max_connections, x.auth, `${what}: managed_auth.max_connections`);
  const ma = e.features.managed_auth;
  eq([ma.health_check_interval_default_seconds, ma.health_check_interval_min_seconds, ma.health_check_interval_max_seconds],
    [3600, 300, 86400], `${what}: managed_auth health-check intervals`);
}

const future = () => new Date(Date.now() + 30 * DAY).toISOString();
const past = () => new Date(Date.now() - 30 * DAY).toISOString();

export const tests = [
  {
    name: 'interface table: every path of Organization entitlements with its JSON type (bootstrap org, enterprise)',
    fn: () => withServer(async (s) => {
      const e = await ent(s, s.key);
      eq(e.plan, { id: 'enterprise', effective_id: 'enterprise', is_trialing: false, status: 'active', trial_ends_at: null }, 'plan');
    }),
  },
  ...Object.keys(EXPECT).map((planId) => ({
    name: `OPERATOR built-in plans: an org on ${planId} gets exactly the table's values (types per the interface table)`,
    fn: () => withServer(async (s) => {
      const { key } = await newOrg(s, { name: `org-${planId}`, plan: planId });
      const e = await ent(s, key);
      checkPlanValues(e, planId);
      eq(e.plan, { id: planId, effective_id: planId, is_trialing: false, status: 'active', trial_ends_at: null }, 'plan');
    }),
  })),
  {
    name: 'OPERATOR admin API: POST /admin/orgs defaults to plan developer, plan_status active, projects enabled',
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'plain' });
      eq([org.plan, org.plan_status, org.trial_plan, org.trial_ends_at, org.projects_enabled, org.overrides],
        ['developer', 'active', null, null, true, {}], 'org record');
      eq(org.default_project.name, 'default');
      checkPlanValues(await ent(s, key), 'developer');
    }),
  },
  {
    name: 'OPERATOR step 2: a trial in the future applies the trial plan, is_trialing true, trial_ends_at that time; plan.id stays the org plan',
    fn: () => withServer(async (s) => {
      const ends = future();
      const { org, key } = await newOrg(s, { name: 't', plan: 'developer', trial_plan: 'startup', trial_ends_at: ends });
      // The stored org (read back, not the create echo) keeps the trial.
      const got = ok2xx(await admin(s, 'GET', `/admin/orgs/${org.id}`), 'get org');
      eq([got.plan, got.trial_plan, Date.parse(got.trial_ends_at)], ['developer', 'startup', Date.parse(ends)], 'stored org');
      const e = await ent(s, key);
      checkPlanValues(e, 'startup', 'trialing startup');
      eq([e.plan.id, e.plan.effective_id, e.plan.is_trialing, e.plan.status], ['developer', 'startup', true, 'active'], 'plan');
      assert(RFC3339.test(e.plan.trial_ends_at), e.plan.trial_ends_at);
      eq(Date.parse(e.plan.trial_ends_at), Date.parse(ends), 'trial_ends_at');
    }),
  },
  {
    name: 'OPERATOR step 2: a trial in the past does not apply: not trialing, trial_ends_at null, plan values',
    fn: () => withServer(async (s) => {
      const { key } = await newOrg(s, { name: 't', plan: 'hobbyist', trial_plan: 'enterprise', trial_ends_at: past() });
      const e = await ent(s, key);
      checkPlanValues(e, 'hobbyist');
      eq(e.plan, { id: 'hobbyist', effective_id: 'hobbyist', is_trialing: false, status: 'active', trial_ends_at: null }, 'plan');
    }),
  },
  {
    name: 'OPERATOR step 2: trial_plan without trial_ends_at, and trial_ends_at without trial_plan, apply no trial',
    fn: () => withServer(async (s) => {
      const a = await newOrg(s, { name: 'a', plan: 'startup', trial_plan: 'enterprise' });
      const ea = await ent(s, a.key);
      checkPlanValues(ea, 'startup');
      eq([ea.plan.is_trialing, ea.plan.trial_ends_at, ea.plan.effective_id], [false, null, 'startup'], 'trial_plan only');
      const b = await newOrg(s, { name: 'b', plan: 'startup', trial_ends_at: future() });
      const eb = await ent(s, b.key);
      checkPlanValues(eb, 'startup');
      eq([eb.plan.is_trialing, eb.plan.trial_ends_at, eb.plan.effective_id], [false, null, 'startup'], 'trial_ends_at only');
    }),
  },
  ...['canceled', 'unpaid'].map((status) => ({
    name: `OPERATOR step 3: ${status} plan_status applies developer values and no trial; plan.status reports ${status}; effective_id developer`,
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'c', plan: 'startup', plan_status: status, trial_plan: 'enterprise', trial_ends_at: future() });
      eq(org.plan_status, status);
      const e = await ent(s, key);
      checkPlanValues(e, 'developer', `${status} startup`);
      eq(e.plan, { id: 'startup', effective_id: 'developer', is_trialing: false, status, trial_ends_at: null }, 'plan');
    }),
  })),
  ...['past_due', 'active'].map((status) => ({
    name: `OPERATOR step 3: ${status} changes nothing (plan values, and a future trial still applies)`,
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'p', plan: 'hobbyist', plan_status: status });
      const e = await ent(s, key);
      checkPlanValues(e, 'hobbyist', status);
      eq(e.plan, { id: 'hobbyist', effective_id: 'hobbyist', is_trialing: false, status, trial_ends_at: null }, 'plan');
      const ends = future();
      await patchOrg(s, org.id, { trial_plan: 'enterprise', trial_ends_at: ends });
      const t = await ent(s, key);
      checkPlanValues(t, 'enterprise', `${status} trialing`);
      eq([t.plan.id, t.plan.effective_id, t.plan.is_trialing, t.plan.status], ['hobbyist', 'enterprise', true, status], 'plan while trialing');
      eq(Date.parse(t.plan.trial_ends_at), Date.parse(ends), 'trial_ends_at');
    }),
  })),
  {
    name: 'OPERATOR step 3 then back: a canceled org set active again gets its plan (and an unexpired trial) back',
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'c', plan: 'startup', plan_status: 'canceled' });
      checkPlanValues(await ent(s, key), 'developer', 'canceled');
      await patchOrg(s, org.id, { plan_status: 'active' });
      checkPlanValues(await ent(s, key), 'startup', 'active again');
    }),
  },
  {
    name: 'OPERATOR step 5: overrides are merged key by key last; null sets a nullable limit to unlimited; other values stay',
    fn: () => withServer(async (s) => {
      const overrides = {
        limits: { max_concurrent_browsers: 7, max_vaults: null },
        features: { gpu: { enabled: true }, browser_extensions: { max_stored_per_org: null }, managed_auth: { max_connections: 3 } },
      };
      const { key } = await newOrg(s, { name: 'o', plan: 'startup', overrides });
      const e = await ent(s, key);
      eq(e.limits, {
        default_max_concurrent_invocations_per_app: 25, max_concurrent_browsers: 7, max_concurrent_invocations: 50, max_vaults: null,
        max_profiles: 1000, max_profile_bytes: 256 * 1024 * 1024,
      }, 'limits');
      eq(e.features.gpu, { enabled: true }, 'features.gpu');
      eq(e.features.browser_extensions, { enabled: true, max_stored_per_org: null }, 'features.browser_extensions');
      eq(e.features.managed_auth, {
        enabled: true, health_check_interval_default_seconds: 3600, health_check_interval_min_seconds: 300,
        health_check_interval_max_seconds: 86400, max_connections: 3,
      }, 'features.managed_auth (other keys kept)');
      eq(e.features.browser_replays, { enabled: true, retention_days: 30 }, 'untouched feature');
      eq(e.plan, { id: 'startup', effective_id: 'startup', is_trialing: false, status: 'active', trial_ends_at: null }, 'plan');
    }),
  },
  {
    name: 'OPERATOR step 5: overrides apply after step 3 (canceled org: developer values plus the overrides)',
    fn: () => withServer(async (s) => {
      const { key } = await newOrg(s, {
        name: 'o', plan: 'enterprise', plan_status: 'canceled',
        overrides: { limits: { max_concurrent_browsers: 2 }, features: { vaults: { enabled: true } } },
      });
      const e = await ent(s, key);
      eq(e.limits.max_concurrent_browsers, 2);
      eq(e.limits.max_vaults, 1, 'developer max_vaults');
      eq(e.features.vaults.enabled, true);
      eq(e.features.gpu.enabled, false, 'developer gpu');
      eq(e.plan.effective_id, 'developer');
      eq(e.plan.id, 'enterprise');
    }),
  },
  {
    name: 'OPERATOR admin PATCH: overrides replaces the whole document; null clears trial_plan/trial_ends_at',
    fn: () => withServer(async (s) => {
      const { org, key } = await newOrg(s, { name: 'o', plan: 'developer', overrides: { limits: { max_vaults: 9 } }, trial_plan: 'startup', trial_ends_at: future() });
      let e = await ent(s, key);
      eq([e.plan.is_trialing, e.limits.max_vaults], [true, 9]);
      const rec = await patchOrg(s, org.id, { overrides: { limits: { max_concurrent_browsers: 1 } }, trial_plan: null, trial_ends_at: null });
      eq([rec.trial_plan, rec.trial_ends_at, rec.overrides], [null, null, { limits: { max_concurrent_browsers: 1 } }], 'org record');
      e = await ent(s, key);
      eq([e.plan.is_trialing, e.plan.trial_ends_at, e.plan.effective_id], [false, null, 'developer']);
      eq([e.limits.max_vaults, e.limits.max_concurrent_browsers], [1, 1], 'max_vaults back to the plan, browsers overridden');
      const got = ok2xx(await admin(s, 'GET', `/admin/orgs/${org.id}`), 'get org');
      eq(got.overrides, { limits: { max_concurrent_browsers: 1 } });
    }),
  },
  {
    name: 'OPERATOR admin API: invalid overrides (unknown path, wrong type, null for a non-nullable value) -> 400',
    fn: () => withServer(async (s) => {
      const bad = [
        { limits: { max_things: 1 } }, { features: { teleport: { enabled: true } } }, { features: { gpu: { enabled: 'yes' } } },
        { limits: { max_concurrent_browsers: -1 } }, { limits: { max_concurrent_browsers: 1.5 } }, { limits: { max_concurrent_browsers: '5' } },
        { limits: { default_max_concurrent_invocations_per_app: null } }, { features: { browser_replays: { retention_days: null } } },
        { features: { gpu: { enabled: null } } }, { plan: { id: 'x' } }, [],
      ];
      for (const overrides of bad) {
        const r = await admin(s, 'POST', '/admin/orgs', { name: 'x', overrides });
        try { isError(r, 400, 'bad_request'); } catch (e) { throw new Error(`overrides ${JSON.stringify(overrides)}: ${e.message}`); }
      }
    }),
  },
  {
    name: 'OPERATOR: an unknown plan id in an org (plan or trial_plan, create or PATCH) -> 400',
    fn: () => withServer(async (s) => {
      isError(await admin(s, 'POST', '/admin/orgs', { name: 'x', plan: 'platinum' }), 400, 'bad_request');
      isError(await admin(s, 'POST', '/admin/orgs', { name: 'x', trial_plan: 'platinum', trial_ends_at: future() }), 400, 'bad_request');
      const { org, key } = await newOrg(s, { name: 'y', plan: 'hobbyist' });
      isError(await admin(s, 'PATCH', `/admin/orgs/${org.id}`, { plan: 'platinum' }), 400, 'bad_request');
      isError(await admin(s, 'PATCH', `/admin/orgs/${org.id}`, { trial_plan: 'platinum' }), 400, 'bad_request');
      isError(await admin(s, 'PATCH', `/admin/orgs/${org.id}`, { plan_status: 'bankrupt' }), 400, 'bad_request');
      // Nothing changed.
      const e = await ent(s, key);
      eq([e.plan.id, e.plan.status], ['hobbyist', 'active']);
    }),
  },
  {
    name: 'OPERATOR admin API: GET /admin/plans lists the four built-ins with {id, entitlements: {features, limits}} and the table values',
    fn: () => withServer(async (s) => {
      const r = await admin(s, 'GET', '/admin/plans');
      eq(r.status, 200, r.text);
      assert(Array.isArray(r.json), 'a bare array');
      for (const planId of Object.keys(EXPECT)) {
        const p = r.json.find((x) => x.id === planId);
        assert(p, `plan ${planId} missing from ${r.text.slice(0, 200)}`);
        eq(Object.keys(p.entitlements).sort(), ['features', 'limits'], `${planId} entitlements keys`);
        checkPlanValues({ ...p.entitlements, plan: {} }, planId);
      }
    }),
  },
  {
    name: 'OPERATOR admin API: PUT /admin/plans/{id} creates a custom plan usable by orgs (as plan and as trial plan); PUT again replaces it',
    fn: () => withServer(async (s) => {
      const body = { entitlements: { limits: { max_concurrent_browsers: 3, max_vaults: null }, features: { gpu: { enabled: true }, search: { enabled: false } } } };
      const put = await admin(s, 'PUT', '/admin/plans/team-3', body);
      assert(put.status >= 200 && put.status < 300, put.text);
      const list = (await admin(s, 'GET', '/admin/plans')).json;
      assert(list.some((p) => p.id === 'team-3'), 'custom plan listed');
      assert(Object.keys(EXPECT).every((id) => list.some((p) => p.id === id)), 'built-ins still listed');
      const { org, key } = await newOrg(s, { name: 'custom', plan: 'team-3' });
      let e = await ent(s, key);
      eq([e.plan.id, e.plan.effective_id], ['team-3', 'team-3']);
      eq([e.limits.max_concurrent_browsers, e.limits.max_vaults, e.features.gpu.enabled, e.features.search.enabled], [3, null, true, false]);
      // Replace it: the org sees the new values.
      ok2xx(await admin(s, 'PUT', '/admin/plans/team-3', { entitlements: { limits: { max_concurrent_browsers: 4 } } }), 'replace');
      e = await ent(s, key);
      eq(e.limits.max_concurrent_browsers, 4, 'after replacement');
      // As a trial plan.
      const t = await newOrg(s, { name: 'trial', plan: 'developer', trial_plan: 'team-3', trial_ends_at: future() });
      const te = await ent(s, t.key);
      eq([te.plan.id, te.plan.effective_id, te.plan.is_trialing, te.limits.max_concurrent_browsers], ['developer', 'team-3', true, 4]);
      // A canceled org on a custom plan falls back to developer.
      await patchOrg(s, org.id, { plan_status: 'canceled' });
      checkPlanValues(await ent(s, key), 'developer', 'canceled custom');
    }),
  },
  {
    name: 'OPERATOR admin API: PUT /admin/plans with an invalid body (bad id, unknown field, wrong type) -> 400',
    fn: () => withServer(async (s) => {
      isError(await admin(s, 'PUT', '/admin/plans/Bad%20Id', { entitlements: {} }), 400);
      isError(await admin(s, 'PUT', '/admin/plans/p1', { entitlements: {}, price: 5 }), 400);
      isError(await admin(s, 'PUT', '/admin/plans/p1', {}), 400);
      isError(await admin(s, 'PUT', '/admin/plans/p1', { entitlements: { limits: { max_concurrent_browsers: 'many' } } }), 400);
      isError(await admin(s, 'PUT', '/admin/plans/p1', { entitlements: { features: { warp: { enabled: true } } } }), 400);
      const list = (await admin(s, 'GET', '/admin/plans')).json;
      assert(!list.some((p) => p.id === 'p1'), 'rejected plan was stored');
    }),
  },
];
