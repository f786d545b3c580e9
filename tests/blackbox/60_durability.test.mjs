// Durability (an acknowledged write survives SIGKILL and a restart on the same
// data folder) and clean shutdown on SIGTERM / SIGINT.
import { startServer, request, assert, eq, isError } from './lib.mjs';

const ADMIN = 'admin-token-for-tests';

function ok2xx(r, what) {
  assert(r.status >= 200 && r.status < 300, `${what}: ${r.status} ${r.text}`);
  return r.json;
}

function admin(s, method, path, body) {
  return request(s.base, method, path, { body, headers: { authorization: `Bearer ${ADMIN}` } });
}

// Stops the server with a signal and waits until its stderr is fully read.
async function stopAndDrain(s, signal) {
  const code = await s.stop(signal);
  const err = s.proc.stderr;
  if (!err.readableEnded && !err.destroyed) {
    await new Promise((r) => { err.once('end', r); err.once('close', r); });
  }
  return code;
}

export const tests = [
  {
    name: 'durability: acknowledged writes (project create/rename/delete, key create/delete/rotate, org and plan changes) survive SIGKILL and a restart',
    timeout: 60000,
    fn: async () => {
      const s1 = await startServer({ args: ['--admin-token', ADMIN] });
      let s2;
      try {
        const k = s1.key;
        const p = ok2xx(await request(s1.base, 'POST', '/org/projects', { key: k, body: { name: 'kept' } }), 'create');
        const gone = ok2xx(await request(s1.base, 'POST', '/org/projects', { key: k, body: { name: 'gone' } }), 'create gone');
        ok2xx(await request(s1.base, 'PATCH', `/org/projects/${p.id}`, { key: k, body: { name: 'kept2', status: 'archived' } }), 'rename');
        ok2xx(await request(s1.base, 'DELETE', `/org/projects/${gone.id}`, { key: k }), 'delete');
        const nk = ok2xx(await request(s1.base, 'POST', '/org/api_keys', { key: k, body: { name: 'survivor' } }), 'key');
        const dk = ok2xx(await request(s1.base, 'POST', '/org/api_keys', { key: k, body: { name: 'deleted' } }), 'key 2');
        ok2xx(await request(s1.base, 'DELETE', `/org/api_keys/${dk.id}`, { key: k }), 'delete key');
        const rk = ok2xx(await request(s1.base, 'POST', `/org/api_keys/${nk.id}/rotate`, { key: k, body: {} }), 'rotate');
        ok2xx(await admin(s1, 'PUT', '/admin/plans/durable', { entitlements: { limits: { max_concurrent_browsers: 2 } } }), 'plan');
        const org = ok2xx(await admin(s1, 'POST', '/admin/orgs', { name: 'b', plan: 'durable', trial_plan: 'startup', trial_ends_at: '2099-01-01T00:00:00Z' }), 'org');
        ok2xx(await admin(s1, 'PATCH', `/admin/orgs/${org.id}`, { overrides: { limits: { max_vaults: 3 } } }), 'patch org');
        const bk = ok2xx(await admin(s1, 'POST', `/admin/orgs/${org.id}/api_keys`, {}), 'org b key');

        const sig = await s1.kill9();
        eq(sig, 'SIGKILL', 'killed by SIGKILL');
        s2 = await startServer({ dataDir: s1.dir, args: ['--admin-token', ADMIN] });
        assert(!/created organization/.test(s2.log), 'restart bootstrapped again');

        const got = await request(s2.base, 'GET', `/org/projects/${p.id}`, { key: k });
        eq([got.status, got.json && got.json.name, got.json && got.json.status], [200, 'kept2', 'archived'], 'project after restart');
        isError(await request(s2.base, 'GET', `/org/projects/${gone.id}`, { key: k }), 404, 'project_not_found');
        eq((await request(s2.base, 'GET', '/org/entitlements', { key: nk.key })).status, 200, 'rotated-out key in grace');
        eq((await request(s2.base, 'GET', '/org/entitlements', { key: rk.key })).status, 200, 'rotated key');
        isError(await request(s2.base, 'GET', '/org/entitlements', { key: dk.key }), 401, 'unauthorized');
        const e = (await request(s2.base, 'GET', '/org/entitlements', { key: bk.key })).json;
        eq([e.plan.id, e.plan.effective_id, e.plan.is_trialing, e.limits.max_vaults], ['durable', 'startup', true, 3], 'org b after restart');
        assert((await admin(s2, 'GET', '/admin/plans')).json.some((x) => x.id === 'durable'), 'custom plan after restart');
      } finally {
        await s1.stop();
        if (s2) await s2.stop();
        s1.cleanup();
      }
    },
  },
  {
    name: 'durability: 20 acknowledged project creations in a row all survive SIGKILL',
    timeout: 60000,
    fn: async () => {
      const s1 = await startServer();
      let s2;
      try {
        const ids = [];
        for (let i = 0; i < 20; i++) ids.push(ok2xx(await request(s1.base, 'POST', '/org/projects', { key: s1.key, body: { name: `n${i}` } }), 'create').id);
        await s1.kill9();
        s2 = await startServer({ dataDir: s1.dir });
        const list = (await request(s2.base, 'GET', '/org/projects?limit=100', { key: s1.key })).json;
        for (const id of ids) assert(list.some((p) => p.id === id), `project ${id} lost`);
        eq(list.length, 21);
      } finally {
        await s1.stop();
        if (s2) await s2.stop();
        s1.cleanup();
      }
    },
  },
  {
    name: 'shutdown: SIGTERM exits 0 and logs "stopped cleanly"; the data folder opens again',
    fn: async () => {
      const s = await startServer();
      let s2;
      try {
        ok2xx(await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'x' } }), 'create');
        eq(await stopAndDrain(s, 'SIGTERM'), 0, 'exit code');
        assert(/stopped cleanly/.test(s.log), `log:\n${s.log}`);
        s2 = await startServer({ dataDir: s.dir });
        eq((await request(s2.base, 'GET', '/org/projects/x', { key: s.key })).status, 200);
      } finally {
        await s.stop();
        if (s2) await s2.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'shutdown: SIGINT also exits 0 and logs "stopped cleanly"',
    fn: async () => {
      const s = await startServer();
      try {
        eq((await request(s.base, 'GET', '/org/entitlements', { key: s.key })).status, 200);
        eq(await stopAndDrain(s, 'SIGINT'), 0, 'exit code');
        assert(/stopped cleanly/.test(s.log), `log:\n${s.log}`);
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'shutdown: SIGTERM with an idle keep-alive connection open still exits 0 and logs "stopped cleanly"',
    fn: async () => {
      const http = await import('node:http');
      const s = await startServer();
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        eq((await request(s.base, 'GET', '/org/entitlements', { key: s.key, agent })).status, 200);
        eq(await stopAndDrain(s, 'SIGTERM'), 0, 'exit code');
        assert(/stopped cleanly/.test(s.log), `log:\n${s.log}`);
      } finally {
        agent.destroy();
        await s.stop();
        s.cleanup();
      }
    },
  },
];
