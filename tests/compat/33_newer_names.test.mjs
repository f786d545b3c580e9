// Issue 33.3 (KERNEL_API_NEWER.md 1.1, SDK 0.98): every /browsers/{id_or_name}/...
// sub-resource accepts the session's name as well as its id. One headless
// session named "by-name" is driven through each area by its name: its record,
// fs, process (including a {process_id} path below the name), playwright,
// curl, replays, telemetry and computer; a session of another project is not
// found by name; PATCH and DELETE by name end it.
import { startServer, startSite, request, assert, eq, isError } from '../blackbox/lib.mjs';

const api = (s, method, path, body, headers) => request(s.base, method, path, { key: s.key, body, headers });
const b64 = (t) => Buffer.from(t).toString('base64');

export const tests = [
  {
    name: 'issue 33.3: every /browsers/{id_or_name}/ sub-resource accepts the session\'s name; another project\'s session is not found by name',
    timeout: 120000,
    fn: async () => {
      const site = await startSite((req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('site says hi'); });
      const s = await startServer({ args: site.allow });
      try {
        const made = await api(s, 'POST', '/browsers', { headless: true, name: 'by-name' });
        eq(made.status, 200, `create: ${made.text}`);
        const id = made.json.session_id;
        const at = (tail) => `/browsers/by-name${tail}`;
        const ok = (r, what) => { assert(r.status >= 200 && r.status < 300, `${what} by name: ${r.status} ${r.text}`); return r; };

        eq(ok(await api(s, 'GET', at('')), 'GET').json.session_id, id, 'the record by name');
        // fs: write, read back, stat.
        const w = await request(s.base, 'PUT', `${at('/fs/write_file')}?path=${encodeURIComponent('/tmp/n.txt')}`,
          { key: s.key, raw: 'named', headers: { 'content-type': 'application/octet-stream' } });
        ok(w, 'fs/write_file');
        eq(ok(await api(s, 'GET', `${at('/fs/read_file')}?path=${encodeURIComponent('/tmp/n.txt')}`), 'fs/read_file').text, 'named', 'read back');
        ok(await api(s, 'GET', `${at('/fs/file_info')}?path=${encodeURIComponent('/tmp/n.txt')}`), 'fs/file_info');
        // process: exec, and spawn then a {process_id} path below the name.
        const ex = ok(await api(s, 'POST', at('/process/exec'), { command: 'cat', args: ['/tmp/n.txt'] }), 'process/exec');
        eq([ex.json.exit_code, Buffer.from(ex.json.stdout_b64, 'base64').toString()], [0, 'named'], 'exec output');
        const sp = ok(await api(s, 'POST', at('/process/spawn'), { command: 'cat' }), 'process/spawn');
        const pid = sp.json.process_id;
        ok(await api(s, 'POST', at(`/process/${pid}/stdin`), { data_b64: b64('x') }), 'process/{id}/stdin');
        ok(await api(s, 'GET', at(`/process/${pid}/status`)), 'process/{id}/status');
        ok(await api(s, 'POST', at(`/process/${pid}/kill`), { signal: 'KILL' }), 'process/{id}/kill');
        // playwright, curl, replays, telemetry, computer.
        eq(ok(await api(s, 'POST', at('/playwright/execute'), { code: 'return 6 * 7' }), 'playwright/execute').json.result, 42, 'playwright result');
        const c = ok(await api(s, 'POST', at('/curl'), { url: `${site.url}/` }), 'curl');
        eq(c.json.body, 'site says hi', 'curl body');
        assert(Array.isArray(ok(await api(s, 'GET', at('/replays')), 'replays').json), 'replays list');
        ok(await api(s, 'GET', at('/telemetry/events')), 'telemetry/events');
        ok(await api(s, 'POST', at('/computer/screenshot'), {}), 'computer/screenshot');

        // Names are per project: another project does not see "by-name".
        const other = await api(s, 'POST', '/org/projects', { name: 'other' });
        eq(other.status, 200, other.text);
        isError(await api(s, 'GET', at('/fs/file_info?path=/tmp'), undefined, { 'X-Kernel-Project': 'other' }), 404, 'not_found');
        isError(await api(s, 'POST', at('/process/exec'), { command: 'id' }, { 'X-Kernel-Project': 'other' }), 404, 'not_found');

        eq(ok(await api(s, 'PATCH', at(''), { tags: { via: 'name' } }), 'PATCH').json.tags, { via: 'name' }, 'PATCH by name');
        const del = await api(s, 'DELETE', at(''));
        eq(del.status, 204, del.text);
        isError(await api(s, 'GET', at('/telemetry/events')), 404, 'not_found');
      } finally {
        await s.stop();
        s.cleanup();
        site.close();
      }
    },
  },
];
