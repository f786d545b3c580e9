// HTTP core: keep-alive, body limits, JSON parsing, routing, Error records,
// 501 for SDK endpoints not served yet, the access log, and the listening port.
import http from 'node:http';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, request, assert, eq, isError, BIN } from './lib.mjs';

const MiB = 1024 * 1024;

// Runs fn with a fresh server; always stops it and removes its data folder.
async function withServer(fn, opts = {}) {
  const s = await startServer(opts);
  try {
    await fn(s);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

// Stops the server and waits until its stderr is fully read, so srv.log is complete.
async function stopAndDrain(s) {
  const code = await s.stop();
  const err = s.proc.stderr;
  if (!err.readableEnded && !err.destroyed) {
    await new Promise((r) => { err.once('end', r); err.once('close', r); });
  }
  return code;
}

// Sends raw bytes over one TCP connection and resolves with everything the
// server sent back once it closes the connection (or after `until` matches).
function rawExchange(port, data, until) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    sock.on('data', (d) => {
      got += d;
      if (until && until.test(got)) { sock.destroy(); resolve(got); }
    });
    sock.on('error', (e) => (got ? resolve(got) : reject(e)));
    sock.on('close', () => resolve(got));
    sock.write(data);
  });
}

function checkError(r, status, code) {
  isError(r, status, code);
}

export const tests = [
  {
    name: 'keep-alive: two requests (GET, then POST with a body, then GET) share one socket and the connection stays open',
    fn: () => withServer(async (s) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const a = await request(s.base, 'GET', '/org/entitlements', { key: s.key, agent });
        eq(a.status, 200, a.text);
        assert(a.headers.connection !== 'close', `connection header after first request: ${a.headers.connection}`);
        const b = await request(s.base, 'POST', '/org/projects', { key: s.key, agent, body: { name: 'ka' } });
        assert(b.status >= 200 && b.status < 300, b.text);
        assert(b.socket === a.socket, 'the second request did not reuse the first socket');
        assert(b.headers.connection !== 'close', `connection header after POST: ${b.headers.connection}`);
        const c = await request(s.base, 'GET', '/org/projects/ka', { key: s.key, agent });
        eq(c.status, 200, c.text);
        assert(c.socket === a.socket, 'the third request did not reuse the first socket');
        // Error answers (400 with a body read, 401, 404) keep the connection too.
        const d = await request(s.base, 'POST', '/org/projects', { key: s.key, agent, body: { bad: 1 } });
        const e = await request(s.base, 'POST', '/org/projects', { key: 'wrong', agent, body: { name: 'x' } });
        const f = await request(s.base, 'GET', '/nope', { agent });
        eq([d.status, e.status, f.status], [400, 401, 404], 'error statuses');
        assert([d, e, f].every((r) => r.socket === a.socket && r.headers.connection !== 'close'), 'an error answer closed the connection');
      } finally {
        agent.destroy();
      }
    }),
  },
  {
    name: 'body limit: Content-Length over 6 MiB (6 MiB + 1, 10 GB) -> 413 JSON Error before the body is read',
    fn: () => withServer(async (s) => {
      for (const len of [String(6 * MiB + 1), '10000000000', '999999999999']) {
        const head = `POST /org/projects HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${s.key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${len}\r\n\r\n`;
        // No body is sent: the answer must come without it.
        const got = await rawExchange(s.port, head, /\r\n\r\n[\s\S]*\}/);
        const m = /^HTTP\/1\.1 (\d+)/.exec(got);
        assert(m, `Content-Length ${len}: no status line in ${got.slice(0, 200)}`);
        eq(Number(m[1]), 413, `Content-Length ${len}: ${got.slice(0, 300)}`);
        assert(/content-type: application\/json/i.test(got), got);
        const body = JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4));
        eq(body.code, 'payload_too_large');
        assert(typeof body.message === 'string');
      }
    }),
  },
  {
    name: 'body limit: a chunked body over 6 MiB (no Content-Length) -> 413 JSON Error',
    fn: () => withServer(async (s) => {
      const r = await new Promise((resolve, reject) => {
        const rq = http.request(new URL('/org/projects', s.base), {
          method: 'POST', agent: false,
          headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
        }, (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            let json; try { json = JSON.parse(text); } catch { json = undefined; }
            resolve({ status: res.statusCode, headers: res.headers, text, json });
          });
        });
        rq.on('error', reject);
        const chunk = Buffer.alloc(MiB, 0x20);
        for (let i = 0; i < 7; i++) rq.write(chunk);
        rq.end();
      });
      checkError(r, 413, 'payload_too_large');
    }),
  },
  {
    name: 'body limit: a body of exactly 6 MiB is read and validated (400 for the name, not 413)',
    fn: () => withServer(async (s) => {
      const prefix = '{"name":"';
      const suffix = '"}';
      const raw = prefix + 'x'.repeat(6 * MiB - prefix.length - suffix.length) + suffix;
      eq(Buffer.byteLength(raw), 6 * MiB, 'test body size');
      const r = await request(s.base, 'POST', '/org/projects', { key: s.key, raw, headers: { 'content-type': 'application/json' } });
      checkError(r, 400, 'bad_request');
    }),
  },
  {
    name: 'JSON bodies: malformed, duplicate keys, array, string, number and an empty body -> 400 bad_request',
    fn: () => withServer(async (s) => {
      const bodies = ['{"name":', '{"name":"a","name":"b"}', '[{"name":"a"}]', '"a"', '42', 'null', '', '{"name":"a"} x'];
      for (const raw of bodies) {
        const r = await request(s.base, 'POST', '/org/projects', { key: s.key, raw, headers: { 'content-type': 'application/json' } });
        try { checkError(r, 400, 'bad_request'); } catch (e) { throw new Error(`body ${JSON.stringify(raw)}: ${e.message}`); }
      }
      // None of them created a project.
      const list = await request(s.base, 'GET', '/org/projects', { key: s.key });
      eq(list.json.map((p) => p.name), ['default'], 'projects after rejected bodies');
    }),
  },
  {
    name: 'JSON bodies: a number out of range (a 20-digit integer, 1e400) -> 400 naming the field, not "malformed JSON"',
    fn: () => withServer(async (s) => {
      const cases = [
        ['{"timeout_seconds": 123456789012345678901}', 'timeout_seconds'],
        ['{"viewport": {"width": 1e400, "height": 600}}', 'viewport.width'],
        ['{"network": {"private_hosts": ["a.example", 1e999]}}', 'network.private_hosts[1]'],
      ];
      for (const [raw, field] of cases) {
        const r = await request(s.base, 'POST', '/browsers', { key: s.key, raw, headers: { 'content-type': 'application/json' } });
        checkError(r, 400, 'bad_request');
        assert(r.json.message.startsWith(`${field}:`) && !/malformed/.test(r.json.message), `${raw}: ${r.json.message}`);
        assert(r.json.details.some((d) => d.message.startsWith(`${field}:`)), `details name ${field}: ${r.text}`);
      }
      const p = await request(s.base, 'POST', '/org/projects', { key: s.key, raw: '{"name": "p", "n": -99999999999999999999}', headers: { 'content-type': 'application/json' } });
      checkError(p, 400, 'bad_request');
      assert(p.json.message.startsWith('n:'), p.text);
    }),
  },
  {
    name: 'JSON bodies: an unknown body field -> 400 naming the field (message and details)',
    fn: () => withServer(async (s) => {
      const r = await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'p', colour: 'red' } });
      checkError(r, 400, 'bad_request');
      assert(r.json.message.includes('colour'), `message does not name the field: ${r.json.message}`);
      assert(Array.isArray(r.json.details) && r.json.details.some((d) => d.message.includes('colour') && typeof d.code === 'string'),
        `details do not name the field: ${r.text}`);
      const k = await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'k', scope: 'all' } });
      checkError(k, 400, 'bad_request');
      assert(k.json.message.includes('scope'), k.text);
    }),
  },
  {
    name: 'routing: unknown route -> 404 not_found JSON (with and without a key)',
    fn: () => withServer(async (s) => {
      for (const path of ['/nope', '/org/nope', '/org/projects/a/b/c', '/']) {
        checkError(await request(s.base, 'GET', path, { key: s.key }), 404, 'not_found');
        checkError(await request(s.base, 'GET', path), 404, 'not_found');
      }
    }),
  },
  {
    name: 'routing: wrong method on a known path -> 405 JSON Error',
    fn: () => withServer(async (s) => {
      checkError(await request(s.base, 'PUT', '/org/projects', { key: s.key, body: {} }), 405);
      checkError(await request(s.base, 'DELETE', '/org/entitlements', { key: s.key }), 405);
      checkError(await request(s.base, 'POST', '/org/entitlements', { key: s.key, body: {} }), 405);
      checkError(await request(s.base, 'PUT', '/org/api_keys/abc', { key: s.key, body: {} }), 405);
    }),
  },
  {
    name: 'Errors rule 1: every non-2xx answer is application/json with {code, message} (401, 404, 405, 400, 409, 501)',
    fn: () => withServer(async (s) => {
      const cases = [
        [await request(s.base, 'GET', '/org/entitlements'), 401],
        [await request(s.base, 'GET', '/org/projects/missing', { key: s.key }), 404],
        [await request(s.base, 'PATCH', '/org/entitlements', { key: s.key, body: {} }), 405],
        [await request(s.base, 'POST', '/org/projects', { key: s.key, body: {} }), 400],
        [await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'default' } }), 409],
        [await request(s.base, 'GET', '/vault-provider-configs', { key: s.key }), 501],
      ];
      for (const [r, st] of cases) checkError(r, st);
    }),
  },
  {
    name: 'KERNEL_API wire: every JSON success answer carries Content-Type: application/json; DELETE answers 204 with no body',
    fn: () => withServer(async (s) => {
      const made = await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'ct' } });
      const key = await request(s.base, 'POST', '/org/api_keys', { key: s.key, body: { name: 'ct' } });
      const answers = [
        made, key,
        await request(s.base, 'GET', '/org/entitlements', { key: s.key }),
        await request(s.base, 'GET', '/org/projects', { key: s.key }),
        await request(s.base, 'GET', '/org/projects/ct', { key: s.key }),
        await request(s.base, 'PATCH', '/org/projects/ct', { key: s.key, body: { name: 'ct2' } }),
        await request(s.base, 'GET', '/org/api_keys', { key: s.key }),
        await request(s.base, 'GET', `/org/api_keys/${key.json.id}`, { key: s.key }),
      ];
      for (const r of answers) {
        assert(r.status >= 200 && r.status < 300, r.text);
        assert(/^application\/json/.test(r.headers['content-type'] || ''), `content-type ${r.headers['content-type']} for ${r.text.slice(0, 80)}`);
        assert(r.json !== undefined, `not JSON: ${r.text.slice(0, 80)}`);
      }
      const del = await request(s.base, 'DELETE', '/org/projects/ct2', { key: s.key });
      eq([del.status, del.text], [204, ''], 'DELETE project');
      const delk = await request(s.base, 'DELETE', `/org/api_keys/${key.json.id}`, { key: s.key });
      eq([delk.status, delk.text], [204, ''], 'DELETE key');
    }),
  },
  {
    name: 'KERNEL_API retries: a 409 name conflict carries x-should-retry: false',
    fn: () => withServer(async (s) => {
      const a = await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'dup' } });
      assert(a.status >= 200 && a.status < 300, a.text);
      const b = await request(s.base, 'POST', '/org/projects', { key: s.key, body: { name: 'dup' } });
      checkError(b, 409);
      eq(b.headers['x-should-retry'], 'false', 'x-should-retry');
    }),
  },
  {
    name: 'SDK endpoints not served yet -> 501 Error naming the feature after auth (401 without a key)',
    fn: () => withServer(async (s) => {
      const cases = [
        ['GET', '/browsers/abc/fs/list', 'browser filesystem'],
        ['GET', '/vault-provider-configs', 'vault provider configs'],
        ['GET', '/audit-logs/export/destinations', 'audit logs'],
      ];
      for (const [method, path, feature] of cases) {
        const body = method === 'GET' ? undefined : {};
        const r = await request(s.base, method, path, { key: s.key, body });
        try {
          checkError(r, 501);
          assert(r.json.message.includes(feature), `message does not name ${feature}: ${r.json.message}`);
          // The SDK retries >= 500 unless told not to; a retry cannot help here.
          eq(r.headers['x-should-retry'], 'false', 'x-should-retry on 501');
          checkError(await request(s.base, method, path, { body }), 401, 'unauthorized');
        } catch (e) { throw new Error(`${method} ${path}: ${e.message}`); }
      }
    }),
  },
  {
    name: 'access log: exactly one line per request on stderr with method, path, status and microseconds',
    fn: async () => {
      const s = await startServer();
      try {
        const tag = `t${process.pid}x${Date.now()}`;
        const sent = [];
        for (let i = 0; i < 4; i++) {
          const path = `/nope-${tag}-${i}`;
          await request(s.base, 'GET', path);
          sent.push(['GET', path, 404]);
        }
        await request(s.base, 'GET', `/org/projects?marker=${tag}`, { key: s.key });
        await request(s.base, 'POST', `/org/projects?marker=${tag}`, { key: s.key, body: { name: tag } });
        await request(s.base, 'DELETE', `/org/projects/${tag}`);
        eq(await stopAndDrain(s), 0, 'exit code');
        const lines = s.log.split('\n');
        for (const [method, path, status] of sent) {
          const hits = lines.filter((l) => l.includes(` ${path} `));
          eq(hits.length, 1, `log lines for ${path}`);
          assert(new RegExp(`access ${method} ${path} ${status} \\d+us`).test(hits[0]), `access line: ${hits[0]}`);
        }
        // The server is fresh: its only requests are these seven (the log
        // shows the path without the query string).
        const all = lines.filter((l) => / access /.test(l));
        eq(all.length, 7, `access lines:\n${all.join('\n')}`);
        assert(all.some((l) => /access GET \/org\/projects\S* 200 \d+us/.test(l)), all.join('\n'));
        assert(all.some((l) => /access POST \/org\/projects\S* 20\d \d+us/.test(l)), all.join('\n'));
        assert(all.some((l) => new RegExp(`access DELETE /org/projects/${tag} 401 \\d+us`).test(l)), all.join('\n'));
      } finally {
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'OPERATOR serve --listen: a second server on a port already in use fails to start instead of sharing it',
    fn: () => withServer(async (s) => {
      const dir = mkdtempSync(join(tmpdir(), 'browserd-bb-'));
      try {
        const proc = spawn(BIN, ['serve', '--listen', `127.0.0.1:${s.port}`, '--data', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
        let log = '';
        const exited = new Promise((r) => proc.on('exit', (c, sig) => r(c ?? sig)));
        // Either it exits, or it claims to listen (the bug): then end it by PID.
        const code = await new Promise((resolve) => {
          exited.then(resolve);
          proc.stderr.on('data', (d) => {
            log += d;
            if (/listening on/.test(log)) { process.kill(proc.pid, 'SIGKILL'); exited.then(() => resolve('listening')); }
          });
        });
        assert(code !== 0 && code !== 'listening', `second server on the same port: ${code}; log:\n${log}`);
        assert(!/listening on/.test(log), `second server claims to listen:\n${log}`);
        // The first server still answers.
        eq((await request(s.base, 'GET', '/org/entitlements', { key: s.key })).status, 200);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }),
  },
];
