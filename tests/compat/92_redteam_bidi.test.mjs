// Red team pass 45b (docs/sandbox.md "Tenant fairness: red team pass 45b"):
// WebDriver BiDi WebSockets (webdriver_ws_url). Each is two sockets, a
// connection to the session's ChromeDriver and a share of the relay's memory;
// pass 45 counted the CDP ones per session and organization but not these, so
// only the HTTP front's per-address limit bounded them. They now have a share
// of their own (LIM_BIDI_CONNS*, src/core/limits.h).
import WebSocket from 'ws';
import { startServer, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const PER_SESSION = 16; // LIM_BIDI_CONNS_PER_SESSION

async function create(s) {
  const r = await request(s.base, 'POST', '/browsers', { key: s.key, body: { headless: true } });
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// Opens a WebSocket: {ws} once open, or the refusal's status, Retry-After and body.
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

// One BiDi command on an open socket: its answer.
const call = (ws, id, method, params = {}) => new Promise((resolve) => {
  const on = (d) => {
    const m = JSON.parse(d.toString());
    if (m.id === id) { ws.off('message', on); resolve(m); }
  };
  ws.on('message', on);
  ws.send(JSON.stringify({ id, method, params }));
});

export const tests = [
  {
    name: 'red team 45b: a session relays at most LIM_BIDI_CONNS_PER_SESSION (16) BiDi WebSockets at once: the next upgrade is a 429 rate_limited with Retry-After naming the share; another session still speaks BiDi, and a closed WebSocket makes room',
    timeout: 180000,
    fn: async () => {
      const s = await startServer({});
      const open = [];
      try {
        const a = await create(s);
        const b = await create(s);
        for (let i = 0; i < PER_SESSION; i++) {
          const c = await connect(a.webdriver_ws_url);
          assert(c.ws, `BiDi WebSocket ${i + 1} of ${PER_SESSION}: ${JSON.stringify(c)}`);
          open.push(c.ws);
        }
        const refused = await connect(a.webdriver_ws_url);
        if (refused.ws) open.push(refused.ws);
        eq(refused.status, 429, `WebSocket ${PER_SESSION + 1}: ${refused.ws ? 'opened (101)' : JSON.stringify(refused)}`);
        assert(Number(refused.retryAfter) >= 1, `Retry-After: ${refused.retryAfter}`);
        assert(/BiDi WebSockets/.test(refused.body), refused.body);
        const other = await connect(b.webdriver_ws_url);
        assert(other.ws, `another session: ${JSON.stringify(other)}`);
        open.push(other.ws);
        const got = await call(other.ws, 1, 'session.status');
        eq(got.type, 'success', JSON.stringify(got));
        open.shift().close();
        await waitFor(async () => {
          const c = await connect(a.webdriver_ws_url);
          if (c.ws) open.push(c.ws);
          return !!c.ws;
        }, `a BiDi WebSocket once one of the ${PER_SESSION} closed`, 30000, 200);
      } finally {
        for (const ws of open) ws.terminate();
        await s.stop();
        s.cleanup();
      }
    },
  },
];
