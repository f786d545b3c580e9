// Issue 29.4: uploads stream into the session's files instead of memory
// (docs/fs.md, docs/sandbox.md "Tenant fairness: HTTP front"). A multipart
// fs/upload is parsed as it arrives (core/multipart's streamed parser): each
// file goes through a helper in the session's cgroups into a staged file of
// the session, renamed onto its dest_path once the whole form checked out.
// The server holds a small window of the body, never the file, and the
// body takes nothing of the budget of buffered request bodies.
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { startServer, request, assert, eq, isError, waitFor, memKiB } from '../blackbox/lib.mjs';

const MiB = 1024 * 1024;
const BOUNDARY = 'x-stream-upload-7f3a';

// A multipart body of fields [{name, filename?, data}] (data a Buffer or string).
function form(fields) {
  const parts = [];
  for (const f of fields) {
    const disp = `form-data; name="${f.name}"${f.filename ? `; filename="${f.filename}"` : ''}`;
    const type = f.filename ? 'Content-Type: application/octet-stream\r\n' : '';
    parts.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: ${disp}\r\n${type}\r\n`), Buffer.from(f.data), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(parts);
}

const upload = (s, id, body) => request(s.base, 'POST', `/browsers/${id}/fs/upload`,
  { key: s.key, raw: body, headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` } });

// sha256 of a file, computed by a process in the session.
async function sha256In(s, id, path) {
  const r = await request(s.base, 'POST', `/browsers/${id}/process/exec`, { key: s.key, body: { command: 'sha256sum', args: [path] } });
  eq(r.status, 200, `sha256sum ${path}: ${r.text}`);
  return Buffer.from(r.json.stdout_b64, 'base64').toString().split(' ')[0];
}

async function tmpNames(s, id) {
  const r = await request(s.base, 'GET', `/browsers/${id}/fs/list_files?path=${encodeURIComponent('/tmp')}`, { key: s.key });
  eq(r.status, 200, `list /tmp: ${r.text}`);
  return r.json.map((e) => e.name);
}

export const tests = [
  {
    name: 'issue 29.4: a 48 MiB multipart fs/upload streams into the session\'s files with a 16 MiB body budget: the files arrive whole, the server\'s peak memory grows by far less than the body; a form that fails after its file, or a client that leaves mid-file, leaves no staged file and no dest_path',
    timeout: 240000,
    fn: async () => {
      // The budget of buffered bodies is far below the upload: a server that
      // buffered it would refuse it (429/503) or hold it in memory.
      const s = await startServer({ env: { BROWSERD_BODY_BUDGET_MB: '16', BROWSERD_BODY_TENANT_MB: '8' } });
      try {
        assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
        const c = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
        eq(c.status, 200, `create: ${c.text}`);
        const id = c.json.session_id;
        const big = randomBytes(48 * MiB);
        const small = Buffer.from('small file, its dest_path after it');
        // files[1]'s dest_path comes after its file: the file is staged
        // before its destination is known.
        const body = form([
          { name: 'files[0][dest_path]', data: '/tmp/up/big.bin' },
          { name: 'files[0][file]', filename: 'big.bin', data: big },
          { name: 'files[1][file]', filename: 's.txt', data: small },
          { name: 'files[1][dest_path]', data: '/home/kernel/s.txt' },
        ]);
        const before = memKiB(s.proc.pid).hwm;
        const r = await upload(s, id, body);
        eq(r.status, 201, `the upload: ${r.text}`);
        const grew = memKiB(s.proc.pid).hwm - before;
        console.log(`  measured: a ${(body.length / MiB).toFixed(1)} MiB multipart upload grew the server's VmHWM by ${(grew / 1024).toFixed(1)} MiB`);
        assert(grew < 16 * 1024, `the server's peak memory grew by ${(grew / 1024).toFixed(1)} MiB for a 48 MiB upload`);
        eq(await sha256In(s, id, '/tmp/up/big.bin'), createHash('sha256').update(big).digest('hex'), 'the big file is the bytes sent');
        eq(await sha256In(s, id, '/home/kernel/s.txt'), createHash('sha256').update(small).digest('hex'), 'the small file is the bytes sent');
        eq((await tmpNames(s, id)).filter((n) => n.startsWith('.upload-')), [], 'no staged file is left');

        // A form that fails after its file was read: 400 naming the rule,
        // no dest_path written, no staged file left.
        const bad = await upload(s, id, form([
          { name: 'files[0][file]', filename: 'a', data: randomBytes(MiB) },
          { name: 'files[0][dest_path]', data: 'relative/a' },
        ]));
        isError(bad, 400, 'bad_request');
        assert(/dest_path must be an absolute path/.test(bad.json.message), bad.json.message);
        const missing = await upload(s, id, form([
          { name: 'files[0][file]', filename: 'a', data: randomBytes(MiB) },
          { name: 'files[0][dest_path]', data: '/tmp/a.bin' },
          { name: 'files[1][file]', filename: 'b', data: 'b' },
        ]));
        isError(missing, 400, 'bad_request');
        assert(/each item must include file and dest_path \(files\[1\]\)/.test(missing.json.message), missing.json.message);
        eq((await request(s.base, 'GET', `/browsers/${id}/fs/file_info?path=${encodeURIComponent('/tmp/a.bin')}`, { key: s.key })).status, 404, 'a failed form writes no dest_path');
        eq((await tmpNames(s, id)).filter((n) => n.startsWith('.upload-')), [], 'a failed form leaves no staged file');

        // A client that leaves mid-file: nothing staged is left.
        const head = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="files[0][dest_path]"\r\n\r\n/tmp/cut.bin\r\n` +
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="files[0][file]"; filename="c"\r\n\r\n`);
        const rq = http.request(`${s.base}/browsers/${id}/fs/upload`, {
          method: 'POST', agent: false,
          headers: { authorization: `Bearer ${s.key}`, 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': 32 * MiB },
        });
        rq.on('error', () => {});
        await new Promise((resolve) => rq.write(Buffer.concat([head, randomBytes(4 * MiB)]), resolve));
        await waitFor(async () => (await tmpNames(s, id)).some((n) => n.startsWith('.upload-')), 'the file being staged', 20000);
        rq.destroy();
        await waitFor(async () => !(await tmpNames(s, id)).some((n) => n.startsWith('.upload-')), 'the staged file removed once its client left', 20000);
        eq((await request(s.base, 'GET', `/browsers/${id}/fs/file_info?path=${encodeURIComponent('/tmp/cut.bin')}`, { key: s.key })).status, 404, 'a cut upload writes no dest_path');

        const d = await request(s.base, 'DELETE', `/browsers/${id}`, { key: s.key });
        assert(d.status === 200 || d.status === 204, `delete: ${d.status}`);
      } finally { await s.stop(); s.cleanup(); }
    },
  },
];
