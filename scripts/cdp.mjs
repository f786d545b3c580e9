// One Chrome DevTools Protocol call, for the README's tour and for trying a
// browser by hand:
//
//   node scripts/cdp.mjs browser.json Runtime.evaluate '{"expression":"6*7"}'
//
// The first argument is a Browser record saved from POST /browsers (its
// cdp_ws_url is used) or a ws:// URL. Prints the call's result as JSON and
// exits 0, or prints the error and exits 1. Uses Node's own WebSocket (on
// Node 20 behind --experimental-websocket, which this script adds itself).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

if (typeof WebSocket === 'undefined') {
  const r = spawnSync(process.execPath, ['--experimental-websocket', '--no-warnings', ...process.argv.slice(1)],
    { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const [target, method, params = '{}'] = process.argv.slice(2);
if (!target || !method) {
  console.error('usage: node scripts/cdp.mjs BROWSER_JSON_FILE|WS_URL METHOD [PARAMS_JSON]');
  process.exit(2);
}
const url = /^wss?:\/\//.test(target) ? target : JSON.parse(readFileSync(target, 'utf8')).cdp_ws_url;
if (!url) {
  console.error(`${target} has no cdp_ws_url`);
  process.exit(1);
}
// CDP commands on the browser target need no session; page commands such as
// Runtime.evaluate go to the first page, attached with flatten sessions.
const ws = new WebSocket(url);
let next = 1;
const waiting = new Map();
const send = (m, p, sessionId) => new Promise((resolve, reject) => {
  const id = next++;
  waiting.set(id, { resolve, reject });
  ws.send(JSON.stringify({ id, method: m, params: p, ...(sessionId ? { sessionId } : {}) }));
});
const timer = setTimeout(() => { console.error('no answer within 30 s'); process.exit(1); }, 30000);
ws.onerror = (ev) => { console.error(`cannot connect to ${url}: ${ev.message || 'WebSocket error'}`); process.exit(1); };
ws.onmessage = (ev) => {
  const msg = JSON.parse(ev.data);
  const w = msg.id && waiting.get(msg.id);
  if (!w) return;
  waiting.delete(msg.id);
  if (msg.error) w.reject(new Error(`${msg.error.message} (${msg.error.code})`));
  else w.resolve(msg.result);
};
ws.onopen = async () => {
  try {
    let sessionId;
    if (!/^(Browser|Target|SystemInfo)\./.test(method)) {
      const { targetInfos } = await send('Target.getTargets', {});
      const page = targetInfos.find((t) => t.type === 'page');
      if (!page) throw new Error('the browser has no page');
      ({ sessionId } = await send('Target.attachToTarget', { targetId: page.targetId, flatten: true }));
    }
    const result = await send(method, JSON.parse(params), sessionId);
    console.log(JSON.stringify(result));
    clearTimeout(timer);
    ws.close();
    process.exit(0);
  } catch (e) {
    console.error(String(e.message || e));
    process.exit(1);
  }
};
