// Issue 29.4: uploads stream into the session's files instead of memory
// (docs/http.md, "Streamed bodies"; docs/fs.md). fs write_file's body goes
// into the session's file as it arrives: the server holds a small window of
// it, never the whole file.
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { startServer, request, assert, eq, waitFor, memKiB, isError } from '../blackbox/lib.mjs';

const q = encodeURIComponent;
const MiB = 1024 * 1024;

// The body of a GET, as bytes.
function getBytes(s, path) {
  return new Promise((resolve, reject) => {
    http.get(`${s.base}${path}`, { headers: { authorization: `Bearer ${s.key}` }, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

// A write_file that sends `sent` bytes of a declared `declared` and stalls:
// resolves once they are written, with a function that leaves.
function stalled(s, id, path, declared, sent) {
  return new Promise((resolve) => {
    const rq = http.request(`${s.base}/browsers/${id}/fs/write_file?path=${q(path)}`, {
      method: 'PUT', agent: false,
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/octet-stream', 'content-length': declared },
    });
    rq.on('error', () => {});
    rq.write(randomBytes(sent), () => resolve(() => rq.destroy()));
  });
}

export const tests = [
  {
    name: 'issue 29.4: a 60 MiB write_file streams into the session\'s file: the server\'s peak memory grows by far less than the file, the file arrives intact; uploads stalled mid-body hold no thread and, once their clients leave, leave no file; a chunked body past the cap is a 413',
    timeout: 180000,
    fn: async () => {
      // Two blocking threads: fewer than the stalled uploads below.
      const s = await startServer({ env: { BROWSERD_BLOCKING_THREADS: '2' } });
      try {
        assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
        const c = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
        eq(c.status, 200, `create: ${c.text}`);
        const id = c.json.session_id;
        const data = randomBytes(60 * MiB);
        const before = memKiB(s.proc.pid).hwm;
        const w = await request(s.base, 'PUT', `/browsers/${id}/fs/write_file?path=${q('/tmp/big.bin')}`,
          { key: s.key, raw: data, headers: { 'content-type': 'application/octet-stream' } });
        eq(w.status, 201, `write_file: ${w.text}`);
        const grew = memKiB(s.proc.pid).hwm - before;
        console.log(`  measured: a 60 MiB write_file grew the server's VmHWM by ${(grew / 1024).toFixed(1)} MiB`);
        assert(grew < 16 * 1024, `the server's peak memory grew by ${(grew / 1024).toFixed(1)} MiB for a 60 MiB upload`);
        const back = await getBytes(s, `/browsers/${id}/fs/read_file?path=${q('/tmp/big.bin')}`);
        eq(back.status, 200, 'read_file');
        eq(createHash('sha256').update(back.body).digest('hex'), createHash('sha256').update(data).digest('hex'), 'the file is the bytes sent');

        // Three clients stall mid-body (a slow upload holds no thread: a
        // whole write_file is answered meanwhile), then leave: no file is left.
        const leave = [];
        for (let i = 0; i < 3; i++) leave.push(await stalled(s, id, `/tmp/cut${i}.bin`, 32 * MiB, 4 * MiB));
        const during = await request(s.base, 'PUT', `/browsers/${id}/fs/write_file?path=${q('/tmp/during.txt')}`,
          { key: s.key, raw: 'during', headers: { 'content-type': 'application/octet-stream' } });
        eq(during.status, 201, `a write_file while three uploads stall: ${during.text}`);
        for (const l of leave) l();
        for (let i = 0; i < 3; i++) {
          await waitFor(async () => (await request(s.base, 'GET', `/browsers/${id}/fs/file_info?path=${q(`/tmp/cut${i}.bin`)}`, { key: s.key })).status === 404,
            `the cut write ${i} left no file`, 20000);
        }

        // A body of unknown length past the 64 MiB cap: 413, nothing kept.
        const over = await new Promise((resolve, reject) => {
          const rq = http.request(`${s.base}/browsers/${id}/fs/write_file?path=${q('/tmp/over.bin')}`, {
            method: 'PUT', agent: false, headers: { authorization: `Bearer ${s.key}`, 'transfer-encoding': 'chunked' },
          }, (res) => {
            let text = '';
            res.on('data', (d) => { text += d; });
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text, json: JSON.parse(text) }));
          });
          rq.on('error', reject);
          const chunk = randomBytes(MiB);
          let n = 0;
          const more = () => { while (n < 66) { n++; if (!rq.write(chunk)) return rq.once('drain', more); } rq.end(); };
          more();
        });
        isError(over, 413, 'payload_too_large');
        eq((await request(s.base, 'GET', `/browsers/${id}/fs/file_info?path=${q('/tmp/over.bin')}`, { key: s.key })).status, 404, 'nothing kept of the body past the cap');

        // The session still answers.
        const again = await request(s.base, 'PUT', `/browsers/${id}/fs/write_file?path=${q('/tmp/small.txt')}`,
          { key: s.key, raw: 'hello', headers: { 'content-type': 'application/octet-stream' } });
        eq(again.status, 201, `a small write_file after: ${again.text}`);
        eq((await getBytes(s, `/browsers/${id}/fs/read_file?path=${q('/tmp/small.txt')}`)).body.toString(), 'hello', 'the small file');
        const d = await request(s.base, 'DELETE', `/browsers/${id}`, { key: s.key });
        assert(d.status === 200 || d.status === 204, `delete: ${d.status}`);
      } finally { await s.stop(); s.cleanup(); }
    },
  },
];
