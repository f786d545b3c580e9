// The runner of an app's code (src/runtime/apprun.h): reads one instruction
// as JSON on stdin, loads the app's entrypoint, and answers one JSON line on
// descriptor 3. The app declares its actions with the official client's app
// framework (kernel.app(name).action(name, handler)); the registry is read
// from the app's own copy of @onkernel/sdk (both its ESM and CommonJS
// builds: an app may load either).
//   {mode: "discover", entrypoint}                      -> {ok, apps: [{name, actions: [{name}]}]}
//   {mode: "invoke", entrypoint, app_name, action_name,
//    payload, invocation_id}                            -> {ok, output} | {ok: false, error}
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

function answer(obj) {
  fs.writeSync(3, JSON.stringify(obj) + '\n');
  process.exit(0);
}

function message(e) {
  if (e && typeof e === 'object' && 'message' in e) return String(e.message);
  return String(e);
}

const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const appDir = process.cwd();
// Before npm ci (src/runtime/apprun.c install): the lock file alone.
if (input.mode === 'checklock') {
  checkLock();
  answer({ ok: true });
}
const entry = path.resolve(appDir, input.entrypoint);
if (!entry.startsWith(appDir + path.sep)) answer({ ok: false, error: 'entrypoint_rel_path is outside the app' });
if (!fs.existsSync(entry)) answer({ ok: false, error: `entrypoint ${input.entrypoint} not found in the app` });

// The app's own @onkernel/sdk: the nearest node_modules above the entrypoint.
function sdkDir() {
  for (let d = path.dirname(entry); d.startsWith(appDir); d = path.dirname(d)) {
    const c = path.join(d, 'node_modules', '@onkernel', 'sdk');
    if (fs.existsSync(path.join(c, 'package.json'))) return c;
    if (d === appDir) break;
  }
  return null;
}

// A deployment's lock file (discovery only, before any of the app's code
// runs): every package it resolves must come from the registry the
// operator allows (BROWSERD_APPS_NPM_REGISTRY, given as npm_registry), so
// that installing from it can reach nothing else. Checked only when the app
// does not bundle node_modules/ (the case npm ci is for).
function lockFailure(why) {
  console.error(`package-lock.json: ${why}`);
  answer({ ok: false, error: `package-lock.json: ${why}` });
}
function checkLock() {
  const lock = path.join(appDir, 'package-lock.json');
  if (!fs.existsSync(lock) || fs.existsSync(path.join(appDir, 'node_modules'))) return;
  const reg = String(input.npm_registry);
  const st = fs.statSync(lock);
  if (!st.isFile() || st.size > input.npm_lock_max)
    lockFailure(`is larger than ${input.npm_lock_max} bytes (or not a file)`);
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(lock, 'utf8'));
  } catch (e) {
    lockFailure(`is not JSON (${message(e)})`);
  }
  if (!doc || typeof doc !== 'object') lockFailure('is not a JSON object');
  const check = (name, entry) => {
    if (!entry || typeof entry !== 'object' || entry.resolved === undefined) return;
    if (typeof entry.resolved !== 'string' || !entry.resolved.startsWith(reg))
      lockFailure(`package ${name} is resolved from ${JSON.stringify(entry.resolved)}: every resolved URL must start with the registry ${reg} (BROWSERD_APPS_NPM_REGISTRY)`);
  };
  // lockfileVersion 2 and 3: "packages" keyed by install path.
  for (const [key, entry] of Object.entries(doc.packages ?? {})) {
    check(key.replace(/^.*node_modules\//, '') || '(the app)', entry);
  }
  // lockfileVersion 1 (and 2's copy): nested "dependencies".
  const walk = (deps, depth) => {
    if (!deps || typeof deps !== 'object' || depth > 64) return;
    for (const [name, entry] of Object.entries(deps)) {
      check(name, entry);
      walk(entry?.dependencies, depth + 1);
    }
  };
  walk(doc.dependencies, 0);
}
if (input.mode === 'discover' && input.npm_registry) checkLock();

try {
  await import(pathToFileURL(entry).href);
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  answer({ ok: false, error: `loading ${input.entrypoint} failed: ${message(e)}` });
}

const dir = sdkDir();
if (!dir) answer({ ok: false, error: 'the app has no @onkernel/sdk: zip its node_modules with it, or ship a package-lock.json (and no node_modules) that lists it' });
const registries = [];
const esm = path.join(dir, 'core', 'app-framework.mjs');
const cjs = path.join(dir, 'core', 'app-framework.js');
if (fs.existsSync(esm)) registries.push((await import(pathToFileURL(esm).href)).appRegistry);
if (fs.existsSync(cjs)) registries.push(createRequire(entry)(cjs).appRegistry);
const apps = new Map();
for (const r of registries) for (const a of r?.getApps?.() ?? []) apps.set(a.name, a);

if (input.mode === 'discover') {
  answer({ ok: true, apps: [...apps.values()].map((a) => a.toJSON()) });
}
const app = apps.get(input.app_name);
const action = app?.getAction(input.action_name);
if (!action) answer({ ok: false, error: `app ${input.app_name} has no action ${input.action_name}` });
let payload;
if (input.payload !== undefined && input.payload !== null && input.payload !== '') {
  try {
    payload = JSON.parse(input.payload);
  } catch {
    payload = input.payload;
  }
}
try {
  const result = await action.handler({ invocation_id: input.invocation_id }, payload);
  answer({ ok: true, output: result === undefined ? null : result });
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  answer({ ok: false, error: message(e) });
}
