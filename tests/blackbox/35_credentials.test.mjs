// Issue 35 item 1: credentials (KERNEL_API_NEWER.md 1.4 "Credentials").
// Values and the TOTP secret are sealed at rest with the store's secret box
// and never returned or logged; GET .../totp-code is RFC 6238 (SHA-1, 30 s,
// 6 digits) from the base32 secret; features.credentials gates the resource;
// one organization stores at most LIM_CREDENTIALS_PER_ORG. No Chromium.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request, assert, eq, isError, withServer, ok2xx, newOrg, waitFor, totp } from './lib.mjs';

const ADMIN = 'admin-token-for-credentials';
const server = (fn) => withServer({ args: ['--admin-token', ADMIN] }, fn);

const PASSWORD = 'pw-Zq7Xv9Lk2Hs4-cleartext';
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'; // base32
const LIM_CREDENTIALS_PER_ORG = 1000; // src/core/limits.h

// The code of the step the server answered in: the step before or after the
// request may differ from the one the server saw, so the code must match
// the step its expires_at closes.
function expectedCode(secret, expiresAt) {
  return totp(secret, Date.parse(expiresAt) / 1000 - 1);
}

const noSecret = (what, text) => {
  assert(!text.includes(PASSWORD), `${what} shows the password: ${text}`);
  assert(!text.includes(SECRET), `${what} shows the TOTP secret: ${text}`);
};

export const tests = [
  {
    name: 'issue 35.1: a credential is created, read, listed by domain and name, never shows its values or secret; totp-code is RFC 6238 of the secret',
    fn: () => server(async (s) => {
      const k = s.key;
      const c = await request(s.base, 'POST', '/credentials', { key: k, body: { name: 'shop', domain: 'shop.example', values: { username: 'ann', password: PASSWORD }, totp_secret: SECRET } });
      eq(c.status, 200, `create: ${c.text}`);
      noSecret('create', c.text);
      assert(/^[a-z0-9]{24}$/.test(c.json.id), `id ${c.json.id}`);
      eq([c.json.name, c.json.domain, c.json.has_values, c.json.has_totp_secret, c.json.value_keys.sort()],
        ['shop', 'shop.example', true, true, ['password', 'username']], 'record');
      assert(/^\d{6}$/.test(c.json.totp_code) && c.json.totp_code_expires_at, `the code of a secret just set: ${c.text}`);
      eq(c.json.totp_code, expectedCode(SECRET, c.json.totp_code_expires_at), 'create totp_code');
      for (const ref of [c.json.id, 'shop']) {
        const g = await request(s.base, 'GET', `/credentials/${ref}`, { key: k });
        eq(g.status, 200, `get ${ref}: ${g.text}`);
        noSecret('get', g.text);
        eq(g.json.value_keys.sort(), ['password', 'username'], 'value_keys');
        assert(!('totp_code' in g.json), 'a plain get shows no code');
        const t = ok2xx(await request(s.base, 'GET', `/credentials/${ref}/totp-code`, { key: k }), 'totp-code');
        eq(Object.keys(t).sort(), ['code', 'expires_at'], 'totp-code shape');
        eq(t.code, expectedCode(SECRET, t.expires_at), `totp-code of ${ref}`);
        const left = Date.parse(t.expires_at) - Date.now();
        assert(left > -5000 && left <= 31000, `expires_at within a step: ${t.expires_at}`);
      }
      await request(s.base, 'POST', '/credentials', { key: k, body: { name: 'mail', domain: 'mail.example', values: { email: 'a@b' } } });
      const all = ok2xx(await request(s.base, 'GET', '/credentials', { key: k }), 'list');
      eq(all.map((x) => x.name), ['shop', 'mail'], 'list');
      assert(all.every((x) => !('value_keys' in x)), 'a list omits value_keys');
      noSecret('list', JSON.stringify(all));
      eq(ok2xx(await request(s.base, 'GET', '/credentials?domain=mail.example', { key: k }), 'by domain').map((x) => x.name), ['mail'], 'domain filter');
      eq(ok2xx(await request(s.base, 'GET', '/credentials?query=ho', { key: k }), 'by query').map((x) => x.name), ['shop'], 'query filter');
      isError(await request(s.base, 'GET', '/credentials/mail/totp-code', { key: k }), 404, 'not_found');
      isError(await request(s.base, 'POST', '/credentials', { key: k, body: { name: 'shop', domain: 'x', values: {} } }), 409, 'conflict');
      noSecret('the server log', s.log);
    }),
  },
  {
    name: 'issue 35.1: PATCH removes then merges values, renames, sets and clears the TOTP secret; DELETE by name; another organization sees none of it',
    fn: () => server(async (s) => {
      const k = s.key;
      const c = ok2xx(await request(s.base, 'POST', '/credentials', { key: k, body: { name: 'a', domain: 'a.example', values: { username: 'u', password: PASSWORD } } }), 'create');
      eq(c.has_totp_secret, false, 'no secret');
      assert(!('totp_code' in c), 'no code without a secret');
      let u = await request(s.base, 'PATCH', '/credentials/a', { key: k, body: { remove_value_keys: ['username', 'password'], values: { password: 'new-pw', otp_hint: 'x' }, name: 'b', totp_secret: SECRET.toLowerCase().replace(/(.{4})/g, '$1 ') } });
      eq(u.status, 200, `update: ${u.text}`);
      noSecret('update', u.text);
      eq([u.json.name, u.json.value_keys.sort(), u.json.has_totp_secret], ['b', ['otp_hint', 'password'], true], 'updated');
      eq(u.json.totp_code, expectedCode(SECRET, u.json.totp_code_expires_at), 'the code of the spaced lowercase secret');
      isError(await request(s.base, 'GET', '/credentials/a', { key: k }), 404, 'not_found');
      u = ok2xx(await request(s.base, 'PATCH', `/credentials/${c.id}`, { key: k, body: { totp_secret: '', sso_provider: 'google' } }), 'clear secret');
      eq([u.has_totp_secret, u.sso_provider], [false, 'google'], 'secret cleared, sso set');
      isError(await request(s.base, 'GET', '/credentials/b/totp-code', { key: k }), 404, 'not_found');
      u = ok2xx(await request(s.base, 'PATCH', '/credentials/b', { key: k, body: { sso_provider: null, remove_value_keys: ['otp_hint', 'password'] } }), 'clear all');
      eq([u.sso_provider, u.has_values, u.value_keys], [null, false, []], 'no values, no sso');

      // Another organization (with the feature on): 404 by id and by name, an empty list.
      const other = await newOrg(s, ADMIN, { name: 'other', plan: 'startup' });
      for (const [m, p] of [['GET', `/credentials/${c.id}`], ['GET', '/credentials/b'], ['GET', `/credentials/${c.id}/totp-code`],
        ['PATCH', `/credentials/${c.id}`], ['DELETE', `/credentials/${c.id}`], ['DELETE', '/credentials/b']]) {
        isError(await request(s.base, m, p, { key: other.key, body: m === 'PATCH' ? { name: 'stolen' } : undefined }), 404, 'not_found');
      }
      eq(ok2xx(await request(s.base, 'GET', '/credentials', { key: other.key }), 'other list'), [], 'the other org lists nothing');
      // The same name is free in the other organization.
      ok2xx(await request(s.base, 'POST', '/credentials', { key: other.key, body: { name: 'b', domain: 'x', values: {} } }), 'same name elsewhere');

      const d = await request(s.base, 'DELETE', '/credentials/b', { key: k });
      eq(d.status, 204, `delete: ${d.text}`);
      isError(await request(s.base, 'GET', `/credentials/${c.id}`, { key: k }), 404, 'not_found');
      isError(await request(s.base, 'DELETE', '/credentials/b', { key: k }), 404, 'not_found');
    }),
  },
  {
    name: 'issue 35.1: bad input is a 400 naming each field and its rule; a plan without features.credentials gets 403',
    fn: () => server(async (s) => {
      const r = await request(s.base, 'POST', '/credentials', { key: s.key, body: { name: '', values: { a: 1, ['k'.repeat(200)]: 'v' }, totp_secret: 'not base32!', sso_provider: 7, color: 'red' } });
      isError(r, 400, 'bad_request');
      const msgs = r.json.details.map((d) => d.message);
      for (const re of [/^name: must be a string of 1-255/, /^domain: is required/, /^values\.a: must be a string/, /^values\.k+: keys must be 1-128 bytes/,
        /^totp_secret: must be base32/, /^sso_provider: must be a string/, /^color: is not a field of a credential/]) {
        assert(msgs.some((m) => re.test(m)), `no detail matching ${re}: ${JSON.stringify(msgs)}`);
      }
      isError(await request(s.base, 'POST', '/credentials', { key: s.key, body: { name: 'x', domain: 'd', values: { p: 'v'.repeat(4097) } } }), 400, 'bad_request');
      const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']));
      const m = await request(s.base, 'POST', '/credentials', { key: s.key, body: { name: 'x', domain: 'd', values: many } });
      isError(m, 400, 'bad_request');
      assert(/values: must have at most 32 keys/.test(m.text), m.text);
      isError(await request(s.base, 'POST', '/credentials', { key: s.key, body: { name: 'x', domain: 'd' } }), 400, 'bad_request');
      const p = await request(s.base, 'PATCH', '/credentials/none', { key: s.key, body: { remove_value_keys: 'password', values: [] } });
      isError(p, 400, 'bad_request');
      assert(/remove_value_keys: must be an array/.test(p.text) && /values: must be an object/.test(p.text), p.text);

      const dev = await newOrg(s, ADMIN, { name: 'dev', plan: 'developer' });
      for (const [m2, path] of [['POST', '/credentials'], ['GET', '/credentials'], ['GET', '/credentials/x'], ['GET', '/credentials/x/totp-code'], ['DELETE', '/credentials/x']]) {
        const g = await request(s.base, m2, path, { key: dev.key, body: m2 === 'POST' ? { name: 'x', domain: 'd', values: {} } : undefined });
        isError(g, 403, 'feature_not_enabled');
        assert(/features\.credentials/.test(g.json.message), g.json.message);
      }
    }),
  },
  {
    name: 'issue 35.1: values and the TOTP secret are sealed at rest: neither appears in clear in the data folder (SQLite files) nor in the log',
    fn: () => withServer({ args: ['--admin-token', ADMIN] }, async (s) => {
      ok2xx(await request(s.base, 'POST', '/credentials', { key: s.key, body: { name: 'sealed', domain: 'd.example', values: { password: PASSWORD }, totp_secret: SECRET } }), 'create');
      ok2xx(await request(s.base, 'PATCH', '/credentials/sealed', { key: s.key, body: { values: { password2: PASSWORD } } }), 'update');
      ok2xx(await request(s.base, 'GET', '/credentials/sealed/totp-code', { key: s.key }), 'code');
      const scan = () => {
        const hits = [];
        const walk = (dir) => {
          for (const e of readdirSync(dir, { withFileTypes: true })) {
            const p = join(dir, e.name);
            if (e.isDirectory()) walk(p);
            else if (e.isFile()) {
              const b = readFileSync(p);
              if (b.includes(PASSWORD) || b.includes(SECRET)) hits.push(p.slice(s.dir.length));
            }
          }
        };
        walk(s.dir);
        return hits;
      };
      const files = readdirSync(s.dir).filter((n) => /\.db/.test(n));
      assert(files.length > 0, `SQLite files in the data folder: ${readdirSync(s.dir)}`);
      eq(scan(), [], 'files holding a secret in clear while running');
      // The access line is written after the answer: wait for it, then read the log.
      await waitFor(() => /access GET \/credentials\/sealed\/totp-code 200/.test(s.log), 'the access log lines');
      assert(/access PATCH \/credentials\/sealed 200/.test(s.log), 'the access log shows the path');
      noSecret('the server log', s.log);
      await s.stop();
      eq(scan(), [], 'files holding a secret in clear after stop');
    }),
  },
  {
    name: 'issue 35.1: one organization stores at most LIM_CREDENTIALS_PER_ORG credentials (429 with Retry-After); another organization still can',
    timeout: 240000,
    fn: () => server(async (s) => {
      const a = await newOrg(s, ADMIN, { name: 'filler', plan: 'startup' });
      const b = await newOrg(s, ADMIN, { name: 'other', plan: 'startup' });
      for (let i = 0; i < LIM_CREDENTIALS_PER_ORG; i += 20) {
        const batch = [];
        for (let j = i; j < i + 20; j++) batch.push(request(s.base, 'POST', '/credentials', { key: a.key, body: { name: `c${j}`, domain: 'd', values: { p: 'v' } } }));
        for (const r of await Promise.all(batch)) eq(r.status, 200, `create: ${r.text}`);
      }
      const over = await request(s.base, 'POST', '/credentials', { key: a.key, body: { name: 'one-more', domain: 'd', values: { p: 'v' } } });
      isError(over, 429);
      assert(Number(over.headers['retry-after']) > 0, `Retry-After: ${over.headers['retry-after']}`);
      assert(/credentials/.test(over.json.message), over.json.message);
      ok2xx(await request(s.base, 'POST', '/credentials', { key: b.key, body: { name: 'mine', domain: 'd', values: { p: 'v' } } }), 'the other org');
      eq((await request(s.base, 'DELETE', '/credentials/c0', { key: a.key })).status, 204, 'delete one');
      ok2xx(await request(s.base, 'POST', '/credentials', { key: a.key, body: { name: 'one-more', domain: 'd', values: { p: 'v' } } }), 'room again');
    }),
  },
];
