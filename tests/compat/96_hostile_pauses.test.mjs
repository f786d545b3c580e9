// Issue 29, items 2 and 7, what was left (docs/sandbox.md "Tenant fairness:
// slow calls and stdin", "requests the server makes for a tenant"): single
// computer actions wait for their session's input parked, without a thread,
// as batches do; an organization's telemetry destinations (an export queue
// each) are capped. The attacker is the server's bootstrap key; the victim
// is a second organization. Outcomes are asserted by what was answered
// while what was still outstanding, never by elapsed times.
import { setMaxListeners } from 'node:events';
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq, isError, waitFor, newOrg, createSession, deleteSession } from '../blackbox/lib.mjs';

const ADMIN = 'pauses-admin';
const api = (s, method, path, body, extra = {}) => request(s.base, method, path, { key: s.key, body, ...extra });

async function withServer(fn, env = {}) {
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, ...env } });
  try {
    // Enterprise: its plan has file_io (the blocking GET below).
    const v = await newOrg(s, ADMIN, { name: 'victim', plan: 'enterprise' });
    await fn(s, { base: s.base, key: v.key });
  } finally { await s.stop(); s.cleanup(); }
}

const create = (s, extra) => createSession(s, extra);
// A page that logs its key events (repeats apart) and notes a click.
const KEY_LOG = '<script>window.log = []; window.clicked = false; for (const t of ["keydown", "keyup"]) ' +
  'addEventListener(t, (e) => { if (!e.repeat) log.push([t, e.code, e.shiftKey, performance.now()]); });' +
  ' addEventListener("mousedown", () => { clicked = true; });</script>';
const remove = deleteSession;

export const tests = [
  {
    name: 'issue 29.2: single press_key calls with long key holds on two sessions, more than the server\'s blocking threads: neither the running holds nor the calls waiting for the input hold a thread; another org\'s blocking GET is answered before any of them and its POST /browsers before the holds end',
    timeout: 150000,
    fn: () => withServer(async (s, victim) => {
      // Two blocking threads (BROWSERD_BLOCKING_THREADS), fewer than the
      // two running holds and six waiting calls below. A server whose
      // holds slept on their thread has none left for the victim until a
      // hold ends; one whose waiting calls waited on a thread (5 s each,
      // one after the other) answers the victim only after the first of
      // them gave up.
      // The victim's session outlives a starved wait (its idle timeout).
      const vid = await create(victim, { timeout_seconds: 600 });
      const ids = [await create(s), await create(s)];
      const ac = new AbortController();
      setMaxListeners(100, ac.signal);
      const calls = [];
      const answered = [];
      try {
        // Six keys held 10 s each: 60 s, the most one call may ask for.
        const hold = { keys: ['a', 'b', 'c', 'd', 'e', 'f'], duration: 10000 };
        for (let i = 0; i < 4; i++) {
          for (const id of ids) {
            const p = api(s, 'POST', `/browsers/${id}/computer/press_key`, hold, { signal: ac.signal });
            calls.push(p.then((r) => { answered.push(r); return r; }, () => null));
          }
        }
        // A round trip on the attacker's key: its calls above are in.
        eq((await api(s, 'GET', '/org/entitlements')).status, 200, 'entitlements');
        const list = await request(victim.base, 'GET', `/browsers/${vid}/fs/list_files?path=${encodeURIComponent('/tmp')}`, { key: victim.key });
        eq(list.status, 200, `the victim's list_files: ${list.text}`);
        eq(answered.map((r) => r.status), [], 'the victim\'s blocking GET is answered before any of the attacker\'s calls (neither the holds nor the calls waiting for the input hold a thread)');
        const made = await request(victim.base, 'POST', '/browsers', { key: victim.key, body: { headless: true } });
        eq(made.status, 200, `the victim's POST /browsers: ${made.text}`);
        eq(answered.filter((r) => r.status === 200).length, 0, 'the running key holds are still outstanding when the victim is answered');
        await remove(victim, made.json.session_id);
        // The calls that waited for a busy session give up: 429 session_busy.
        await waitFor(() => answered.length >= 6, 'the six waiting calls answered', 60000);
        for (const r of answered) {
          isError(r, 429, 'session_busy');
          assert(Number(r.headers['retry-after']) > 0, `Retry-After on a 429: ${JSON.stringify(r.headers)}`);
        }
      } finally {
        ac.abort();
        await Promise.all(calls);
        // Ended with the server anyway: a failed removal here must not hide
        // the assertion that failed above.
        for (const [who, id] of [[s, ids[0]], [s, ids[1]], [victim, vid]]) await api(who, 'DELETE', `/browsers/${id}`).catch(() => null);
      }
    }, { BROWSERD_BLOCKING_THREADS: '2' }),
  },
  {
    name: 'issue 29.2: a parked key hold is still a key hold, headless and headful: the hold keys go down first and up last, each key is down for its duration, the page sees the held modifier',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      for (const headless of [true, false]) {
        const r = await api(s, 'POST', '/browsers', { headless });
        eq(r.status, 200, `create: ${r.text}`);
        const id = r.json.session_id;
        const b = await chromium.connectOverCDP(r.json.cdp_ws_url);
        try {
          const page = b.contexts()[0].pages()[0];
          await page.setContent(KEY_LOG);
          await page.bringToFront();
          if (!headless) {
            // Measured, not asserted (the CI saw a hold's first keydowns
            // lost here when no click came first, twice, and no run on a
            // developer's machine did): a key with no text of its own, so
            // that wherever it went nothing was typed.
            eq((await api(s, 'POST', `/browsers/${id}/computer/press_key`, { keys: ['Shift'] })).status, 200, 'Shift without a click');
            const seen = await waitFor(async () => { const l = await page.evaluate('log'); return l.length >= 2 && l; }, 'two key events', 2000)
              .catch(() => page.evaluate('log'));
            console.log(`  measured: headful, Shift pressed right after bringToFront, before any click: the page saw ${JSON.stringify(seen.map((e) => `${e[0]}:${e[1]}@${Math.round(e[3])}`))}`);
            await page.evaluate('log.length = 0');
          }
          // The page takes the keys once clicked, as an agent gives it the
          // focus (85_computer_x, 92_computer_clients): on a headful
          // session, keys sent before any click go to whatever Chromium
          // focused, the omnibox of a new window among them.
          const [w, h] = await page.evaluate(headless ? '[innerWidth, innerHeight]' : '[screen.width, screen.height]');
          const c = await api(s, 'POST', `/browsers/${id}/computer/click_mouse`, { x: Math.round(w / 2), y: Math.round(h / 2) });
          eq(c.status, 200, `click (headless ${headless}): ${c.text}`);
          await waitFor(() => page.evaluate('clicked'), `the page saw the click (headless ${headless})`, 10000);
          const p = await api(s, 'POST', `/browsers/${id}/computer/press_key`, { keys: ['a', 'b'], duration: 1200, hold_keys: ['Shift'] });
          eq(p.status, 200, `press_key (headless ${headless}): ${p.text}`);
          const log = await waitFor(async () => {
            const l = await page.evaluate('log');
            return l.length >= 6 && l;
          }, 'six key events', 10000).catch(async (err) => { throw new Error(`${err.message} (headless ${headless}): ${JSON.stringify(await page.evaluate('log'))}`); });
          eq(log.map((e) => `${e[0]}:${e[1]}`), ['keydown:ShiftLeft', 'keydown:KeyA', 'keyup:KeyA', 'keydown:KeyB', 'keyup:KeyB', 'keyup:ShiftLeft'], `the order (headless ${headless})`);
          assert(log[1][2] && log[3][2], `Shift is held for the keys (headless ${headless}): ${JSON.stringify(log)}`);
          for (const [down, up] of [[1, 2], [3, 4]]) {
            const held = log[up][3] - log[down][3];
            assert(held >= 1100, `${log[down][1]} was down ${held} ms, at least its 1200 ms duration (headless ${headless})`);
          }
        } finally {
          await b.close();
          await remove(s, id);
        }
      }
    }),
  },
  {
    name: 'issue 29.7: an organization has at most 10 telemetry destinations (each an export queue): the 11th is a 409 limit_exceeded naming the rule, another organization is not counted, a delete makes room',
    fn: () => withServer(async (s, victim) => {
      const dest = (who, i) => request(who.base, 'POST', '/org/telemetry/destinations',
        { key: who.key, body: { name: `d${i}`, endpoint: `http://collector-${i}.invalid:4318/v1/logs` } });
      const made = [];
      for (let i = 0; i < 10; i++) {
        const r = await dest(s, i);
        eq(r.status, 200, `destination ${i}: ${r.text}`);
        made.push(r.json.id);
      }
      const over = await dest(s, 10);
      isError(over, 409, 'limit_exceeded');
      assert(/at most 10 OTLP destinations/.test(over.json.message), `the 409 names the rule: ${over.json.message}`);
      eq((await api(s, 'GET', '/org/telemetry/destinations?limit=100')).json.length, 10, 'the refused one was not stored');
      eq((await dest(victim, 0)).status, 200, 'another organization is not counted');
      eq((await api(s, 'DELETE', `/org/telemetry/destinations/${made[0]}`)).status, 204, 'delete');
      eq((await dest(s, 10)).status, 200, 'a delete makes room');
    }),
  },
];
