// Issue 36 (npm): a deployment that ships package-lock.json without
// node_modules/ has its lock file checked before any of its code runs: every
// `resolved` URL must start with the operator's registry
// (BROWSERD_APPS_NPM_REGISTRY), a lock file that is not JSON fails the same
// way, and a bundled app (node_modules/ in the zip) is not checked. The
// registry here is a fake one on 127.0.0.1; the "elsewhere" host is another
// site on 127.0.0.2 that must get no request.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Kernel from '@onkernel/sdk';
import { startServer, startSite, assert, eq } from '../blackbox/lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));

const APP = `
import Kernel from '@onkernel/sdk';
import tiny from 'tiny-answer';
const app = new Kernel().app('npm-app');
app.action('answer', async (ctx) => tiny());
`;

// A zip of the app's folder: index.mjs, package.json, the given lock file
// text (none when null) and, when bundled, a node_modules/ folder.
function zipOf(lock, { bundled = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-npmapp-'));
  writeFileSync(join(dir, 'index.mjs'), APP);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({
    name: 'npm-app', version: '1.0.0', type: 'module',
    dependencies: { '@onkernel/sdk': '*', 'tiny-answer': '1.0.0' },
  }));
  const files = ['index.mjs', 'package.json'];
  if (lock !== null) { writeFileSync(join(dir, 'package-lock.json'), lock); files.push('package-lock.json'); }
  if (bundled) {
    mkdirSync(join(dir, 'node_modules', 'tiny-answer'), { recursive: true });
    writeFileSync(join(dir, 'node_modules', 'tiny-answer', 'package.json'), '{"name":"tiny-answer","version":"1.0.0","main":"index.js"}');
    writeFileSync(join(dir, 'node_modules', 'tiny-answer', 'index.js'), 'module.exports = () => 42;');
    cpSync(join(here, 'node_modules', '@onkernel', 'sdk'), join(dir, 'node_modules', '@onkernel', 'sdk'), { recursive: true, dereference: true });
    files.push('node_modules');
  }
  execFileSync('zip', ['-qr1', join(dir, 'app.zip'), ...files], { cwd: dir });
  const zip = readFileSync(join(dir, 'app.zip'));
  rmSync(dir, { recursive: true, force: true });
  return new File([zip], 'app.zip', { type: 'application/zip' });
}

// The registry's tarballs in npm's layout (package/...): the pinned client
// and a tiny package of this test's own whose function answers 42.
function tarballs() {
  const dir = mkdtempSync(join(tmpdir(), 'browserd-npmreg-'));
  mkdirSync(join(dir, 'tiny', 'package'), { recursive: true });
  writeFileSync(join(dir, 'tiny', 'package', 'package.json'), '{"name":"tiny-answer","version":"1.0.0","main":"index.js"}');
  writeFileSync(join(dir, 'tiny', 'package', 'index.js'), 'module.exports = () => 42;');
  cpSync(join(here, 'node_modules', '@onkernel', 'sdk'), join(dir, 'sdk', 'package'), { recursive: true, dereference: true });
  const out = {};
  for (const [name, sub] of [['tiny-answer/-/tiny-answer-1.0.0.tgz', 'tiny'], ['@onkernel/sdk/-/sdk-0.84.0.tgz', 'sdk']]) {
    execFileSync('tar', ['czf', join(dir, `${sub}.tgz`), '-C', join(dir, sub), 'package']);
    const body = readFileSync(join(dir, `${sub}.tgz`));
    out[`/${name}`] = { body, integrity: `sha512-${createHash('sha512').update(body).digest('base64')}` };
  }
  rmSync(dir, { recursive: true, force: true });
  return out;
}
const TARBALLS = tarballs();

// A lockfileVersion 3 lock file resolving the client from `registry` and
// tiny-answer from `tinyURL`, with the tarballs' integrity.
function lockOf(registry, tinyURL) {
  return JSON.stringify({
    name: 'npm-app', version: '1.0.0', lockfileVersion: 3, requires: true,
    packages: {
      '': { name: 'npm-app', version: '1.0.0', dependencies: { '@onkernel/sdk': '*', 'tiny-answer': '1.0.0' } },
      'node_modules/@onkernel/sdk': { version: '0.84.0', resolved: `${registry}@onkernel/sdk/-/sdk-0.84.0.tgz`, integrity: TARBALLS['/@onkernel/sdk/-/sdk-0.84.0.tgz'].integrity },
      'node_modules/tiny-answer': { version: '1.0.0', resolved: tinyURL, integrity: TARBALLS['/tiny-answer/-/tiny-answer-1.0.0.tgz'].integrity },
    },
  });
}

let shared;
async function env() {
  if (shared) return shared;
  const hits = { registry: [], elsewhere: [] };
  // npm asks through the run's registry relay as a proxy: the request
  // line may be in absolute form.
  const registry = await startSite((req, res) => {
    const path = new URL(req.url, 'http://registry').pathname;
    hits.registry.push(path);
    const t = TARBALLS[path];
    if (!t) { res.statusCode = 404; res.end(); return; }
    res.setHeader('content-type', 'application/octet-stream');
    res.end(t.body);
  });
  const elsewhere = await startSite((req, res) => { hits.elsewhere.push(req.url); res.statusCode = 404; res.end(); }, { host: '127.0.0.2' });
  const s = await startServer({
    env: { BROWSERD_APPS_NPM_REGISTRY: `${registry.url}/` },
    args: ['--allow-loopback', `${registry.hostport},${elsewhere.hostport}`],
  });
  const client = new Kernel({ baseURL: s.base, apiKey: s.key, maxRetries: 0, timeout: 120000 });
  shared = { s, client, registry, elsewhere, hits };
  process.once('exit', () => { try { rmSync(s.dir, { recursive: true, force: true }); } catch { /* gone */ } });
  return shared;
}

async function buildLog(client, id) {
  const lines = [];
  for await (const ev of await client.deployments.follow(id)) if (ev.event === 'log') lines.push(ev.message);
  return lines.join('\n');
}

const tests = [];
const test = (name, fn, timeout = 40000) => tests.push({ name, fn, timeout });

test('issue 36 npm: a zip with package-lock.json and no node_modules/ has its dependencies installed (npm ci from the registry) and runs: its action uses the installed package', async () => {
  const { client, registry, hits } = await env();
  const reg = `${registry.url}/`;
  const dep = await client.deployments.create({ file: zipOf(lockOf(reg, `${reg}tiny-answer/-/tiny-answer-1.0.0.tgz`)), entrypoint_rel_path: 'index.mjs', version: '0' });
  const log = await buildLog(client, dep.id);
  eq(dep.status, 'running', `deployment: ${JSON.stringify(dep)}\nbuild log: ${log}`);
  assert(/added 2 packages/.test(log), `npm's output in the build log: ${log}`);
  assert(hits.registry.includes('/tiny-answer/-/tiny-answer-1.0.0.tgz') && hits.registry.includes('/@onkernel/sdk/-/sdk-0.84.0.tgz'), `registry requests: ${hits.registry}`);
  const inv = await client.invocations.create({ app_name: 'npm-app', version: '0', action_name: 'answer' });
  eq(inv.status, 'succeeded', `invocation: ${JSON.stringify(inv)}`);
  eq(JSON.parse(inv.output), 42, 'the installed package answers');
}, 120000);

test('issue 36 npm: a lock file resolving a package outside BROWSERD_APPS_NPM_REGISTRY fails the deployment naming the package and the rule; that host gets no request', async () => {
  const { client, registry, elsewhere, hits } = await env();
  const lock = lockOf(`${registry.url}/`, `${elsewhere.url}/tiny-answer/-/tiny-answer-1.0.0.tgz`);
  const dep = await client.deployments.create({ file: zipOf(lock), entrypoint_rel_path: 'index.mjs', version: '1' });
  eq(dep.status, 'failed', `deployment: ${JSON.stringify(dep)}`);
  assert(/package-lock\.json/.test(dep.status_reason) && /tiny-answer/.test(dep.status_reason) &&
    dep.status_reason.includes(elsewhere.url) && /must start with the registry/.test(dep.status_reason) &&
    dep.status_reason.includes(`${registry.url}/`), `reason: ${dep.status_reason}`);
  const log = await buildLog(client, dep.id);
  assert(/tiny-answer/.test(log) && /must start with the registry/.test(log), `build log: ${log}`);
  eq(hits.elsewhere, [], 'no request reached the host outside the registry');
  // The same lock file beside a bundled node_modules/ is not checked
  // (nothing is installed): the app deploys and its action answers.
  const bundled = await client.deployments.create({ file: zipOf(lock, { bundled: true }), entrypoint_rel_path: 'index.mjs', version: '1b' });
  eq(bundled.status, 'running', `bundled deployment: ${JSON.stringify(bundled)}`);
  const inv = await client.invocations.create({ app_name: 'npm-app', version: '1b', action_name: 'answer' });
  eq(inv.status, 'succeeded', `invocation: ${JSON.stringify(inv)}`);
  eq(JSON.parse(inv.output), 42, 'the bundled package answers');
  eq(hits.elsewhere, [], 'still no request outside the registry');
});

test('issue 36 npm: a registry prefix is not a host prefix (http://127.0.0.1:PORT0/ is not under http://127.0.0.1:PORT/)', async () => {
  const { client, registry } = await env();
  const lock = lockOf(`${registry.url}/`, `${registry.url}0/tiny-answer/-/tiny-answer-1.0.0.tgz`);
  const dep = await client.deployments.create({ file: zipOf(lock), entrypoint_rel_path: 'index.mjs', version: '2' });
  eq(dep.status, 'failed', `deployment: ${JSON.stringify(dep)}`);
  assert(/tiny-answer/.test(dep.status_reason) && /must start with the registry/.test(dep.status_reason), `reason: ${dep.status_reason}`);
});

test('issue 36 npm: a lock file that is not JSON fails the deployment naming the file and the rule', async () => {
  const { client } = await env();
  const dep = await client.deployments.create({ file: zipOf('{"lockfileVersion": 3, '), entrypoint_rel_path: 'index.mjs', version: '3' });
  eq(dep.status, 'failed', `deployment: ${JSON.stringify(dep)}`);
  assert(/package-lock\.json/.test(dep.status_reason) && /is not JSON/.test(dep.status_reason), `reason: ${dep.status_reason}`);
});

test('issue 36 npm: a lock file over LIM_APP_NPM_LOCK_BYTES (8 MiB) fails the deployment naming the cap', async () => {
  const { client } = await env();
  const big = JSON.stringify({ lockfileVersion: 3, packages: {}, pad: 'x'.repeat(8 * 1024 * 1024) });
  const dep = await client.deployments.create({ file: zipOf(big), entrypoint_rel_path: 'index.mjs', version: '4' });
  eq(dep.status, 'failed', `deployment: ${JSON.stringify(dep)}`);
  assert(/package-lock\.json/.test(dep.status_reason) && /larger than 8388608 bytes/.test(dep.status_reason), `reason: ${dep.status_reason}`);
});

test('issue 36 npm: the server refuses to start with a BROWSERD_APPS_NPM_REGISTRY that is not an http(s) URL', async () => {
  let err;
  try { await startServer({ env: { BROWSERD_APPS_NPM_REGISTRY: 'ftp://registry.example/' } }); } catch (e) { err = e; }
  assert(err && /BROWSERD_APPS_NPM_REGISTRY/.test(String(err.message)), `start: ${err && err.message}`);
  if (shared) {
    // The shared server's end: a sanitizer's report at exit fails here.
    eq(await shared.s.stop(), 0, 'the server exits cleanly');
    shared.s.cleanup();
    shared.registry.close();
    shared.elsewhere.close();
    shared = undefined;
  }
});

export { tests };
