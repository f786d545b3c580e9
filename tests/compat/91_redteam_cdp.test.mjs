// Red team pass 45 (docs/sandbox.md "Tenant fairness: red team pass 45"): what
// a tenant reaches through its session's CDP WebSocket. The relay reassembles
// each client message before it forwards it (up to LIM_WS_MESSAGE_BYTES,
// 64 MiB): a tenant that opened connections and sent most of a large message
// on each, never its last byte, made the server hold all of it (60 MiB per
// connection, 256 connections per client address). The same held for the
// other way: a client that asks for a large answer and never reads it left
// the whole answer queued in the server. Both are now charged per session,
// per organization and on the server (LIM_RELAY_MSG_*).
import net from 'node:net';
import crypto from 'node:crypto';
import WebSocket from 'ws';
import { startServer, request, assert, eq, waitFor, newOrg, memKiB } from '../blackbox/lib.mjs';

const ADMIN = 'redteam-91-admin';
const MiB = 1024 * 1024;
// src/core/limits.h
const SESSION_SHARE = 128 * MiB, ORG_SHARE = 160 * MiB;
const ANNOUNCED = 60 * MiB; // each held message's length, as its frame announces it
const SENT = 24 * MiB;      // what the client sends of it (the server charges the announced length);
                            // more than the sockets' buffers take, so that a refused one cannot drain it

async function create(s, key) {
  const r = await request(s.base, 'POST', '/browsers', { key, body: { headless: true } });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// Opens a raw WebSocket to the session's cdp_ws_url and sends the head of one
// text message announcing ANNOUNCED bytes, then SENT bytes of it, never the
// rest. Resolves {sock, refused}: refused when the server closed it with 1009.
async function holdPartialMessage(s, cdpUrl, { payload = true } = {}) {
  const u = new URL(cdpUrl);
  const sock = net.connect({ port: s.port, host: '127.0.0.1' });
  await new Promise((res, rej) => { sock.once('connect', res); sock.once('error', rej); });
  const c = { sock, buf: Buffer.alloc(0), ended: false };
  sock.on('error', () => {});
  sock.on('close', () => { c.ended = true; });
  sock.on('data', (d) => { c.buf = Buffer.concat([c.buf, d]); });
  sock.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${crypto.randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  await waitFor(() => c.buf.includes('\r\n\r\n') || c.ended, 'the upgrade answer', 20000, 20);
  assert(c.buf.toString('latin1').startsWith('HTTP/1.1 101'), `upgrade: ${c.buf.toString('latin1').slice(0, 200)}`);
  c.buf = c.buf.subarray(c.buf.indexOf('\r\n\r\n') + 4);
  // A masked text frame (mask key 0: the payload goes as it is).
  const head = Buffer.alloc(14);
  head[0] = 0x81; head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(ANNOUNCED), 2);
  sock.write(head);
  const closed1009 = () => { const i = c.buf.indexOf(0x88); return i >= 0 && c.buf.length >= i + 4 && c.buf.readUInt16BE(i + 2) === 1009; };
  if (!payload) {
    // Only the frame's head and one byte (wslay reports a frame's start with
    // its first payload byte): the server's receive buffer holds nothing when
    // it closes, so its close frame is never lost to a reset.
    sock.write(Buffer.from(' '));
    await waitFor(() => closed1009() || c.ended, 'a close', 60000, 20);
    c.saw1009 = closed1009();
    c.refused = c.saw1009 || c.ended;
    return c;
  }
  const chunk = Buffer.alloc(MiB, 0x20);
  for (let sent = 0; sent < SENT && !closed1009() && !c.ended; sent += MiB) {
    if (!sock.write(chunk)) {
      await Promise.race([new Promise((r) => sock.once('drain', r)),
        waitFor(() => closed1009() || c.ended, 'a close', 60000, 20)]);
    }
  }
  // A refusal is sent when the frame starts: wait for the sent bytes to be
  // taken (or for the close) before telling which it was.
  await waitFor(() => sock.writableLength === 0 || closed1009() || c.ended, 'the bytes taken or a close', 60000, 20);
  // Refused: the 1009 arrived, or the server closed the socket while the
  // client still had bytes to write (the close frame may then be lost to the
  // reset). A held one took every byte and stays open.
  c.saw1009 = closed1009();
  c.refused = c.saw1009 || c.ended;
  return c;
}

// One CDP command over the ws package; resolves its answer.
function cdpCall(url, msg) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { maxPayload: 0 });
    const timer = setTimeout(() => { ws.terminate(); reject(new Error('no answer in 60 s')); }, 60000);
    ws.on('open', () => ws.send(JSON.stringify(msg)));
    ws.on('message', (d) => { const j = JSON.parse(d); if (j.id === msg.id) { clearTimeout(timer); ws.close(); resolve(j); } });
    ws.on('error', (e) => { clearTimeout(timer); reject(e); });
  });
}

// The WebSocket URL of the session's first page (/json/list).
async function pageUrl(s, b) {
  const lst = await request(s.base, 'GET', `/browser/cdp/json/list${new URL(b.cdp_ws_url).search}`);
  eq(lst.status, 200, lst.text);
  return lst.json.find((t) => t.type === 'page').webSocketDebuggerUrl;
}

// A page WebSocket that asks for a string of n characters; read: false
// stops reading the socket once the answer's first bytes arrive (the relay
// sends a message only once it holds all of it: from then on the rest of the
// answer waits in the server), and sets .started. Resolves the socket and a
// record of what came back.
async function askLarge(url, n, { read }) {
  const ws = new WebSocket(url, { maxPayload: 0 });
  await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
  const c = { ws, answer: null, close: null, started: false };
  ws.on('message', (d) => { const j = JSON.parse(d); if (j.id === 1) c.answer = j; });
  ws.on('close', (code) => { c.close = code; });
  ws.on('error', () => {});
  if (!read) ws._socket.once('data', () => { ws._socket.pause(); c.started = true; });
  ws.send(JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression: `'x'.repeat(${n})`, returnByValue: true } }));
  return c;
}

export const tests = [
  {
    name: 'red team 45: bytes of half-sent client messages the CDP relay holds are capped per session (LIM_RELAY_MSG_SESSION_BYTES) and per organization (LIM_RELAY_MSG_ORG_BYTES): past a share the connection is closed with 1009; another organization\'s CDP is unaffected, and the share comes back when the connections end',
    timeout: 240000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN } });
      const held = [];
      try {
        const b = await newOrg(s, ADMIN, { name: 'victim-91', plan: 'startup' });
        const a1 = await create(s, s.key);
        const a2 = await create(s, s.key);
        const v = await create(s, b.key);
        const before = memKiB(s.proc.pid).rss;
        // One session: two messages of 60 MiB fit in its 128 MiB share, the third does not.
        const perSession = Math.floor(SESSION_SHARE / ANNOUNCED);
        for (let i = 0; i < perSession + 2; i++) held.push(await holdPartialMessage(s, a1.cdp_ws_url));
        const outcomes = held.map((c) => c.refused);
        eq(outcomes.filter((x) => !x).length, perSession, `held on one session: ${JSON.stringify(outcomes)}`);
        assert(outcomes.slice(perSession).every((x) => x), `past the session's share: ${JSON.stringify(outcomes)}`);
        // A refused one still sending may lose the close frame to the reset
        // that closing a socket with unread bytes sends (a busy host makes it
        // likely); one that sent only the frame's head reads it whole.
        const probe = await holdPartialMessage(s, a1.cdp_ws_url, { payload: false });
        held.push(probe);
        assert(probe.saw1009, 'a refused WebSocket is closed with 1009');
        // Another session of the same organization: what is left of the
        // organization's 160 MiB (40 MiB) does not take one more 60 MiB message.
        const c2 = await holdPartialMessage(s, a2.cdp_ws_url);
        held.push(c2);
        assert(ORG_SHARE - perSession * ANNOUNCED < ANNOUNCED, 'the figures of the case');
        assert(c2.refused, 'past the organization\'s share, on its other session');
        await waitFor(() => held.filter((c) => c.refused).every((c) => c.ended), 'refused connections closed', 30000);
        const grown = memKiB(s.proc.pid).rss - before;
        console.log(`      server RSS grew by ${Math.round(grown / 1024)} MiB with ${held.length} connections each sending ${SENT / MiB} MiB`);
        // The other organization's CDP answers, a message of 20 MiB included.
        const small = await cdpCall(v.cdp_ws_url, { id: 1, method: 'Browser.getVersion' });
        assert(small.result && small.result.product, JSON.stringify(small).slice(0, 200));
        const big = await cdpCall(v.cdp_ws_url, { id: 2, method: 'Runtime.evaluate', params: { expression: '1' }, pad: 'x'.repeat(20 * MiB) });
        assert(big.id === 2, 'a 20 MiB message of the other organization is relayed');
        // The share comes back: once the held connections end, the session
        // relays a 20 MiB message again (it could not while 120 MiB were held).
        for (const c of held) c.sock.destroy();
        await waitFor(async () => {
          try { const r = await cdpCall(a1.cdp_ws_url, { id: 3, method: 'Browser.getVersion', pad: 'y'.repeat(20 * MiB) }); return r.id === 3; } catch { return false; }
        }, 'a 20 MiB message on the session after its connections ended', 60000, 500);
      } finally {
        for (const c of held) c.sock.destroy();
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'red team 45: a CDP client that asks for large answers and never reads them holds at most its session\'s share of the server\'s memory (LIM_RELAY_MSG_SESSION_BYTES, 128 MiB): two unread 57 MiB answers fit, the third answer is refused with 1009; the share comes back when they end',
    timeout: 240000,
    fn: async () => {
      const s = await startServer({});
      const held = [];
      try {
        const b = await create(s, s.key);
        const url = await pageUrl(s, b);
        const N = 60 * 1000 * 1000; // an answer of about 57 MiB (a socket's buffers take a few of them)
        for (let i = 1; i <= 2; i++) {
          const c = await askLarge(url, N, { read: false });
          held.push(c);
          await waitFor(() => c.started, `unread answer ${i} held in the server`, 90000, 100);
        }
        const third = await askLarge(url, N, { read: true });
        await waitFor(() => third.close !== null || third.answer !== null, 'the third answer or a close', 90000, 100);
        assert(third.answer === null, 'the third large answer is not relayed while two unread ones are held (it was)');
        eq(third.close, 1009, 'the third connection is closed with 1009');
        for (const c of held) c.ws.terminate();
        await waitFor(async () => {
          const c = await askLarge(url, 20 * 1000 * 1000, { read: true });
          await waitFor(() => c.close !== null || c.answer !== null, 'an answer', 60000, 100);
          c.ws.terminate();
          return c.answer !== null && c.answer.result.result.value.length === 20 * 1000 * 1000;
        }, 'a 20 MB answer once the unread ones ended', 90000, 500);
      } finally {
        for (const c of held) c.ws.terminate();
        await s.stop();
        s.cleanup();
      }
    },
  },
  {
    name: 'red team 45: a session relays at most LIM_RELAY_CONNS_PER_SESSION (64) CDP WebSockets at once: the next upgrade is a 429 rate_limited with Retry-After naming the share; another session of the organization still connects, and a closed WebSocket makes room',
    timeout: 180000,
    fn: async () => {
      const s = await startServer({});
      const open = [];
      // Opens a CDP WebSocket: the socket once open, or the refusal's status and headers.
      const connect = (url) => new Promise((resolve) => {
        const ws = new WebSocket(url);
        ws.once('open', () => resolve({ ws }));
        ws.once('unexpected-response', (rq, rs) => {
          let body = '';
          rs.on('data', (d) => { body += d; });
          rs.on('end', () => resolve({ status: rs.statusCode, retryAfter: rs.headers['retry-after'], body }));
        });
        ws.once('error', (e) => resolve({ error: e.message }));
      });
      try {
        const a = await create(s, s.key);
        const b = await create(s, s.key);
        for (let i = 0; i < 64; i++) {
          const c = await connect(a.cdp_ws_url);
          assert(c.ws, `WebSocket ${i + 1} of 64: ${JSON.stringify(c)}`);
          open.push(c.ws);
        }
        const refused = await connect(a.cdp_ws_url);
        eq(refused.status, 429, `the 65th: ${refused.ws ? 'opened (101)' : JSON.stringify(refused)}`);
        assert(Number(refused.retryAfter) >= 1, `Retry-After: ${refused.retryAfter}`);
        assert(/CDP WebSockets/.test(refused.body), refused.body);
        const other = await connect(b.cdp_ws_url);
        assert(other.ws, `another session of the organization: ${JSON.stringify(other)}`);
        open.push(other.ws);
        const got = await new Promise((resolve) => {
          other.ws.once('message', (d) => resolve(JSON.parse(d)));
          other.ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' }));
        });
        assert(got.result && got.result.product, JSON.stringify(got));
        open.shift().close();
        await waitFor(async () => {
          const c = await connect(a.cdp_ws_url);
          if (c.ws) open.push(c.ws);
          return !!c.ws;
        }, 'a WebSocket once one of the 64 closed', 30000, 200);
      } finally {
        for (const ws of open) ws.terminate();
        await s.stop();
        s.cleanup();
      }
    },
  },
];
