// Issue 21: API keys and their orgs are cached in the server (src/store/keycache.h),
// and the cache must stay exact when ANOTHER process changes the data folder:
// `browserd admin`, or a second server on the same folder. Each test warms the
// cache with a few requests first, then changes the key or org elsewhere and
// checks the very next request.
import { spawnSync } from 'node:child_process';
import { startServer, request, assert, eq, isError, BIN } from './lib.mjs';

function cliOk(args) {
  const r = spawnSync(BIN, args, { encoding: 'utf8', timeout: 20000 });
  if (r.error) throw r.error;
  eq(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const ent = (s, key) => request(s.base, 'GET', '/org/entitlements', { key });

async function warm(s, key) {
  for (let i = 0; i < 3; i++) eq((await ent(s, key)).status, 200, 'key works before the change');
}

// Two servers on one data folder; the second plays the other process.
async function withTwo(fn) {
  const s1 = await startServer();
  let s2;
  try {
    s2 = await startServer({ dataDir: s1.dir });
    await fn(s1, s2);
  } finally {
    if (s2) await s2.stop();
    await s1.stop();
    s1.cleanup();
  }
}

export const tests = [
  {
    name: 'ISSUE 21 key cache: `browserd admin org update` from another process is seen by the very next request (the org row is cached with the key)',
    fn: async () => {
      const s = await startServer();
      try {
        const org = JSON.parse(cliOk(['admin', 'org', 'create', '--name', 'Cached', '--plan', 'developer', '--data', s.dir]));
        const key = cliOk(['admin', 'key', 'create', '--org', org.id, '--data', s.dir]).trim();
        await warm(s, key);
        eq((await ent(s, key)).json.plan.id, 'developer');
        cliOk(['admin', 'org', 'update', org.id, '--plan', 'startup', '--data', s.dir]);
        eq((await ent(s, key)).json.plan.id, 'startup', 'plan after admin org update');
        cliOk(['admin', 'org', 'update', org.id, '--projects-enabled', 'false', '--data', s.dir]);
        isError(await request(s.base, 'GET', '/org/projects', { key }), 404, 'projects_disabled');
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'ISSUE 21 key cache: a key deleted by another process (a second server on the data folder) is refused (401) on the very next request',
    fn: () => withTwo(async (s1, s2) => {
      const made = (await request(s1.base, 'POST', '/org/api_keys', { key: s1.key, body: { name: 'doomed' } })).json;
      assert(made && made.key, 'key created');
      await warm(s1, made.key);
      eq((await request(s2.base, 'DELETE', `/org/api_keys/${made.id}`, { key: s1.key })).status, 204, 'deleted via the other server');
      isError(await ent(s1, made.key), 401, 'unauthorized');
      eq((await ent(s1, s1.key)).status, 200, 'other keys still work');
    }),
  },
  {
    name: 'ISSUE 21 key cache: a key rotated by another process with no grace is refused at once; the new key works on this server',
    fn: () => withTwo(async (s1, s2) => {
      const made = (await request(s1.base, 'POST', '/org/api_keys', { key: s1.key, body: { name: 'rot' } })).json;
      await warm(s1, made.key);
      const rot = await request(s2.base, 'POST', `/org/api_keys/${made.id}/rotate`, { key: s1.key, body: { expire_in_days: 0 } });
      assert(rot.status === 200 || rot.status === 201, `rotate: ${rot.status} ${rot.text}`);
      isError(await ent(s1, made.key), 401, 'unauthorized');
      eq((await ent(s1, rot.json.key)).status, 200, 'the fresh key');
    }),
  },
  {
    name: 'ISSUE 21 key cache: a key deleted through this server is refused (401) on the very next request',
    fn: async () => {
      const s = await startServer();
      try {
        const made = (await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'gone' } })).json;
        await warm(s, made.key);
        eq((await request(s.base, 'DELETE', `/org/api_keys/${made.id}`, { key: s.key })).status, 204, 'deleted');
        isError(await ent(s, made.key), 401, 'unauthorized');
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
];
