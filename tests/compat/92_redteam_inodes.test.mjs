// Red team pass 45b (docs/sandbox.md "Tenant fairness: red team pass 45b"):
// inodes. A session's files are one tmpfs whose inodes are bounded with its
// size (nr_inodes: one per 4 KiB plus 1024, 263168 for the 1 GiB quota), but
// the kernel charges each new inode and its dentry to the memory cgroup of the
// task that creates it. create_directory (a folder and its parents, up to
// about 2000 per call) ran on the server's own thread, so a tenant's folders
// were the server's memory: 40000 folders grew the session's cgroup by 1 MiB
// and the server by the rest. They are now made by a helper in the session's
// cgroups (runtime/sesshelp, like write_file).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, request, assert, eq, sessionCgroupDirs } from '../blackbox/lib.mjs';

const MiB = 1024 * 1024;
const CALLS = 20;                  // create_directory calls
const DEPTH = 1990;                // folders per call: /tmp/dI/a/a/... (under PATH_MAX)
const CHARGED = 16 * MiB;          // at least this much of them in the session (about 35 MiB measured)

// Bytes the session's memory cgroup holds now (v1 memory.usage_in_bytes, v2 memory.current).
function sessionMemory(id) {
  for (const d of sessionCgroupDirs(id)) {
    for (const f of ['memory.usage_in_bytes', 'memory.current']) {
      try { return Number(readFileSync(join(d, f), 'utf8')); } catch { /* not this one */ }
    }
  }
  throw new Error(`no memory cgroup for session ${id}`);
}

export const tests = [
  {
    name: 'red team 45b: folders made through create_directory are charged to the session\'s memory cgroup, not the server\'s (40000 folders grow the session by more than 16 MiB)',
    timeout: 180000,
    fn: async () => {
      const s = await startServer({});
      try {
        const r = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
        eq(r.status, 200, `create: ${r.text}`);
        const id = r.json.session_id;
        const before = sessionMemory(id);
        const deep = '/a'.repeat(DEPTH);
        for (let i = 0; i < CALLS; i++) {
          const m = await request(s.base, 'PUT', `/browsers/${id}/fs/create_directory`,
            { key: s.key, body: { path: `/tmp/d${i}${deep}` } });
          eq(m.status, 201, `create_directory ${i}: ${m.text}`);
        }
        const grown = sessionMemory(id) - before;
        assert(grown > CHARGED, `the session's cgroup grew by ${(grown / MiB).toFixed(1)} MiB for ${CALLS * DEPTH} folders`);
        // The folders are there.
        const st = await request(s.base, 'GET', `/browsers/${id}/fs/file_info?path=${encodeURIComponent(`/tmp/d0${deep}`)}`, { key: s.key });
        eq(st.status, 200, `file_info: ${st.text}`);
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
];
