// Issue 29, the HTTP front: a hostile client or tenant cannot lock the
// others out with idle connections, make the server buffer bodies it has not
// authorized, take more than its share of the bodies held in memory, or
// forge lines in the server's log. Each test is the attack, as a client
// would try it on the wire.
import { startServer, request, assert, eq, waitFor, newOrg, rawConn, memKiB } from './lib.mjs';

const MiB = 1024 * 1024;
const ADMIN = 'admin-token-for-hostile-tests';

async function withServer(fn, opts = {}) {
  const s = await startServer(opts);
  try {
    await fn(s);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

// The status line and the JSON body of a complete answer in c.got.
function answer(c) {
  const m = /^HTTP\/1\.1 (\d+)/.exec(c.got);
  const at = c.got.indexOf('\r\n\r\n');
  let json;
  try { json = JSON.parse(c.got.slice(at + 4)); } catch { json = undefined; }
  return { status: m ? Number(m[1]) : 0, head: c.got.slice(0, at), json };
}

const complete = (c) => /^HTTP\/1\.1 \d+[\s\S]*\r\n\r\n[\s\S]*\}/.test(c.got);

export const tests = [
  {
    name: 'issue 29.3: 1100 connections from one address, each with a partial request head, do not lock out a client at another address (per-address limit)',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const PER_IP = 32;
      const conns = [];
      try {
        for (let i = 0; i < 1100; i++) {
          const c = rawConn(s.port, { localAddress: '127.0.0.2' });
          c.sock.write('GET /org/entitlements HTTP/1.1\r\nHost: victim\r\n'); // never finished
          conns.push(c);
        }
        await waitFor(() => conns.every((c) => c.settled), 'the attacker\'s connects', 40000);
        const r = await Promise.race([
          request(s.base, 'GET', '/org/entitlements', { key: s.key }).catch((e) => ({ status: 0, text: String(e) })),
          new Promise((resolve) => setTimeout(() => resolve({ status: 0, text: 'no answer in 15 s' }), 15000)),
        ]);
        eq(r.status, 200, `another client while 1100 partial heads are open: ${r.text}`);
        await waitFor(() => conns.filter((c) => !c.ended).length <= PER_IP,
          `at most ${PER_IP} of the attacker's connections left open`, 30000);
      } finally {
        for (const c of conns) c.sock.destroy();
      }
    }, { env: { BROWSERD_CONNECTIONS_PER_IP: '32' } }),
  },
  {
    name: 'issue 29.3: a request head trickled one byte at a time, and a connection that sends nothing, are closed at the head deadline',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const slow = rawConn(s.port);
      const idle = rawConn(s.port);
      assert(await slow.connected && await idle.connected, 'connected');
      slow.sock.write('GET /org/entitlements HTTP/1.1\r\nHost: victim\r\nX-Slow: ');
      let sent = 0;
      const drip = setInterval(() => { if (!slow.ended) { slow.sock.write('a'); sent++; } }, 200);
      try {
        // The idle timeout (120 s) never fires on a connection that keeps
        // sending: only a deadline for the whole head cuts it.
        await waitFor(() => slow.ended && idle.ended, 'the server to close both connections', 40000);
        assert(sent > 0, 'bytes were trickled');
        eq(slow.got, '', 'no answer to a head that never ended');
        // A client that sends its head in time is served as before.
        const r = await request(s.base, 'GET', '/org/entitlements', { key: s.key });
        eq(r.status, 200, r.text);
      } finally {
        clearInterval(drip);
        slow.sock.destroy();
        idle.sock.destroy();
      }
    }, { env: { BROWSERD_HEAD_TIMEOUT_SECONDS: '2' } }),
  },
  {
    name: 'issue 29.4: 64 MiB Content-Length with an invalid key -> 401 before the body, nothing buffered even when the body is sent (VmHWM); unknown route -> 404 and over the cap -> 413, also before the body',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const before = memKiB(s.proc.pid);
      const conns = [];
      const send = (head) => { const c = rawConn(s.port); c.sock.write(head); conns.push(c); return c; };
      try {
        const bad = [];
        for (let i = 0; i < 4; i++) {
          bad.push(send(`PUT /browsers/victim${i}/fs/write_file?path=/tmp/x HTTP/1.1\r\nHost: x\r\n` +
            `Authorization: Bearer not-a-key-${i}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${64 * MiB}\r\n\r\n`));
        }
        const nope = send(`POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: ${64 * MiB}\r\n\r\n`);
        const big = send(`PUT /browsers/victim/fs/write_file?path=/tmp/x HTTP/1.1\r\nHost: x\r\n` +
          `Authorization: Bearer ${s.key}\r\nContent-Length: ${64 * MiB + 1}\r\n\r\n`);
        // Not a byte of any body is sent: the answers must come without them.
        await waitFor(() => conns.every(complete), 'answers to the heads alone', 15000);
        for (const c of bad) {
          const a = answer(c);
          eq([a.status, a.json && a.json.code], [401, 'unauthorized'], c.got.slice(0, 300));
        }
        eq(answer(nope).status, 404, nope.got.slice(0, 300));
        eq([answer(big).status, answer(big).json.code], [413, 'payload_too_large'], big.got.slice(0, 300));
        // Four more that send their 64 MiB bodies right behind the heads, as
        // fast as the server takes them: the server reads none of it into
        // memory, and the clients still read their 401 (not a reset).
        const chunk = Buffer.alloc(MiB, 0x61);
        const streamed = [];
        for (let i = 0; i < 4; i++) {
          streamed.push(send(`PUT /browsers/victim${i}/fs/write_file?path=/tmp/x HTTP/1.1\r\nHost: x\r\n` +
            `Authorization: Bearer not-a-key-${i}\r\nContent-Length: ${64 * MiB}\r\n\r\n`));
        }
        await Promise.all(streamed.map(async (c) => {
          for (let i = 0; i < 64 && !c.ended && !c.got; i++) {
            if (!c.sock.write(chunk)) await Promise.race([new Promise((r) => c.sock.once('drain', r)), c.closed]);
          }
        }));
        await waitFor(() => streamed.every((c) => complete(c) || c.ended), 'answers to the streamed uploads', 30000);
        for (const c of streamed) eq(answer(c).status, 401, `a client sending its body: ${c.got.slice(0, 200)}`);
        const after = memKiB(s.proc.pid);
        assert(after.hwm - before.hwm < 16 * 1024, `the server's peak memory grew by ${after.hwm - before.hwm} KiB`);
      } finally {
        for (const c of conns) c.sock.destroy();
      }
    }),
  },
  {
    name: 'issue 29.4: bodies in flight are capped per organization (429 + Retry-After) and server-wide (503 + Retry-After) before the body; the share comes back when an upload ends',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const B = await newOrg(s, ADMIN, { name: 'org-b' });
      const C = await newOrg(s, ADMIN, { name: 'org-c' });
      const conns = [];
      // An upload's head with Expect: 100-continue: "100 Continue" means
      // the server admitted it and waits for the body, which never comes.
      // A zip upload (fs/upload_zip) is buffered; write_file and fs/upload
      // stream their bodies and take none of the budget
      // (94_streamed_uploads, 95_stream_upload).
      const open = async (key) => {
        const c = rawConn(s.port);
        conns.push(c);
        c.sock.write(`POST /browsers/victim/fs/upload_zip HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Length: ${64 * MiB}\r\nExpect: 100-continue\r\n\r\n`);
        await waitFor(() => /^HTTP\/1\.1 100 /.test(c.got) || complete(c), 'an answer to the head');
        return c;
      };
      const held = (c, what) => assert(/^HTTP\/1\.1 100 /.test(c.got), `${what}: expected 100 Continue, got ${c.got.slice(0, 300)}`);
      const refused = (c, status, code, what) => {
        const a = answer(c);
        eq([a.status, a.json && a.json.code], [status, code], `${what}: ${c.got.slice(0, 400)}`);
        assert(/^retry-after: \d+/im.test(a.head), `${what}: Retry-After in ${a.head}`);
      };
      try {
        const a1 = await open(s.key);
        const a2 = await open(s.key);
        held(a1, 'the first org, first upload');
        held(a2, 'the first org, second upload');
        refused(await open(s.key), 429, 'rate_limited', 'the first org, third upload (past its 130 MiB share)');
        held(await open(B.key), 'a second org');
        refused(await open(C.key), 503, 'unavailable', 'a third org (past the 200 MiB budget)');
        a1.sock.destroy();
        a2.sock.destroy();
        await waitFor(async () => {
          const c = await open(C.key);
          c.sock.destroy();
          return /^HTTP\/1\.1 100 /.test(c.got);
        }, 'the third org admitted once the first org\'s uploads ended', 15000, 200);
      } finally {
        for (const c of conns) c.sock.destroy();
      }
    }, { args: ['--admin-token', ADMIN], env: { BROWSERD_BODY_BUDGET_MB: '200', BROWSERD_BODY_TENANT_MB: '130' } }),
  },
  {
    name: 'issue 29.14: %0a, %0d, an escape and spaces in a request path do not forge a line or a field of the access log',
    fn: () => withServer(async (s) => {
      const forged = '2026-01-01T00:00:00.000Z info access GET /forged 200 1us';
      const path = `/x%0a${forged.replaceAll(' ', '%20')}%0d%1b[2J%20500%201us`;
      const c = rawConn(s.port);
      c.sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      await c.closed;
      eq(answer(c).status, 404, c.got.slice(0, 200));
      const line = await waitFor(() => s.log.split('\n').find((l) => / access GET \/x/.test(l)), 'the access line');
      assert(!/^2026-01-01T00:00:00\.000Z/m.test(s.log), `a forged line in the log:\n${s.log}`);
      assert(!/\x1b|\r/.test(s.log), 'a control character in the log');
      const f = line.split(' ');
      eq([f.length, f[3], f[5]], [7, 'GET', '404'], `one field per item: ${line}`);
      assert(f[4].includes('\\x0a'), `the newline escaped: ${line}`);
    }),
  },
];
