// Profiles (issue 4 item 7): /profiles CRUD and list, the features.profiles
// gate, and saved browser state on real Chromium: a session created with
// {profile: {name, save_changes: true}} writes its cookies and localStorage back
// when it ends, and the next session with that profile starts from them.
// Pages are served by the test itself on 127.0.0.1.
import http from 'node:http';
import { chromium } from 'playwright-core';
import { startServer, startProfileSite, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';

// The site of these tests: blackbox/lib.mjs startProfileSite.
const site = startProfileSite;

async function withServer(fn, opts) {
  const s = await startServer(opts);
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

// A server whose browsers may reach a fresh loopback site (--allow-loopback).
async function withSite(fn, env = {}) {
  const w = await site();
  try { await withServer((s) => fn(s, w), { args: w.allow, env }); } finally { w.close(); }
}

const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });

async function create(s, body = {}) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body });
  eq(r.status, 200, `create session: ${r.text}`);
  return r.json;
}

async function newProfile(s, name) {
  const r = await api(s, 'POST', '/profiles', name === undefined ? {} : { name });
  eq(r.status, 200, `create profile: ${r.text}`);
  return r.json;
}

// Opens /set in the session's browser (cookie + localStorage), then disconnects.
async function writeState(b, w) {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url);
  try {
    const ctx = browser.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.goto(`${w.url}/set`);
    await page.waitForFunction(() => localStorage.getItem('saved') === 'ls-value', null, { timeout: 10000 });
  } finally { await browser.close(); }
}

// What the session's browser knows on /read: {cookie, ls}.
async function readState(b, w) {
  const browser = await chromium.connectOverCDP(b.cdp_ws_url);
  try {
    const ctx = browser.contexts()[0];
    const page = ctx.pages()[0] || await ctx.newPage();
    await page.goto(`${w.url}/read`);
    return await page.evaluate(() => ({ cookie: document.cookie, ls: localStorage.getItem('saved') }));
  } finally { await browser.close(); }
}

async function download(s, ref) {
  return new Promise((resolve, reject) => {
    http.get(`${s.base}/profiles/${ref}/download`, { headers: { authorization: `Bearer ${s.key}` } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    }).on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const until = (fn, what, ms = 30000) => waitFor(fn, what, ms, 200);

export const tests = [
  {
    name: 'Profile record {id, created_at, last_used_at, name|null, updated_at}; GET by id and by name; PATCH renames; 404 for an unknown one',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      const p = await newProfile(s, 'work.profile-1');
      assert(/^[a-z0-9]{24}$/.test(p.id), `id shape ${p.id}`);
      eq(p.name, 'work.profile-1');
      assert(!Number.isNaN(Date.parse(p.created_at)) && !Number.isNaN(Date.parse(p.updated_at)), 'RFC 3339 times');
      assert(!('last_used_at' in p), 'last_used_at omitted until a session used the profile');
      const anon = await newProfile(s);
      eq(anon.name, null, 'a profile without a name has name null');

      eq((await api(s, 'GET', `/profiles/${p.id}`)).json, p, 'GET by id');
      eq((await api(s, 'GET', '/profiles/work.profile-1')).json, p, 'GET by name');
      isError(await api(s, 'GET', '/profiles/nosuchprofile'), 404, 'not_found');

      let r = await api(s, 'PATCH', `/profiles/${p.id}`, { name: 'renamed' });
      eq(r.status, 200, r.text);
      eq(r.json.name, 'renamed');
      eq(r.json.id, p.id);
      assert(Date.parse(r.json.updated_at) >= Date.parse(p.updated_at), 'updated_at moves on rename');
      isError(await api(s, 'GET', '/profiles/work.profile-1'), 404, 'not_found');
      eq((await api(s, 'GET', '/profiles/renamed')).json.id, p.id);
      r = await api(s, 'PATCH', `/profiles/${anon.id}`, { name: null });
      eq(r.status, 200, r.text);
      eq(r.json.name, null);
      isError(await api(s, 'PATCH', '/profiles/nosuchprofile', { name: 'x' }), 404, 'not_found');
    }),
  },
  {
    name: 'profile names follow ^[a-zA-Z0-9._-]{1,255}$; unknown fields are 400',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      for (const name of ['', 'has space', 'a/b', 'x'.repeat(256), 12, true]) {
        const r = await api(s, 'POST', '/profiles', { name });
        isError(r, 400, 'bad_request');
        assert(/name/.test(r.text), `message names the field: ${r.text}`);
      }
      isError(await api(s, 'POST', '/profiles', { nam: 'x' }), 400, 'bad_request');
      const p = await newProfile(s, 'ok');
      isError(await api(s, 'PATCH', `/profiles/${p.id}`, {}), 400, 'bad_request');
      isError(await api(s, 'PATCH', `/profiles/${p.id}`, { name: 'bad name' }), 400, 'bad_request');
      eq((await newProfile(s, 'x'.repeat(255))).name.length, 255);
    }),
  },
  {
    name: 'Duplicate profile name in a project: 409 with x-should-retry false (create and rename)',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      await newProfile(s, 'dup');
      const other = await newProfile(s, 'other');
      let r = await api(s, 'POST', '/profiles', { name: 'dup' });
      isError(r, 409);
      eq(r.headers['x-should-retry'], 'false');
      r = await api(s, 'PATCH', `/profiles/${other.id}`, { name: 'dup' });
      isError(r, 409);
      eq(r.headers['x-should-retry'], 'false');
      // Unnamed profiles never conflict.
      await newProfile(s); await newProfile(s);
    }),
  },
  {
    name: 'GET /profiles: bare array, limit/offset with X-Has-More/X-Next-Offset, name (exact) and query (substring)',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      const made = [];
      for (const n of ['alpha', 'alphabet', 'beta']) made.push(await newProfile(s, n));
      let r = await api(s, 'GET', '/profiles');
      eq(r.status, 200);
      assert(Array.isArray(r.json), 'bare array');
      eq(r.json.map((p) => p.name), ['alpha', 'alphabet', 'beta']);
      eq(r.headers['x-has-more'], 'false');
      r = await api(s, 'GET', '/profiles?limit=2');
      eq(r.json.length, 2);
      eq(r.headers['x-has-more'], 'true');
      eq(r.headers['x-next-offset'], '2');
      r = await api(s, 'GET', '/profiles?limit=2&offset=2');
      eq(r.json.map((p) => p.id), [made[2].id]);
      eq(r.headers['x-has-more'], 'false');
      eq((await api(s, 'GET', '/profiles?name=alpha')).json.map((p) => p.name), ['alpha']);
      eq((await api(s, 'GET', '/profiles?query=lph')).json.map((p) => p.name), ['alpha', 'alphabet']);
      eq((await api(s, 'GET', '/profiles?name=nothing')).json, []);
      isError(await api(s, 'GET', '/profiles?limit=0'), 400);
    }),
  },
  {
    name: 'DELETE /profiles/{id_or_name}: 204, then 404; download of a profile never saved: 404',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      const p = await newProfile(s, 'gone');
      const d = await download(s, p.id);
      eq(d.status, 404, 'nothing saved yet');
      const r = await api(s, 'DELETE', '/profiles/gone');
      eq(r.status, 204);
      eq(r.text, '');
      isError(await api(s, 'GET', `/profiles/${p.id}`), 404, 'not_found');
      isError(await api(s, 'DELETE', `/profiles/${p.id}`), 404, 'not_found');
      // A session naming a profile that does not exist: 404 profile_not_found.
      const c = await api(s, 'POST', '/browsers', { headless: true, profile: { name: 'gone' } });
      isError(c, 404, 'profile_not_found');
      assert(/gone/.test(c.json.message), c.json.message);
      isError(await api(s, 'POST', '/browsers', { headless: true, profile: { id: p.id } }), 404, 'profile_not_found');
    }),
  },
  {
    name: 'features.profiles disabled for the org: 403 on /profiles and on a session profile; profiles are project-scoped',
    timeout: 30000,
    fn: () => withServer(async (s) => {
      const adm = (method, path, body) => request(s.base, method, path, { key: 'adm', body });
      const org = (await adm('POST', '/admin/orgs', { name: 'noprof', overrides: { features: { profiles: { enabled: false } } } })).json;
      const key = (await adm('POST', `/admin/orgs/${org.id}/api_keys`, {})).json.key;
      isError(await api(s, 'POST', '/profiles', { name: 'x' }, key), 403, 'feature_not_enabled');
      isError(await api(s, 'GET', '/profiles', undefined, key), 403, 'feature_not_enabled');
      isError(await api(s, 'GET', '/profiles/x', undefined, key), 403, 'feature_not_enabled');
      isError(await api(s, 'GET', '/profiles/x/download', undefined, key), 403, 'feature_not_enabled');
      const r = await api(s, 'POST', '/browsers', { headless: true, profile: { name: 'x' } }, key);
      isError(r, 403, 'feature_not_enabled');
      assert(/profile/.test(r.json.message), r.json.message);
      // The developer plan (the bootstrap org) has profiles on; another org's
      // (or project's) profile is not visible.
      const mine = await newProfile(s, 'mine');
      const org2 = (await adm('POST', '/admin/orgs', { name: 'other' })).json;
      const key2 = (await adm('POST', `/admin/orgs/${org2.id}/api_keys`, {})).json.key;
      isError(await api(s, 'GET', `/profiles/${mine.id}`, undefined, key2), 404);
      eq((await api(s, 'GET', '/profiles', undefined, key2)).json, []);
    }, { args: ['--admin-token', 'adm'] }),
  },
  {
    // NEEDS THE LEAD: a graceful browser stop (CDP Browser.close before
    // SIGTERM). With SIGTERM to the process group Chromium's network service
    // dies before it commits the cookie store, so cookies set in the last 30 s
    // are lost (and localStorage too when the group is signalled).
    name: 'save_changes: true round trip on real Chromium: cookie and localStorage written back on DELETE, restored by the next session; download is a gzip',
    timeout: 180000,
    fn: () => withSite(async (s, w) => {
      {
        const p = await newProfile(s, 'roundtrip');
        const b1 = await create(s, { profile: { name: 'roundtrip', save_changes: true } });
        eq(b1.profile.id, p.id, 'Browser record carries the Profile record');
        eq(b1.profile.name, 'roundtrip');
        eq(b1.profile_save_changes, true);
        assert('last_used_at' in b1.profile, 'last_used_at moves when a session loads the profile');
        const got = (await api(s, 'GET', `/browsers/${b1.session_id}`)).json;
        eq(got.profile.id, p.id); eq(got.profile_save_changes, true);
        await writeState(b1, w);
        eq((await api(s, 'DELETE', `/browsers/${b1.session_id}`)).status, 204);

        const after = (await api(s, 'GET', `/profiles/${p.id}`)).json;
        assert(Date.parse(after.updated_at) > Date.parse(p.updated_at), `updated_at moved: ${p.updated_at} -> ${after.updated_at}`);
        assert(Date.parse(after.last_used_at) >= Date.parse(b1.profile.last_used_at), 'last_used_at moved');
        const d = await download(s, 'roundtrip');
        eq(d.status, 200);
        assert(/^application\/gzip/.test(d.headers['content-type']), d.headers['content-type']);
        eq([d.body[0], d.body[1]], [0x1f, 0x8b], 'gzip magic');

        const b2 = await create(s, { profile: { id: p.id } });
        eq(b2.profile_save_changes, false, 'save_changes defaults to false');
        const st = await readState(b2, w);
        assert(st.cookie.includes('saved=cookie-value'), `cookie restored: ${JSON.stringify(st)}`);
        eq(st.ls, 'ls-value', 'localStorage restored');
        eq((await api(s, 'DELETE', `/browsers/${b2.session_id}`)).status, 204);
        // The deleted session still shows its profile.
        const del = (await api(s, 'GET', `/browsers/${b2.session_id}?include_deleted=true`)).json;
        eq(del.profile.id, p.id);
      }
    }),
  },
  {
    name: 'without save_changes nothing is written back: the profile stays empty and the next session starts fresh',
    timeout: 180000,
    fn: () => withSite(async (s, w) => {
      {
        const p = await newProfile(s, 'readonly');
        const b1 = await create(s, { profile: { name: 'readonly' } });
        eq(b1.profile_save_changes, false);
        await writeState(b1, w);
        eq((await api(s, 'DELETE', `/browsers/${b1.session_id}`)).status, 204);
        eq((await download(s, p.id)).status, 404, 'still nothing saved');
        eq((await api(s, 'GET', `/profiles/${p.id}`)).json.updated_at, p.updated_at, 'updated_at unchanged');
        const b2 = await create(s, { profile: { name: 'readonly' } });
        const st = await readState(b2, w);
        eq(st, { cookie: '', ls: null }, 'fresh state');
        eq((await api(s, 'DELETE', `/browsers/${b2.session_id}`)).status, 204);
      }
    }),
  },
  {
    // NEEDS THE LEAD for the cookie: the same graceful stop on the timeout path.
    name: 'save_changes also writes back when the session times out',
    timeout: 180000,
    fn: () => withSite(async (s, w) => {
      {
        const p = await newProfile(s, 'idle');
        const b1 = await create(s, { timeout_seconds: 4, profile: { name: 'idle', save_changes: true } });
        await writeState(b1, w);
        await until(async () => (await api(s, 'GET', `/browsers/${b1.session_id}`)).status === 404, 'the idle timeout', 60000);
        await until(async () => (await download(s, p.id)).status === 200, 'the archive after the timeout', 30000);
        const b2 = await create(s, { profile: { name: 'idle' } });
        const st = await readState(b2, w);
        assert(st.cookie.includes('saved=cookie-value'), `cookie restored: ${JSON.stringify(st)}`);
        eq((await api(s, 'DELETE', `/browsers/${b2.session_id}`)).status, 204);
      }
      // A shorter idle timeout than the API's 10 s minimum
      // (BROWSERD_MIN_SESSION_TIMEOUT_SECONDS): the same rule, less waiting.
    }, { BROWSERD_MIN_SESSION_TIMEOUT_SECONDS: '4' }),
  },
  {
    name: 'PATCH /browsers profile on a session that has one: 409 profile_already_loaded; deleting a profile in use keeps the session',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const p = await newProfile(s, 'inuse');
      await newProfile(s, 'another');
      const b = await create(s, { profile: { name: 'inuse', save_changes: true } });
      const r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { profile: { name: 'another' } });
      isError(r, 409, 'profile_already_loaded');
      eq(r.headers['x-should-retry'], 'false');
      eq((await api(s, 'DELETE', `/profiles/${p.id}`)).status, 204);
      const got = (await api(s, 'GET', `/browsers/${b.session_id}`)).json;
      eq(got.profile.id, p.id, 'the record keeps the profile seen at load time');
      eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
      eq((await download(s, p.id)).status, 404, 'nothing saved into a deleted profile');
    }),
  },
  {
    // NEEDS THE LEAD: browsers_restart_with_profile in browsers.c (see
    // src/api/profiles.h). Until it exists the server answers 501 here.
    name: 'PATCH /browsers {profile, start_url}: restarts Chromium on the profile, same session id and cdp_ws_url, start_url overrides restored tabs',
    timeout: 180000,
    fn: () => withSite(async (s, w) => {
      {
        const p = await newProfile(s, 'later');
        const b0 = await create(s, { profile: { name: 'later', save_changes: true } });
        await writeState(b0, w);
        eq((await api(s, 'DELETE', `/browsers/${b0.session_id}`)).status, 204);

        const b = await create(s);
        assert(!('profile' in b), 'no profile yet');
        const r = await api(s, 'PATCH', `/browsers/${b.session_id}`, { profile: { id: p.id }, start_url: `${w.url}/read` });
        if (r.status === 501) throw new Error('PENDING LEAD: browsers_restart_with_profile is not wired yet (501)');
        eq(r.status, 200, r.text);
        eq(r.json.session_id, b.session_id);
        eq(r.json.profile.id, p.id);
        eq(r.json.profile_save_changes, false);
        const browser = await chromium.connectOverCDP(b.cdp_ws_url); // the old URL still works
        try {
          const ctx = browser.contexts()[0];
          const page = await until(() => ctx.pages().find((pg) => pg.url().endsWith('/read')), 'start_url page', 20000);
          const st = await page.evaluate(() => ({ cookie: document.cookie, ls: localStorage.getItem('saved') }));
          assert(st.cookie.includes('saved=cookie-value'), JSON.stringify(st));
          eq(st.ls, 'ls-value');
        } finally { await browser.close(); }
        isError(await api(s, 'PATCH', `/browsers/${b.session_id}`, { profile: { id: p.id } }), 409, 'profile_already_loaded');
        eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204);
      }
    }),
  },
];
