// Issue 37 item 5: the console (GET /console, docs/console.md), one static
// page that asks for an API key or the admin token and calls the JSON API
// with it. Opened in Chromium (Playwright) and in Firefox ESR (WebDriver
// BiDi, the helper of 83_replays): sign in with the key, the sessions and
// pools listed, a session's live view opened from its link, its replay
// played and downloaded, its telemetry events shown, and a tenant-controlled
// value that is markup (a console_log event's text `<img src=x onerror=...>`;
// session names and tags cannot hold `<`, the API refuses them) rendered as
// text: no element made, no script run. The page is a static file, so the
// sanitizer builds skip this file.
import { chromium } from 'playwright-core';
import { startServer, request, assert, eq, waitFor } from '../blackbox/lib.mjs';
import { firefox } from './83_replays.test.mjs';

const BIN = process.env.BROWSERD_BIN || 'build/browserd';
const ADMIN = 'console-admin-token';
const PAYLOAD = '<img src=x onerror=document.title=1337>';
const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

// A headful session named console-a with console and connection telemetry,
// whose page logged PAYLOAD, and one finished replay of it.
async function fixture(s) {
  const r = await api(s, 'POST', '/browsers', {
    headless: false, name: 'console-a', viewport: { width: 800, height: 600 },
    telemetry: { enabled: true, browser: { console: { enabled: true } } },
  });
  eq(r.status, 200, `create: ${r.text}`);
  const b = r.json;
  assert(b.browser_live_view_url, `a headful session has a live view URL: ${r.text}`);
  const bad = await api(s, 'POST', '/browsers', { headless: true, name: PAYLOAD });
  eq(bad.status, 400, `a name with markup is refused: ${bad.text}`);
  const st = await api(s, 'POST', `/browsers/${b.session_id}/replays`, { framerate: 5 });
  eq(st.status, 201, `replay start: ${st.text}`);
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  try {
    const ctx = br.contexts()[0];
    const pg = ctx.pages()[0] || await ctx.newPage();
    await waitFor(async () => {
      await pg.evaluate((t) => console.log(t), PAYLOAD);
      const ev = await api(s, 'GET', `/browsers/${b.session_id}/telemetry/events?category=console`);
      return ev.json.some((x) => x.event.type === 'console_log' && x.event.data.text === PAYLOAD);
    }, 'the console_log event with the markup', 20000, 500);
  } finally { await br.close(); }
  const stop = await request(s.base, 'POST', `/browsers/${b.session_id}/replays/${st.json.replay_id}/stop`, { key: s.key, headers: { accept: '*/*' } });
  eq(stop.status, 200, `replay stop: ${stop.text}`);
  const p = await api(s, 'POST', '/browser_pools', { name: 'console-pool', size: 1 });
  eq(p.status < 300, true, `pool: ${p.text}`);
  return { b, replay: st.json.replay_id };
}

// What a signed-in page shows, read by an expression (the same for both
// browsers): the sessions' and pools' text, the event list's text, images and
// the title (an onerror that ran would have set it).
const STATE = `(() => ({
  sessions: document.getElementById('sessions').textContent,
  pools: document.getElementById('pools').textContent,
  usage: document.getElementById('usagebody').textContent,
  events: document.getElementById('events').textContent,
  imgs: document.querySelectorAll('img').length,
  title: document.title,
  live: [...document.querySelectorAll('#sessions a')].map((a) => a.href),
  stored: sessionStorage.getItem('browserd.console.key'),
  local: localStorage.length,
}))()`;
const SIGN_IN = (key) => `(() => { document.getElementById('key').value = ${JSON.stringify(key)};
  document.getElementById('go').click(); return 1; })()`;
// Opens the details of session console-a, then refreshes its events.
const DETAILS = `(() => { for (const tr of document.querySelectorAll('#sessions tr'))
  if (tr.firstChild.textContent === 'console-a') { tr.querySelector('button').click(); return 1; } return 0; })()`;
const EVREFRESH = `(() => { document.getElementById('evrefresh').click(); return 1; })()`;

function checkRendered(st, b, what) {
  assert(st.sessions.includes('console-a') && st.sessions.includes(b.session_id), `${what}: the session listed by name: ${st.sessions}`);
  assert(st.pools.includes('console-pool'), `${what}: the pool listed: ${st.pools}`);
  assert(/plan/.test(st.usage) && /sessions running\d/.test(st.usage), `${what}: usage shown: ${st.usage}`);
  eq(st.imgs, 0, `${what}: the markup made no element`);
  assert(st.events.includes(PAYLOAD), `${what}: the markup shown as text: ${st.events.slice(0, 300)}`);
  eq(st.title, 'browserd console', `${what}: no script ran (title)`);
  eq(st.local, 0, `${what}: nothing in localStorage`);
}

async function withConsole(fn) {
  const s = await startServer({ args: ['--admin-token', ADMIN] });
  try {
    const page = await request(s.base, 'GET', '/console');
    eq(page.status, 200, `GET /console: ${page.text.slice(0, 200)}`);
    await fn(s);
  } finally { await s.stop(); s.cleanup(); }
}

export const tests = /asan|tsan/.test(BIN) ? [] : [
  {
    name: 'issue 37.5: GET /console is one page without a key, under a strict CSP (self only, inline code by hash), X-Frame-Options DENY, no-store',
    timeout: 20000,
    fn: () => withConsole(async (s) => {
      const r = await request(s.base, 'GET', '/console');
      eq(r.status, 200, `GET /console: ${r.status}`);
      assert(/^text\/html/.test(r.headers['content-type']), r.headers['content-type']);
      const csp = r.headers['content-security-policy'] || '';
      assert(/(^|; )default-src 'self'(;|$)/.test(csp), `default-src 'self': ${csp}`);
      assert(/script-src 'sha256-[A-Za-z0-9+/]{43}='(;|$)/.test(csp), `script by hash only: ${csp}`);
      assert(/frame-ancestors 'none'/.test(csp) && !/https?:|\*|unsafe/.test(csp), `no other origin, nothing unsafe: ${csp}`);
      eq(r.headers['x-frame-options'], 'DENY');
      eq(r.headers['cache-control'], 'no-store');
      assert(!/bd_[A-Za-z0-9]{40}/.test(r.text), 'no key in the page');
    }),
  },
  {
    name: 'issue 37.5: the console in Chromium: key sign-in, sessions and pools listed, live view opened, replay played and downloaded, telemetry shown, markup rendered as text; admin token shows plans',
    timeout: 40000,
    fn: () => withConsole(async (s) => {
      const { b, replay } = await fixture(s);
      const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
      try {
        const ctx = await browser.newContext({ acceptDownloads: true });
        const pg = await ctx.newPage();
        const violations = [];
        pg.on('console', (m) => { if (/Content.Security.Policy/i.test(m.text())) violations.push(m.text()); });
        await pg.goto(`${s.base}/console`);
        await pg.evaluate(SIGN_IN(s.key));
        let st;
        await waitFor(async () => { st = await pg.evaluate(STATE); return st.sessions.includes('console-a') && st.pools.includes('console-pool'); }, 'the session and the pool listed');
        eq(st.stored, s.key, 'the key in sessionStorage');
        assert(!pg.url().includes(s.key), 'the key is not in the URL');
        eq(st.live[0], b.browser_live_view_url, 'the live view link is the record\'s');
        await pg.evaluate(DETAILS);
        // The live view opens in a new tab and shows frames.
        const [lv] = await Promise.all([ctx.waitForEvent('page'), pg.click('#sessions a')]);
        await waitFor(async () => lv.evaluate(() => document.getElementById('c').width > 0), 'the live view shows a frame');
        // Its connection is a telemetry event the console shows, next to the markup.
        await waitFor(async () => {
          await pg.evaluate(EVREFRESH);
          st = await pg.evaluate(STATE);
          return st.events.includes('live_view_connect') && st.events.includes('console_log');
        }, 'live_view_connect and the console_log event shown', 20000, 500);
        await lv.close();
        checkRendered(st, b, 'chromium');
        // The replay: listed, played (the video loads), downloaded (an MP4).
        await waitFor(async () => (await pg.textContent('#replays')).includes(replay), 'the replay listed');
        await pg.click('#replays button:text("play")');
        let video;
        await waitFor(async () => {
          video = await pg.evaluate(() => { const v = document.querySelector('#player video'); return v && { ready: v.readyState, duration: v.duration, error: v.error && v.error.message, src: v.src }; });
          return video && video.ready >= 1 && !video.error; // metadata decoded (a short recording may last 0 s)
        }, 'the replay plays').catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(video)}`); });
        const [dl] = await Promise.all([pg.waitForEvent('download'), pg.click('#replays button:text("download")')]);
        eq(dl.suggestedFilename(), `${replay}.mp4`);
        const stream = await dl.createReadStream();
        const chunks = [];
        for await (const c of stream) chunks.push(c);
        eq(Buffer.concat(chunks).subarray(4, 8).toString(), 'ftyp', 'the download is an MP4');
        eq(violations.length, 0, `no CSP violation: ${violations.join('\n')}`);
        // The admin token: the plans.
        const ad = await ctx.newPage();
        await ad.goto(`${s.base}/console`);
        await ad.evaluate(SIGN_IN(ADMIN));
        await waitFor(async () => (await ad.textContent('#plans')).length > 0, 'the plans listed with the admin token');
      } finally { await browser.close(); }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
  {
    name: 'issue 37.5: the console in Firefox (firefox-esr over WebDriver BiDi): key sign-in, the session listed by name with its live view link, telemetry shown, markup rendered as text',
    timeout: 40000,
    fn: () => withConsole(async (s) => {
      const { b } = await fixture(s);
      const ff = await firefox();
      try {
        await ff.goto(`${s.base}/console`);
        await ff.eval(SIGN_IN(s.key));
        let st;
        const state = async () => JSON.parse(await ff.eval(`JSON.stringify(${STATE})`));
        await waitFor(async () => { st = await state(); return st.sessions.includes('console-a') && st.pools.includes('console-pool'); }, 'the session and the pool listed in Firefox');
        await ff.eval(DETAILS);
        await waitFor(async () => {
          await ff.eval(EVREFRESH);
          st = await state();
          return st.events.includes('console_log');
        }, 'the console_log event shown in Firefox', 20000, 500);
        eq(st.live[0], b.browser_live_view_url, 'the live view link is the record\'s');
        eq(st.stored, s.key, 'the key in sessionStorage');
        checkRendered(st, b, 'firefox');
      } finally { await ff.close(); }
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
    }),
  },
];
