// OPERATOR.md command line (admin org create/update, admin key create,
// --help, version) and First start (bootstrap key file, env key, restart).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, request, assert, eq, isError, BIN } from './lib.mjs';

const DAY = 86400000;

// Runs `browserd ARGS` to completion; returns {code, stdout, stderr}.
function cli(args, env = {}) {
  const r = spawnSync(BIN, args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 20000 });
  if (r.error) throw r.error;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function cliOk(args, what) {
  const r = cli(args);
  eq(r.code, 0, `${what || args.join(' ')} exit code; stderr: ${r.stderr}`);
  return r.stdout;
}

function cliJson(args) {
  const out = cliOk(args);
  try { return JSON.parse(out); } catch { throw new Error(`not JSON from ${args.join(' ')}: ${out}`); }
}

async function withServer(fn, opts = {}) {
  const s = await startServer(opts);
  try {
    await fn(s);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

const ent = async (s, key) => {
  const r = await request(s.base, 'GET', '/org/entitlements', { key });
  eq(r.status, 200, r.text);
  return r.json;
};

export const tests = [
  {
    name: 'OPERATOR command line: `browserd --help` and `browserd version` exit 0 and print usage / the version',
    fn: async () => {
      const h = cli(['--help']);
      eq(h.code, 0, `--help: ${h.stderr}`);
      assert(/browserd serve/.test(h.stdout) && /browserd admin org create/.test(h.stdout) && /admin key create/.test(h.stdout), `usage: ${h.stdout}`);
      const v = cli(['version']);
      eq(v.code, 0, `version: ${v.stderr}`);
      assert(/^browserd \d+\.\d+\.\d+/.test(v.stdout), `version output: ${v.stdout}`);
      const version = readFileSync('VERSION', 'utf8').trim();
      assert(v.stdout.includes(version), `version ${v.stdout} vs VERSION ${version}`);
      const bad = cli(['frobnicate']);
      assert(bad.code !== 0, 'an unknown command exits non-zero');
    },
  },
  {
    name: 'OPERATOR `admin org create --name N --plan startup --data DIR` prints the org as JSON',
    fn: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'browserd-bb-'));
      try {
        const org = cliJson(['admin', 'org', 'create', '--name', 'Acme', '--plan', 'startup', '--data', dir]);
        assert(/^[a-z0-9]{24}$/.test(org.id), `id ${org.id}`);
        eq([org.name, org.plan, org.plan_status, org.trial_plan, org.trial_ends_at, org.projects_enabled, org.overrides],
          ['Acme', 'startup', 'active', null, null, true, {}], 'org record');
        eq(org.default_project.name, 'default');
        assert(typeof org.created_at === 'string', 'created_at');
        const dflt = cliJson(['admin', 'org', 'create', '--name', 'Plain', '--data', dir]);
        eq(dflt.plan, 'developer', 'default plan');
        const bad = cli(['admin', 'org', 'create', '--name', 'X', '--plan', 'platinum', '--data', dir]);
        assert(bad.code !== 0, 'unknown plan must fail');
        const noName = cli(['admin', 'org', 'create', '--data', dir]);
        assert(noName.code !== 0, '--name is required');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'OPERATOR admin commands work on the data folder while the server runs: org update (status, override, projects, trial) and key create',
    fn: () => withServer(async (s) => {
      const org = cliJson(['admin', 'org', 'create', '--name', 'Live', '--plan', 'startup', '--data', s.dir]);
      const key = cliOk(['admin', 'key', 'create', '--org', org.id, '--name', 'cli-key', '--data', s.dir]).trim();
      assert(key.length >= 20 && !/\s/.test(key), `printed key: ${JSON.stringify(key)}`);
      let e = await ent(s, key);
      eq([e.plan.id, e.plan.effective_id, e.limits.max_concurrent_browsers], ['startup', 'startup', 150], 'fresh org via CLI');
      const ends = new Date(Date.now() + 10 * DAY).toISOString();
      const up = cliJson(['admin', 'org', 'update', org.id, '--plan-status', 'canceled', '--override', 'limits.max_concurrent_browsers=7',
        '--projects-enabled', 'false', '--trial-plan', 'enterprise', '--trial-ends-at', ends, '--data', s.dir]);
      eq([up.plan, up.plan_status, up.trial_plan, up.projects_enabled, up.overrides], ['startup', 'canceled', 'enterprise', false, { limits: { max_concurrent_browsers: 7 } }], 'updated record');
      eq(Date.parse(up.trial_ends_at), Date.parse(ends), 'trial_ends_at');
      // The running server sees the change at once.
      e = await ent(s, key);
      eq(e.plan, { id: 'startup', effective_id: 'developer', is_trialing: false, status: 'canceled', trial_ends_at: null }, 'canceled: developer, no trial');
      eq([e.limits.max_concurrent_browsers, e.limits.max_vaults], [7, 1], 'override over developer values');
      isError(await request(s.base, 'GET', '/org/projects', { key }), 404, 'projects_disabled');
      // Back to active: the trial applies; --override edits one path and keeps the others.
      const up2 = cliJson(['admin', 'org', 'update', org.id, '--plan-status', 'active', '--projects-enabled', 'true',
        '--override', 'limits.max_vaults=null', '--data', s.dir]);
      eq(up2.overrides, { limits: { max_concurrent_browsers: 7, max_vaults: null } }, 'overrides after a second --override');
      e = await ent(s, key);
      eq([e.plan.effective_id, e.plan.is_trialing, e.limits.max_concurrent_browsers, e.limits.max_vaults], ['enterprise', true, 7, null], 'trialing enterprise with overrides');
      eq(Date.parse(e.plan.trial_ends_at), Date.parse(ends));
      eq((await request(s.base, 'GET', '/org/projects', { key })).status, 200, 'projects enabled again');
      // Bad input fails and changes nothing.
      assert(cli(['admin', 'org', 'update', org.id, '--plan', 'platinum', '--data', s.dir]).code !== 0, 'unknown plan');
      assert(cli(['admin', 'org', 'update', org.id, '--override', 'limits.nope=1', '--data', s.dir]).code !== 0, 'unknown override path');
      assert(cli(['admin', 'org', 'update', org.id, '--projects-enabled', 'maybe', '--data', s.dir]).code !== 0, 'bad boolean');
      assert(cli(['admin', 'org', 'update', 'nosuchorg', '--plan', 'startup', '--data', s.dir]).code !== 0, 'unknown org');
      assert(cli(['admin', 'key', 'create', '--org', 'nosuchorg', '--data', s.dir]).code !== 0, 'key for unknown org');
      eq((await ent(s, key)).plan.id, 'startup', 'unchanged');
      // The bootstrap org is untouched by all this.
      eq((await ent(s, s.key)).plan.id, 'enterprise');
    }),
  },
  {
    name: 'OPERATOR `admin key create --org ID --project P` prints a project-scoped key that the running server accepts for P only',
    fn: () => withServer(async (s) => {
      const org = cliJson(['admin', 'org', 'create', '--name', 'Scoped', '--data', s.dir]);
      const orgKey = cliOk(['admin', 'key', 'create', '--org', org.id, '--data', s.dir]).trim();
      const other = await request(s.base, 'POST', '/org/projects', { key: orgKey, body: { name: 'other' } });
      assert(other.status >= 200 && other.status < 300, other.text);
      const pkey = cliOk(['admin', 'key', 'create', '--org', org.id, '--project', org.default_project.id, '--name', 'pk', '--data', s.dir]).trim();
      eq((await request(s.base, 'GET', '/browsers', { key: pkey })).status, 200, 'own project (no header)');
      eq((await request(s.base, 'GET', '/browsers', { key: pkey, headers: { 'x-kernel-project-id': org.default_project.id } })).status, 200, 'own project');
      isError(await request(s.base, 'GET', '/browsers', { key: pkey, headers: { 'x-kernel-project-id': 'other' } }), 403);
      const list = (await request(s.base, 'GET', '/org/api_keys', { key: orgKey })).json;
      const rec = list.find((k) => k.name === 'pk');
      assert(rec, `key pk not listed: ${JSON.stringify(list)}`);
      eq(rec.project_id, org.default_project.id);
      assert(cli(['admin', 'key', 'create', '--org', org.id, '--project', 'nosuch', '--data', s.dir]).code !== 0, 'unknown project');
    }),
  },
  {
    name: 'OPERATOR first start: DIR/bootstrap-api-key has mode 0600 and holds the key printed once on stderr',
    fn: () => withServer(async (s) => {
      const file = join(s.dir, 'bootstrap-api-key');
      eq((statSync(file).mode & 0o777).toString(8), '600', 'mode');
      assert(s.log.includes(s.key), 'the key is printed on stderr');
      eq((s.log.match(new RegExp(s.key, 'g')) || []).length, 1, 'printed once');
      const e = await ent(s, s.key);
      eq([e.plan.id, e.plan.effective_id], ['enterprise', 'enterprise']);
      const p = (await request(s.base, 'GET', '/org/projects', { key: s.key })).json;
      eq(p.map((x) => x.name), ['default'], 'one project, default');
      const k = (await request(s.base, 'GET', '/org/api_keys', { key: s.key })).json;
      eq(k.length, 1, 'one key');
      eq(k[0].project_id, null, 'organization-scoped');
    }),
  },
  {
    name: 'OPERATOR first start: BROWSERD_BOOTSTRAP_API_KEY sets the key',
    fn: () => withServer(async (s) => {
      eq(s.key, 'bd_test_bootstrap_key_0123456789abcdef', 'key file');
      eq((await ent(s, 'bd_test_bootstrap_key_0123456789abcdef')).plan.id, 'enterprise');
      assert(s.log.includes('bd_test_bootstrap_key_0123456789abcdef'), 'printed on stderr');
    }, { env: { BROWSERD_BOOTSTRAP_API_KEY: 'bd_test_bootstrap_key_0123456789abcdef' } }),
  },
  {
    name: 'OPERATOR first start: a later start on the same folder creates nothing (same key works, same org and project, env key ignored)',
    fn: async () => {
      const s1 = await startServer({ args: ['--admin-token', 'adm'] });
      let s2;
      try {
        const org1 = (await request(s1.base, 'GET', '/org/api_keys', { key: s1.key })).json;
        const proj1 = (await request(s1.base, 'GET', '/org/projects', { key: s1.key })).json;
        const fileBefore = readFileSync(join(s1.dir, 'bootstrap-api-key'), 'utf8');
        eq(await s1.stop(), 0, 'first stop');
        s2 = await startServer({ dataDir: s1.dir, args: ['--admin-token', 'adm'], env: { BROWSERD_BOOTSTRAP_API_KEY: 'bd_should_not_be_created_000000000000' } });
        assert(!/created organization/.test(s2.log), `second start bootstrapped again:\n${s2.log}`);
        eq(readFileSync(join(s1.dir, 'bootstrap-api-key'), 'utf8'), fileBefore, 'key file unchanged');
        eq(s2.key, s1.key);
        eq((await ent(s2, s1.key)).plan.id, 'enterprise', 'old key still works');
        isError(await request(s2.base, 'GET', '/org/entitlements', { key: 'bd_should_not_be_created_000000000000' }), 401, 'unauthorized');
        eq((await request(s2.base, 'GET', '/org/projects', { key: s1.key })).json, proj1, 'same projects');
        eq((await request(s2.base, 'GET', '/org/api_keys', { key: s1.key })).json, org1, 'same keys');
      } finally {
        await s1.stop();
        if (s2) await s2.stop();
        s1.cleanup();
      }
    },
  },
];
