// Issue 35 item 2: vaults, credential items and the fill operation
// (KERNEL_API_NEWER.md 1.4 "Vaults", docs/credentials.md) with real headless
// Chromium and a login page served on loopback. The page reports every
// input/change event it sees back to the site, so the test sees what the
// fill wrote without the API ever returning a value.
import { withServer, startSite, createSession, request, assert, eq, isError, waitFor, ok2xx, newOrg, totp } from '../blackbox/lib.mjs';

const PASSWORD = 'vault-pw-8Jd2kQ-cleartext';
const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

const LOGIN = '<!doctype html><title>login-35</title><form>'
  + '<input id=user name=user autocomplete=username><input id=pw type=password>'
  + '<input id=otp inputmode=numeric><input id=ro readonly></form><script>'
  + 'for (const el of document.querySelectorAll("input")) for (const ev of ["input", "change"])'
  + ' el.addEventListener(ev, () => fetch(`/got?ev=${ev}&id=${el.id}&v=${encodeURIComponent(el.value)}`));'
  + 'document.title = "ready-35";</script>';

export const tests = [
  {
    name: 'issue 35.2: a browser created with vaults shows them; fill writes a credential item\'s values (and a TOTP code) into a loopback login page by selector, firing input and change; the answer and events show per-field outcomes, never a value',
    timeout: 90000,
    fn: async () => {
      const got = [];
      const site = await startSite((req, res) => {
        const u = new URL(req.url, 'http://x');
        if (u.pathname === '/got') got.push(Object.fromEntries(u.searchParams));
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(u.pathname === '/got' ? '' : LOGIN);
      });
      try {
        await withServer({ args: site.allow }, async (s) => {
          const api = (m, p, body) => request(s.base, m, p, { key: s.key, body });
          const v = ok2xx(await api('POST', '/vaults', { name: 'team' }), 'vault');
          eq((ok2xx(await api('POST', '/vaults', { name: 'team' }), 'upsert')).id, v.id, 'upsert by name returns the vault');
          const spec = { domain: '127.0.0.1', values: { username: 'ann', password: PASSWORD }, totp_secret: SECRET };
          const it = await api('PUT', '/vaults/team/items/login', { type: 'credential', spec });
          eq(it.status, 200, `put: ${it.text}`);
          assert(!it.text.includes(PASSWORD) && !it.text.includes(SECRET), `the item shows no value: ${it.text}`);
          eq(it.json.available_operations, ['fill'], 'operations');
          const id = await createSession(s, { start_url: `${site.url}/login`, vaults: [{ name: 'team' }] });
          // issue 35.2: the vaults linked at creation are on the Browser record.
          eq(ok2xx(await api('GET', `/browsers/${id}`), 'browser').vaults, [{ id: v.id, name: 'team' }], 'the linked vaults');
          // A fill from a vault not linked to the browser is refused (before any value is opened).
          const other = ok2xx(await api('POST', '/vaults', { name: 'not-linked' }), 'another vault');
          ok2xx(await api('PUT', '/vaults/not-linked/items/login', { type: 'credential', spec }), 'its item');
          const nl = await api('POST', `/vaults/${other.id}/items/login/operations`, { type: 'fill', browser_id: id, bindings: [{ selector: '#pw', field: 'password' }] });
          isError(nl, 403, 'vault_not_attached');
          assert(/browser_id: .*not created with vault/.test(nl.json.message), nl.text);
          const op = (body) => api('POST', `/vaults/${v.id}/items/login/operations`, { type: 'fill', browser_id: id, ...body });
          // The page may still be loading: fill until the page is the login form.
          const r = await waitFor(async () => {
            const x = await op({ bindings: [{ selector: '#user', field: 'username' }] });
            return x.status === 200 && x.json.fields[0].status === 'ok' ? x : null;
          }, 'the login page in the browser', 30000, 300);
          eq(r.json.status, 'ok', r.text);
          const f = await op({ bindings: [
            { selector: '#pw', field: 'password' }, { selector: '#otp', field: 'totp_code' },
            { selector: '#missing', field: 'password' }, { selector: '#user', field: 'nope' },
            { selector: '#ro', field: 'username' }] });
          eq(f.status, 200, f.text);
          assert(!f.text.includes(PASSWORD) && !f.text.includes(SECRET), `the fill answer shows no value: ${f.text}`);
          eq(f.json.status, 'partial', 'some fields failed');
          eq(f.json.fields.map((x) => [x.selector, x.status, x.reason || '']), [
            ['#pw', 'ok', ''], ['#otp', 'ok', ''], ['#missing', 'failed', 'not_found'],
            ['#user', 'failed', 'no_such_field'], ['#ro', 'failed', 'not_fillable']], 'per-field outcomes');
          const seen = (elId, ev) => got.find((g) => g.id === elId && g.ev === ev);
          await waitFor(() => seen('pw', 'change') && seen('otp', 'change'), 'the page\'s events');
          eq(seen('user', 'input').v, 'ann', 'username via input');
          eq(seen('user', 'change').v, 'ann', 'username via change');
          eq(seen('pw', 'input').v, PASSWORD, 'the password reached the page');
          const code = seen('otp', 'input').v;
          const now = Date.now() / 1000;
          assert([totp(SECRET, now), totp(SECRET, now - 30)].includes(code), `a current TOTP code: ${code}`);
          assert(!seen('ro', 'input'), 'a readonly field is left alone');
          const ev = ok2xx(await api('GET', '/vaults/team/items/login/events', undefined), 'events');
          eq(ev.map((e) => e.type), ['created', 'fill', 'fill'], 'who used what');
          eq(ev[2].browser_id, id, 'the browser of a fill');
          assert(!JSON.stringify(ev).includes(PASSWORD), 'events show no value');
          assert(!s.log.includes(PASSWORD) && !s.log.includes(SECRET), 'the log shows no value');
          // A session that is not the key's, and other operations.
          isError(await op({ browser_id: 'nosuchbrowser', bindings: [{ selector: '#pw', field: 'password' }] }), 404, 'not_found');
          isError(await api('POST', '/vaults/team/items/login/operations', { type: 'prepare_checkout' }), 409, 'operation_not_available');
          await request(s.base, 'DELETE', `/browsers/${id}`, { key: s.key });
        });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 35.2: items: identical PUT returns the item, a conflicting spec is 409, PATCH needs the current version (null clears a value), wallet and card are 501 naming them; delete; 400 naming fields; another org sees nothing',
    timeout: 60000,
    fn: () => withServer({ args: ['--admin-token', 'vault-admin'] }, async (s) => {
      const api = (m, p, body, key = s.key) => request(s.base, m, p, { key, body });
      ok2xx(await api('POST', '/vaults', { name: 'v' }), 'vault');
      const spec = { values: { username: 'u', password: PASSWORD } };
      const a = ok2xx(await api('PUT', '/vaults/v/items/k', { type: 'credential', spec }), 'put');
      eq(a.version, 1, 'version 1');
      eq((ok2xx(await api('PUT', '/vaults/v/items/k', { type: 'credential', spec }), 'identical put')).version, 1, 'identical PUT');
      isError(await api('PUT', '/vaults/v/items/k', { type: 'credential', spec: { values: { username: 'other' } } }), 409, 'conflict');
      isError(await api('PATCH', '/vaults/v/items/k', { version: 7, spec: { values: { password: 'x' } } }), 409, 'version_conflict');
      const p = ok2xx(await api('PATCH', '/vaults/v/items/k', { version: 1, spec: { values: { username: null, pin: '1234' } } }), 'patch');
      eq([p.version, p.spec.value_keys.sort()], [2, ['password', 'pin']], 'patched');
      // An item holding the most keys (32) may still change one of them;
      // a new key past the cap is 400 naming spec.values.
      const full = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, 'v']));
      const f32 = ok2xx(await api('PUT', '/vaults/v/items/full', { type: 'credential', spec: { values: full } }), 'an item of 32 keys');
      eq(ok2xx(await api('PATCH', '/vaults/v/items/full', { version: f32.version, spec: { values: { k0: 'changed' } } }), 'a full item changes a key').version, f32.version + 1, 'patched at the cap');
      const over = await api('PATCH', '/vaults/v/items/full', { version: f32.version + 1, spec: { values: { k32: 'new' } } });
      isError(over, 400, 'bad_request');
      assert(/spec\.values: an item holds at most 32 keys/.test(over.text), over.text);
      eq((await api('DELETE', '/vaults/v/items/full')).status, 204, 'delete the full item');
      for (const type of ['wallet', 'card']) {
        const w = await api('PUT', '/vaults/v/items/w', { type, spec: {} });
        isError(w, 501, 'not_implemented');
        assert(w.json.message.includes(type), w.json.message);
      }
      const bad = await api('PUT', '/vaults/v/items/b', { type: 'credential', spec: { values: { p: 1 }, color: 'x' }, extra: 1 });
      isError(bad, 400, 'bad_request');
      for (const re of [/spec\.values\.p: must be a string/, /spec\.color: is not a field/, /extra: is not a field/]) assert(re.test(bad.text), `${re}: ${bad.text}`);
      const f = await api('POST', '/vaults/v/items/k/operations', { type: 'fill', bindings: [] });
      isError(f, 400, 'bad_request');
      assert(/browser_id: is required/.test(f.text) && /bindings: is required/.test(f.text), f.text);
      const org = await newOrg(s, 'vault-admin', { name: 'o2', plan: 'startup' });
      isError(await api('GET', '/vaults/v', undefined, org.key), 404, 'not_found');
      isError(await api('GET', '/vaults/v/items/k', undefined, org.key), 404, 'not_found');
      eq(ok2xx(await api('GET', '/vaults', undefined, org.key), 'list'), [], 'nothing of the other org');
      eq(ok2xx(await api('GET', '/vaults/v/items', undefined), 'items').map((x) => x.key), ['k'], 'items');
      eq((await api('DELETE', '/vaults/v/items/k')).status, 204, 'delete item');
      isError(await api('GET', '/vaults/v/items/k'), 404, 'not_found');
      eq((await api('DELETE', '/vaults/v')).status, 204, 'delete vault');
      isError(await api('GET', '/vaults/v'), 404, 'not_found');
      // features.vaults gates; limits.max_vaults caps (developer: 1 vault).
      const dev = await newOrg(s, 'vault-admin', { name: 'dev', plan: 'developer' });
      const g = await api('POST', '/vaults', { name: 'x' }, dev.key);
      isError(g, 403, 'feature_not_enabled');
      assert(/features\.vaults/.test(g.json.message), g.json.message);
      const one = await newOrg(s, 'vault-admin', { name: 'one', plan: 'developer', overrides: { features: { vaults: { enabled: true } } } });
      ok2xx(await api('POST', '/vaults', { name: 'first' }, one.key), 'the one vault');
      ok2xx(await api('POST', '/vaults', { name: 'first' }, one.key), 'its upsert is no new vault');
      const l = await api('POST', '/vaults', { name: 'second' }, one.key);
      isError(l, 403, 'limit_exceeded');
      assert(/limits\.max_vaults \(1\)/.test(l.json.message), l.json.message);
    }),
  },
];
