// Issue 39 item 4: the egress splices a CONNECT tunnel's two sockets in the kernel (a sockmap
// with an sk_skb verdict program, docs/egress-proxy.md "In the kernel") when the operator turns
// it on (BROWSERD_EGRESS_SOCKMAP=on, docs/operator.md), and relays in user space when it is
// off. Both paths must carry the same bytes the same way.
//
// The traffic is a real session's: a Node script run inside the session's sandbox
// (process.exec) opens CONNECT tunnels through the session's own egress listener (the port
// of its browser's --proxy-server) to two servers of this test on the host's 127.0.0.1 (listed
// in --allow-loopback):
//   - the sink reads slowly until the client's half-close, then answers "<bytes> <sha256>"
//     and ends: the upload arrives whole before the FIN, and the answer still comes back
//     after the client stopped sending;
//   - the source is asked for N random bytes, sends them and ends; the script reads them
//     slowly (a slow reader: the kernel must hold back, never drop).
// The session's egress byte counts (logged when it ends) must be exactly the payload.
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { startServer, request, assert, eq, sessionPids } from '../blackbox/lib.mjs';

const ADMIN = 'admin-token-sockmap-tests';
const UP = 48 << 20;   // bytes the script uploads
const DOWN = 48 << 20; // bytes the script downloads
const api = (s, method, path, body) => request(s.base, method, path, { key: s.key, body });
const sha = (b) => createHash('sha256').update(b).digest('hex');

// Reads a socket slowly: after every `every` bytes it stops reading for `ms` (the kernel's and
// the peer's buffers fill up meanwhile).
function slowly(sock, every, ms, onData) {
  let since = 0;
  sock.on('data', (d) => {
    onData(d);
    since += d.length;
    if (since >= every) { since = 0; sock.pause(); setTimeout(() => sock.resume(), ms); }
  });
}

async function servers() {
  const got = [];   // the sink's uploads: {bytes, sha}
  const sent = [];  // the source's downloads: {bytes, sha}
  const sink = net.createServer((c) => {
    const h = createHash('sha256');
    let n = 0;
    slowly(c, 4 << 20, 40, (d) => { h.update(d); n += d.length; });
    c.on('end', () => { const r = { bytes: n, sha: h.digest('hex') }; got.push(r); c.end(`${r.bytes} ${r.sha}\n`); });
    c.on('error', () => {});
  });
  const source = net.createServer((c) => {
    let line = '';
    c.on('data', (d) => {
      line += d.toString('latin1');
      if (!line.includes('\n')) return;
      const data = randomBytes(Number(line.trim()));
      sent.push({ bytes: data.length, sha: sha(data) });
      c.end(data);
    });
    c.on('error', () => {});
  });
  await new Promise((r) => sink.listen(0, '127.0.0.1', r));
  await new Promise((r) => source.listen(0, '127.0.0.1', r));
  return {
    got, sent, sinkPort: sink.address().port, sourcePort: source.address().port,
    close: () => { sink.close(); source.close(); },
  };
}

// Runs inside the sandbox (node -e): both tunnels at once, then prints what it saw as JSON.
const SCRIPT = String.raw`
const net = require('node:net'), crypto = require('node:crypto');
const [eport, sinkPort, sourcePort, up, down] = process.argv.slice(1).map(Number);
function tunnel(port) {
  return new Promise((resolve, reject) => {
    const c = net.connect(eport, '127.0.0.1');
    let head = Buffer.alloc(0);
    c.on('error', reject);
    c.once('connect', () => c.write('CONNECT 127.0.0.1:' + port + ' HTTP/1.1\r\nHost: 127.0.0.1:' + port + '\r\n\r\n'));
    const onHead = (d) => {
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      c.removeListener('data', onHead);
      const status = head.slice(0, end).toString('latin1').split(' ')[1];
      if (status !== '200') return reject(new Error('CONNECT answered ' + status));
      resolve([c, head.slice(end + 4)]);
    };
    c.on('data', onHead);
  });
}
async function upload() {
  const [c, rest] = await tunnel(sinkPort);
  const h = crypto.createHash('sha256');
  let answer = rest.toString('latin1'), left = up;
  c.on('data', (d) => { answer += d.toString('latin1'); });
  const ended = new Promise((r) => c.on('end', r));
  while (left > 0) {
    const chunk = crypto.randomBytes(Math.min(left, 1 << 20));
    h.update(chunk); left -= chunk.length;
    if (!c.write(chunk)) await new Promise((r) => c.once('drain', r));
  }
  c.end(); // half-close: the sink answers only after this
  await ended;
  return { sha: h.digest('hex'), answer: answer.trim() };
}
async function download() {
  const [c, rest] = await tunnel(sourcePort);
  const h = crypto.createHash('sha256');
  let n = rest.length, since = 0;
  h.update(rest);
  c.write(down + '\n');
  await new Promise((resolve) => {
    c.on('data', (d) => {
      h.update(d); n += d.length; since += d.length;
      if (since >= (4 << 20)) { since = 0; c.pause(); setTimeout(() => c.resume(), 40); }
    });
    c.on('end', resolve);
  });
  c.end();
  return { bytes: n, sha: h.digest('hex') };
}
Promise.all([upload(), download()]).then(([u, d]) => console.log(JSON.stringify({ u, d })),
  (e) => { console.log(JSON.stringify({ error: String(e) })); process.exit(1); });
`;

// The port of the session's egress listener, from its browser's command line.
function egressPort(s, id) {
  for (const pid of sessionPids(s.dir, id)) {
    let cmd = '';
    try { cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8'); } catch { continue; }
    const m = /--proxy-server=http:\/\/127\.0\.0\.1:(\d+)/.exec(cmd);
    if (m) return Number(m[1]);
  }
  throw new Error(`no browser of session ${id} names its egress port`);
}

async function metric(s, name) {
  const r = await request(s.base, 'GET', '/metrics', { headers: { authorization: `Bearer ${ADMIN}` } });
  eq(r.status, 200, r.text);
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(r.text);
  return m ? Number(m[1]) : null;
}

// One server (env: the operator's setting), one session, the script's two tunnels; checks
// the bytes end to end, the half-closes and the session's counts. Returns the metrics.
async function run(env, inKernel) {
  const t = await servers();
  const allow = `127.0.0.1:${t.sinkPort},127.0.0.1:${t.sourcePort}`;
  const s = await startServer({ env, args: ['--allow-loopback', allow, '--admin-token', ADMIN] });
  try {
    eq(await metric(s, 'browserd_egress_in_kernel'), inKernel ? 1 : 0, 'the path in use is on /metrics');
    const c = await api(s, 'POST', '/browsers', { headless: true });
    eq(c.status, 200, c.text);
    const id = c.json.session_id;
    const port = egressPort(s, id);
    const r = await api(s, 'POST', `/browsers/${id}/process/exec`, {
      command: 'node', args: ['-e', SCRIPT, String(port), String(t.sinkPort), String(t.sourcePort), String(UP), String(DOWN)],
      timeout_sec: 120,
    });
    eq(r.status, 200, r.text);
    const out = Buffer.from(r.json.stdout_b64 || '', 'base64').toString();
    const err = Buffer.from(r.json.stderr_b64 || '', 'base64').toString();
    eq(r.json.exit_code, 0, `the script: ${out} ${err}`);
    const { u, d } = JSON.parse(out);
    // upload: the sink read exactly what the script sent, then saw the FIN; its answer came back.
    eq(t.got.length, 1, 'one upload reached the sink');
    eq(t.got[0], { bytes: UP, sha: u.sha }, 'the upload arrived whole and in order (sha256)');
    eq(u.answer, `${UP} ${u.sha}`, 'the answer sent after the half-close came back');
    // download through a slow reader: every byte, in order, then the end.
    eq(t.sent.length, 1, 'one download');
    eq(d, t.sent[0], 'the slowly read download arrived whole and in order (sha256)');
    const kernelTunnels = await metric(s, 'browserd_egress_kernel_tunnels_total');
    if (inKernel) assert(kernelTunnels >= 2, `both tunnels were spliced in the kernel: ${kernelTunnels}`);
    else eq(kernelTunnels, 0, 'no tunnel in the kernel when it is off');
    // The session's counts: the payload each way, exactly (not the 200 answers).
    eq((await api(s, 'DELETE', `/browsers/${id}`)).status, 204);
    let m = null;
    for (let i = 0; i < 100 && !m; i++) {
      m = new RegExp(`session ${id}: egress sent (\\d+) bytes, received (\\d+) bytes`).exec(s.log);
      if (!m) await new Promise((res) => setTimeout(res, 100));
    }
    assert(m, 'the ended session logs its egress byte counts');
    const answer = `${UP} ${u.sha}\n`.length;
    eq([Number(m[1]), Number(m[2])], [UP + `${DOWN}\n`.length, answer + DOWN], `the session's counts are exact: ${m[0]}`);
  } finally {
    await s.stop();
    s.cleanup();
    t.close();
  }
}

export const tests = [
  {
    name: 'issue 39.4: a session\'s CONNECT tunnels spliced in the kernel carry bulk bytes intact (sha256) both ways, through a slow reader, across half-closes, with exact byte counts',
    timeout: 150000,
    fn: () => run({ BROWSERD_EGRESS_SOCKMAP: 'on' }, true),
  },
  {
    name: 'issue 39.4: with BROWSERD_EGRESS_SOCKMAP=off the user-space relay passes the same checks, and /metrics says so',
    timeout: 150000,
    fn: () => run({ BROWSERD_EGRESS_SOCKMAP: 'off' }, false),
  },
];
