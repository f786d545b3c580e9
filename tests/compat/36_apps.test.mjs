// Issue 36: apps, deployments and invocations. A small Node app, written
// here and zipped with the pinned @onkernel/sdk and playwright-core in its
// node_modules, is deployed once and reused: its action creates a browser
// through `new Kernel()` (the run's environment gives the server's address
// and a key of the project), opens a loopback page over CDP with
// playwright-core and returns the page's title. Around it: sync and async
// invocations, their events, their browsers listed and deleted, a failing
// action, a timeout, two versions side by side (409 without force, force
// replaces), env var values of secret-looking names redacted, an app that
// tries to read the server's files and its admin API and cannot, another
// org's ids (404), bad input (400 naming the field). Every method of the
// client's deployments, apps and invocations resources is used.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Kernel from '@onkernel/sdk';
import { startServer, startSite, request, assert, eq, isError, waitFor, newOrg, sessionCgroupDirs } from '../blackbox/lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const ADMIN = 'apps-admin-token';

const APP = `
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import fs from 'node:fs';

const kernel = new Kernel();
const app = kernel.app('title-app');

app.action('title', async (ctx, payload) => {
  const b = await kernel.browsers.create({ invocation_id: ctx.invocation_id, headless: true });
  const browser = await chromium.connectOverCDP(b.cdp_ws_url);
  const context = browser.contexts()[0];
  const page = context.pages()[0] ?? await context.newPage();
  await page.goto(payload.url);
  const title = await page.title();
  await browser.close();
  return { title, session_id: b.session_id };
});

// Holds a browser until the invocation's browsers are deleted.
app.action('hold', async (ctx) => {
  const b = await kernel.browsers.create({ invocation_id: ctx.invocation_id, headless: true });
  for (;;) {
    const r = await kernel.browsers.retrieve(b.session_id).catch((e) => ({ gone: e.status }));
    if (r.gone || r.deleted_at) return 'released';
    await new Promise((res) => setTimeout(res, 200));
  }
});

app.action('fail', async (ctx) => { throw new Error('boom from the action'); });
app.action('sleep', async (ctx) => new Promise(() => setInterval(() => {}, 1000)));
app.action('tag', async (ctx) => ({ tag: process.env.APP_TAG }));
app.action('patch', async (ctx) => {
  await kernel.invocations.update(ctx.invocation_id, { status: 'succeeded', output: JSON.stringify({ patched: true }) });
  return 'not this';
});

// What a hostile app would try: the server's files, its admin API, its environment.
app.action('probe', async (ctx, payload) => {
  const out = {};
  for (const p of payload.paths) {
    try { fs.readFileSync(p); out[p] = 'read'; } catch (e) { out[p] = e.code; }
  }
  const r = await fetch(process.env.KERNEL_BASE_URL + '/admin/orgs', {
    method: 'POST', headers: { authorization: 'Bearer ' + process.env.KERNEL_API_KEY, 'content-type': 'application/json' },
    body: '{"name":"evil"}',
  });
  out.admin = r.status;
  out.env = Object.keys(process.env);
  out.outside = await fetch(payload.site).then((x) => x.status, (e) => 'unreachable');
  return out;
});
`;

// The app's folder (app code, the pinned client and playwright-core) zipped
// (source: the entrypoint's code; 88_busy_lifecycle_apps zips its own).
export function buildZip(source = APP, name = 'title-app') {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-app-'));
  writeFileSync(join(dir, 'index.mjs'), source);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, type: 'module', version: '1.0.0' }));
  for (const m of ['@onkernel/sdk', 'playwright-core']) {
    mkdirSync(join(dir, 'node_modules', dirname(m)), { recursive: true });
    cpSync(join(here, 'node_modules', m), join(dir, 'node_modules', m), { recursive: true, dereference: true });
  }
  execFileSync('zip', ['-qr1', join(dir, 'app.zip'), 'index.mjs', 'package.json', 'node_modules'], { cwd: dir });
  const zip = readFileSync(join(dir, 'app.zip'));
  rmSync(dir, { recursive: true, force: true });
  return zip;
}

let shared;
// One server, one site, one deployment for the whole file.
async function env() {
  if (shared) return shared;
  const site = await startSite((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end('<title>Hello from loopback</title><p>hi</p>');
  });
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN }, args: site.allow });
  const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0, timeout: 120000 });
  const zip = buildZip();
  const file = () => new File([zip], 'app.zip', { type: 'application/zip' });
  const dep = await client.deployments.create({
    file: file(), entrypoint_rel_path: 'index.mjs', version: '1', region: 'aws.us-east-1a',
    env_vars: { APP_TAG: 'one', SECRET_TOKEN: 'hunter2' },
  });
  shared = { s, site, client, zip, file, dep };
  process.once('exit', () => { try { rmSync(s.dir, { recursive: true, force: true }); } catch { /* gone */ } });
  return shared;
}

async function collect(stream) {
  const evs = [];
  for await (const ev of stream) evs.push(ev);
  return evs;
}

async function settled(client, id) {
  let inv;
  await waitFor(async () => {
    inv = await client.invocations.retrieve(id);
    return inv.status === 'succeeded' || inv.status === 'failed';
  }, `invocation ${id} ends`, 60000, 200);
  return inv;
}

const tests = [];
const test = (name, fn, timeout = 120000) => tests.push({ name, fn, timeout });

test('issue 36.1: a bundled Node app deploys: running, its actions discovered, its events (state and build log) end with the summary', async () => {
  const { client, dep } = await env();
  eq(dep.status, 'running', `deployment: ${JSON.stringify(dep)}`);
  eq(dep.region, 'aws.us-east-1a', 'region');
  eq(dep.entrypoint_rel_path, 'index.mjs', 'entrypoint');
  eq(dep.env_vars.SECRET_TOKEN, '[redacted]', 'a secret-looking value is redacted');
  eq(dep.env_vars.APP_TAG, 'one', 'a plain value is shown');
  eq((await client.deployments.retrieve(dep.id)).status, 'running', 'retrieve');
  const listed = [];
  for await (const d of client.deployments.list({ app_name: 'title-app' })) listed.push(d.id);
  assert(listed.includes(dep.id), `list by app_name: ${listed}`);
  const evs = await collect(await client.deployments.follow(dep.id));
  const states = evs.filter((e) => e.event === 'deployment_state').map((e) => e.deployment.status);
  eq(states, ['queued', 'in_progress', 'running'], 'state changes');
  assert(evs.some((e) => e.event === 'log'), 'build log events');
  const sum = evs.find((e) => e.event === 'app_version_summary');
  assert(sum, `summary: ${JSON.stringify(evs)}`);
  eq(sum.app_name, 'title-app', 'app name');
  eq(sum.actions.map((a) => a.name).sort(), ['fail', 'hold', 'patch', 'probe', 'sleep', 'tag', 'title'], 'actions');
});

test('issue 36.2: GET /apps lists the running version with its actions and env var names, secret-looking values redacted', async () => {
  const { client, dep } = await env();
  const apps = [];
  for await (const a of client.apps.list({ app_name: 'title-app', version: '1' })) apps.push(a);
  eq(apps.length, 1, `apps: ${JSON.stringify(apps)}`);
  eq(apps[0].deployment, dep.id, 'deployment');
  eq(apps[0].version, '1', 'version');
  eq(apps[0].env_vars, { APP_TAG: 'one', SECRET_TOKEN: '[redacted]' }, 'env vars');
  assert(apps[0].actions.some((a) => a.name === 'title'), 'actions');
  const none = [];
  for await (const a of client.apps.list({ app_name: 'no-such-app' })) none.push(a);
  eq(none.length, 0, 'a filter that matches nothing');
});

test('issue 36.3: a sync invocation creates a browser through new Kernel(), reads a loopback page\'s title and answers with it; the browser ends with it', async () => {
  const { s, client, site } = await env();
  const inv = await client.invocations.create({ app_name: 'title-app', action_name: 'title', version: '1', payload: JSON.stringify({ url: site.url }) });
  eq(inv.status, 'succeeded', `invocation: ${JSON.stringify(inv)}`);
  const out = JSON.parse(inv.output);
  eq(out.title, 'Hello from loopback', 'the page title');
  const got = await client.invocations.retrieve(inv.id);
  eq(got.app_name, 'title-app', 'app_name');
  eq(got.version, '1', 'version');
  assert(got.finished_at, 'finished_at');
  await waitFor(async () => {
    const r = await request(s.base, 'GET', `/browsers/${out.session_id}`, { key: s.key });
    return r.status === 404 || (r.json && r.json.deleted_at);
  }, 'the invocation\'s browser ended with it', 30000, 200);
  const listed = [];
  for await (const i of client.invocations.list({ app_name: 'title-app', status: 'succeeded' })) listed.push(i.id);
  assert(listed.includes(inv.id), 'list by app and status');
  const ids = async (q) => { const out = []; for await (const i of client.invocations.list(q)) out.push(i.id); return out; };
  assert((await ids({ action_name: 'title', deployment_id: shared.dep.id })).includes(inv.id), 'list by action and deployment');
  assert(!(await ids({ action_name: 'tag' })).includes(inv.id), 'another action\'s list');
  assert(!(await ids({ deployment_id: 'aaaaaaaaaaaaaaaaaaaaaaaa' })).includes(inv.id), 'another deployment\'s list');
});

test('issue 36.3: an async invocation answers 202 queued, its events follow it to succeeded; listBrowsers shows its browser and deleteBrowsers ends it', async () => {
  const { client } = await env();
  const inv = await client.invocations.create({ app_name: 'title-app', action_name: 'hold', version: '1', async: true, async_timeout_seconds: 60 });
  eq(inv.status, 'queued', 'queued at once');
  const events = collect(await client.invocations.follow(inv.id));
  let browsers;
  await waitFor(async () => {
    browsers = (await client.invocations.listBrowsers(inv.id)).browsers;
    return browsers.length === 1;
  }, 'the invocation\'s browser is listed', 60000, 200);
  assert(browsers[0].session_id && browsers[0].cdp_ws_url, `browser: ${JSON.stringify(browsers[0])}`);
  await client.invocations.deleteBrowsers(inv.id);
  const done = await settled(client, inv.id);
  eq(done.status, 'succeeded', `ended: ${JSON.stringify(done)}`);
  eq(JSON.parse(done.output), 'released', 'the action saw its browser go');
  const evs = await events;
  const states = evs.filter((e) => e.event === 'invocation_state').map((e) => e.invocation.status);
  eq(states.at(-1), 'succeeded', `states: ${states}`);
  assert(states.includes('running'), `states: ${states}`);
  eq((await client.invocations.listBrowsers(inv.id)).browsers.length, 0, 'no browser left');
});

test('issue 36.3: a failing action ends failed with its error; an action may set its own outcome (update)', async () => {
  const { client } = await env();
  const bad = await client.invocations.create({ app_name: 'title-app', action_name: 'fail', version: '1' });
  eq(bad.status, 'failed', 'failed');
  assert(/boom from the action/.test(bad.status_reason), `reason: ${bad.status_reason}`);
  const logs = (await collect(await client.invocations.follow(bad.id))).filter((e) => e.event === 'log').map((e) => e.message);
  assert(logs.some((l) => /boom from the action/.test(l)), `the error's stack is in the log: ${logs}`);
  const host = join(here, '..', '..');
  assert(!logs.some((l) => l.includes(host)), `a log line shows a host path (${host}): ${logs.join('\n')}`);
  const p = await client.invocations.create({ app_name: 'title-app', action_name: 'patch', version: '1' });
  eq(p.status, 'succeeded', `patched: ${JSON.stringify(p)}`);
  eq(JSON.parse(p.output), { patched: true }, 'the output the action set');
  const u = await client.invocations.update(bad.id, { status: 'succeeded', output: '"fixed"' });
  eq(u.status, 'succeeded', 'update after the end');
  eq((await client.invocations.retrieve(bad.id)).output, '"fixed"', 'kept');
});

test('issue 36.3 and 36.5: an async invocation past async_timeout_seconds is killed (the whole tree) and ends failed naming the timeout; while it runs, an org or a project capped at one concurrent invocation gets 429 with Retry-After', async () => {
  const { s, client } = await env();
  const inv = await client.invocations.create({ app_name: 'title-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 10 });
  const ctx = await request(s.base, 'GET', '/auth/context', { key: s.key });
  const orgId = ctx.json.organization.id;
  const admin = (body) => request(s.base, 'PATCH', `/admin/orgs/${orgId}`, { body, headers: { authorization: `Bearer ${ADMIN}` } });
  const capped = await admin({ overrides: { limits: { max_concurrent_invocations: 1 } } });
  assert(capped.status < 300, `cap: ${capped.text}`);
  try {
    const r = await request(s.base, 'POST', '/invocations', { key: s.key, body: { app_name: 'title-app', action_name: 'tag', version: '1' } });
    isError(r, 429, 'rate_limited');
    assert(Number(r.headers['retry-after']) > 0, `Retry-After: ${JSON.stringify(r.headers)}`);
    assert(/max_concurrent_invocations/.test(r.text), r.text);
  } finally {
    const un = await admin({ overrides: { limits: { max_concurrent_invocations: null } } });
    assert(un.status < 300, `uncap: ${un.text}`);
  }
  // The project's own cap (its limits) applies the same way.
  const project = ctx.json.authorization.effective_scope.project_id;
  const lim = (n) => request(s.base, 'PATCH', `/org/projects/${project}/limits`, { key: s.key, body: { max_concurrent_invocations: n } });
  assert((await lim(1)).status < 300, 'project cap');
  try {
    const r = await request(s.base, 'POST', '/invocations', { key: s.key, body: { app_name: 'title-app', action_name: 'tag', version: '1' } });
    isError(r, 429, 'rate_limited');
    assert(/project/.test(r.text), r.text);
  } finally {
    assert((await lim(0)).status < 300, 'project uncap');
  }
  const done = await settled(client, inv.id);
  eq(done.status, 'failed', 'failed');
  assert(/timed out after 10 s/.test(done.status_reason), `reason: ${done.status_reason}`);
}, 90000);

test('issue 36.1: two versions coexist; the same version again is 409 without force, force replaces it', async () => {
  const { client, file, dep } = await env();
  const v2 = await client.deployments.create({ file: file(), entrypoint_rel_path: 'index.mjs', version: '2', env_vars: { APP_TAG: 'two' } });
  eq(v2.status, 'running', 'v2');
  const one = await client.invocations.create({ app_name: 'title-app', action_name: 'tag', version: '1' });
  const two = await client.invocations.create({ app_name: 'title-app', action_name: 'tag', version: '2' });
  eq([JSON.parse(one.output).tag, JSON.parse(two.output).tag], ['one', 'two'], 'each version runs with its own env');
  let err;
  try { await client.deployments.create({ file: file(), entrypoint_rel_path: 'index.mjs', version: '2' }); } catch (e) { err = e; }
  eq(err && err.status, 409, `same version: ${err}`);
  const v2b = await client.deployments.create({ file: file(), entrypoint_rel_path: 'index.mjs', version: '2', force: true, env_vars: { APP_TAG: 'two-b' } });
  eq(v2b.status, 'running', 'forced');
  eq((await client.deployments.retrieve(v2.id)).status, 'stopped', 'the replaced one stopped');
  const two2 = await client.invocations.create({ app_name: 'title-app', action_name: 'tag', version: '2' });
  eq(JSON.parse(two2.output).tag, 'two-b', 'the forced one runs');
  await client.deployments.delete(v2b.id);
  eq((await client.deployments.retrieve(v2b.id)).status, 'stopped', 'deleted: stopped');
  err = undefined;
  try { await client.invocations.create({ app_name: 'title-app', action_name: 'tag', version: '2' }); } catch (e) { err = e; }
  eq(err && err.status, 404, 'no running version 2 any more');
  eq((await client.deployments.retrieve(dep.id)).status, 'running', 'version 1 untouched');
});

test('issue 36.3: an app cannot read the server\'s files, cannot use the admin API, and sees none of the server\'s environment', async () => {
  const { s, client, site } = await env();
  const paths = [join(s.dir, 'browserd.db'), join(s.dir, 'bootstrap-api-key'), s.dir, '/etc/shadow'];
  const inv = await client.invocations.create({ app_name: 'title-app', action_name: 'probe', version: '1', payload: JSON.stringify({ paths, site: site.url }) });
  eq(inv.status, 'succeeded', `probe: ${JSON.stringify(inv)}`);
  const out = JSON.parse(inv.output);
  for (const p of paths) assert(out[p] !== 'read', `${p} was readable: ${out[p]}`);
  assert(out.admin === 401 || out.admin === 403, `admin API: ${out.admin}`);
  assert(!out.env.includes('BROWSERD_ADMIN_TOKEN'), `env: ${out.env}`);
  eq(out.outside, 'unreachable', 'only the server\'s API is reachable from the run');
  // The run's key is revoked when it ends: no key named after it works.
  const keys = await request(s.base, 'GET', '/org/api_keys?include_deleted=true', { key: s.key });
  const k = keys.json.find((x) => x.name === `invocation ${inv.id}`);
  assert(k && k.deleted_at, `the invocation's key is revoked: ${JSON.stringify(k)}`);
});

test('issue 36: another org sees none of these ids (404); bad input is 400 naming the field', async () => {
  const { s, client, dep } = await env();
  const inv = (await client.invocations.list({ app_name: "title-app" })).items[0];
  const other = await newOrg(s, ADMIN, { name: 'other', plan: 'enterprise' });
  for (const p of [`/deployments/${dep.id}`, `/invocations/${inv.id}`, `/invocations/${inv.id}/browsers`, `/deployments/${dep.id}/events`]) {
    const r = await request(s.base, 'GET', p, { key: other.key });
    isError(r, 404, 'not_found');
  }
  const apps = await request(s.base, 'GET', '/apps', { key: other.key });
  eq(apps.json.length, 0, 'another org has no apps');
  const bad = await request(s.base, 'POST', '/invocations', { key: s.key, body: { app_name: 'title-app', version: '1', async_timeout_seconds: 5, async: true } });
  isError(bad, 400, 'bad_request');
  assert(/action_name/.test(bad.text) && /async_timeout_seconds/.test(bad.text), bad.text);
  const act = await request(s.base, 'POST', '/invocations', { key: s.key, body: { app_name: 'title-app', version: '1', action_name: 'nope' } });
  isError(act, 400, 'bad_request');
  assert(/action_name/.test(act.text), act.text);
  let err;
  try { await client.deployments.create({ file: shared.file(), entrypoint_rel_path: 'main.py', version: '9' }); } catch (e) { err = e; }
  eq(err && err.status, 400, 'a Python entrypoint');
  assert(/entrypoint_rel_path/.test(err.message) && /Node/.test(err.message), err.message);
  err = undefined;
  try { await client.deployments.create({ file: new File([Buffer.from('not a zip')], 'a.zip'), entrypoint_rel_path: 'index.mjs' }); } catch (e) { err = e; }
  eq(err && err.status, 400, 'not a zip');
  assert(/file/.test(err.message), err.message);
  const patch = await request(s.base, 'PATCH', `/invocations/${inv.id}`, { key: s.key, body: { status: 'done' } });
  isError(patch, 400, 'bad_request');
  assert(/status/.test(patch.text), patch.text);
});

test('issue 36.4: the server stops cleanly while an async invocation runs: its run is killed and its cgroup removed (the shared server\'s end)', async () => {
  const { s, client, site } = await env();
  const inv = await client.invocations.create({ app_name: 'title-app', action_name: 'sleep', version: '1', async: true, async_timeout_seconds: 600 });
  await waitFor(async () => (await client.invocations.retrieve(inv.id)).status === 'running', 'the invocation runs', 60000, 200);
  await waitFor(() => sessionCgroupDirs(inv.id).length > 0, 'its cgroup exists', 30000, 100);
  shared = undefined;
  site.close();
  const code = await s.stop();
  eq(code, 0, `the server's exit: ${s.log.slice(-2000)}`);
  eq(sessionCgroupDirs(inv.id), [], 'no cgroup of the run left behind');
  s.cleanup();
}, 90000);

export { tests };
