// Apps (issue 36): what a deployment and an invocation cost. Prints a
// Markdown section; bench/run.sh appends it to docs/BENCHMARKS.md.
//   - POST /deployments of an app bundled like tests/compat/36_apps' (its
//     node_modules hold @onkernel/sdk and playwright-core, zipped with
//     `zip -1`): the answer comes once the entrypoint was loaded in its
//     sandbox and its actions read (status running);
//   - a sync POST /invocations of an action that returns at once: all of it
//     is overhead (a sandbox, the app unpacked into its files, Node started,
//     the entrypoint imported, a key stored and revoked).
//   node bench/apps.mjs
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../tests/blackbox/lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, '..', 'tests', 'compat', 'node_modules');
const DEPLOYS = Number(process.env.BENCH_APP_DEPLOYS || 5);
const CALLS = Number(process.env.BENCH_APP_CALLS || 20);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const p90 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * 0.9))]; };

const dir = mkdtempSync(join(tmpdir(), 'browserd-bench-app-'));
writeFileSync(join(dir, 'index.mjs'), "import Kernel from '@onkernel/sdk';\nimport 'playwright-core';\nconst app = new Kernel().app('bench');\napp.action('noop', async (ctx) => 1);\n");
for (const m of ['@onkernel/sdk', 'playwright-core']) {
  mkdirSync(join(dir, 'node_modules', dirname(m)), { recursive: true });
  cpSync(join(modules, m), join(dir, 'node_modules', m), { recursive: true, dereference: true });
}
execFileSync('zip', ['-qr1', join(dir, 'app.zip'), 'index.mjs', 'node_modules'], { cwd: dir });
const zip = readFileSync(join(dir, 'app.zip'));
rmSync(dir, { recursive: true, force: true });

const s = await startServer();
const call = async (method, path, body, headers = {}) => {
  const t = performance.now();
  const r = await fetch(new URL(path, s.base), { method, body, headers: { authorization: `Bearer ${s.key}`, ...headers } });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return { ms: performance.now() - t, json: JSON.parse(text) };
};
try {
  const deploys = [];
  for (let i = 0; i < DEPLOYS; i++) {
    const fd = new FormData();
    fd.append('file', new Blob([zip]), 'app.zip');
    fd.append('entrypoint_rel_path', 'index.mjs');
    fd.append('version', String(i));
    const r = await call('POST', '/deployments', fd);
    if (r.json.status !== 'running') throw new Error(`deploy: ${JSON.stringify(r.json)}`);
    deploys.push(r.ms);
  }
  const calls = [];
  const body = JSON.stringify({ app_name: 'bench', action_name: 'noop', version: '0' });
  await call('POST', '/invocations', body, { 'content-type': 'application/json' });
  for (let i = 0; i < CALLS; i++) calls.push((await call('POST', '/invocations', body, { 'content-type': 'application/json' })).ms);
  console.log(`## Apps: deploy and invoke (issue 36)

One server with its defaults; the app of \`tests/compat/36_apps\` in shape (\`@onkernel/sdk\` and \`playwright-core\` bundled, a ${(zip.length / 1048576).toFixed(1)} MiB zip), \`node bench/apps.mjs\`.

| figure | median | spread |
|---|---|---|
| \`POST /deployments\` to \`running\` (store, sandbox, unpack, Node loads the entrypoint), ${DEPLOYS} deploys | ${median(deploys).toFixed(0)} ms | max ${Math.max(...deploys).toFixed(0)} ms |
| sync \`POST /invocations\` of an action that returns at once (all overhead), ${CALLS} calls after one warm-up | ${median(calls).toFixed(0)} ms | p90 ${p90(calls).toFixed(0)} ms |
`);
} finally {
  await s.stop();
  s.cleanup();
}
