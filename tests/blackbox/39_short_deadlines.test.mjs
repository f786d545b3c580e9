// The settings that shorten idle deadlines (docs/operator.md, "Shorter idle
// deadlines"): BROWSERD_MIN_SESSION_TIMEOUT_SECONDS and
// BROWSERD_ZIP_IDLE_SECONDS may only shorten a deadline, and a value out of
// range stops the server at start naming the variable. The compat suites use
// them to check the idle rules without waiting for the defaults. No Chromium:
// every create below is refused before a launch.
import { startServer, request, assert, isError, withServer } from './lib.mjs';

// The server's start fails; the message of its exit.
async function refusedAtStart(env) {
  try {
    const s = await startServer({ env });
    await s.stop(); s.cleanup();
  } catch (e) { return String(e.message); }
  throw new Error(`the server started with ${JSON.stringify(env)}`);
}

export const tests = [
  {
    name: 'short deadlines: BROWSERD_MIN_SESSION_TIMEOUT_SECONDS and BROWSERD_ZIP_IDLE_SECONDS outside 1..10 and 1..20 (or not integers) stop the server at start naming the variable',
    fn: async () => {
      for (const [name, values, range] of [
        ['BROWSERD_MIN_SESSION_TIMEOUT_SECONDS', ['0', '11', '3s'], 'from 1 to 10'],
        ['BROWSERD_ZIP_IDLE_SECONDS', ['0', '21', 'x'], 'from 1 to 20'],
      ]) {
        for (const v of values) {
          const msg = await refusedAtStart({ [name]: v });
          assert(/server exited 2/.test(msg), `${name}=${v}: exit 2: ${msg.slice(0, 300)}`);
          assert(msg.includes(name) && msg.includes(range), `${name}=${v}: names the variable and ${range}: ${msg.slice(0, 300)}`);
        }
      }
    },
  },
  {
    name: 'short deadlines: with BROWSERD_MIN_SESSION_TIMEOUT_SECONDS=3 a create below 3 is a 400 naming timeout_seconds and the range 3..259200; the default server keeps the API minimum of 10',
    fn: async () => {
      await withServer({ env: { BROWSERD_MIN_SESSION_TIMEOUT_SECONDS: '3' } }, async (s) => {
        const r = await request(s.base, 'POST', '/browsers', { key: s.key, body: { timeout_seconds: 2 } });
        isError(r, 400);
        assert(/timeout_seconds/.test(r.text) && /between 3 and 259200/.test(r.text), r.text);
      });
      await withServer({}, async (s) => {
        const r = await request(s.base, 'POST', '/browsers', { key: s.key, body: { timeout_seconds: 9 } });
        isError(r, 400);
        assert(/between 10 and 259200/.test(r.text), r.text);
      });
    },
  },
];
