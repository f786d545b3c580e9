// Issue 19: extensions. A tiny extension built here (manifest v3, a content
// script that marks every page: document.documentElement.dataset.ext) is
// uploaded and then seen working, by behaviour: a loopback page opened over
// CDP carries the mark in a session created with the extension, and after
// loadExtensions on a running one, while a session without it has no mark.
// Around that: archives that are not extensions or try to escape (zip-slip,
// absolute paths, symlinks) are refused by name; a session whose user
// planted a symlink where extensions are unpacked cannot turn the unpack
// into a write outside its files; the plan gates (403) and the stored count
// limit; the Chrome Web Store path against a local fake store and an
// unreachable one (502); another project's and another org's extensions are
// invisible.
import { existsSync, readdirSync } from 'node:fs';
import http from 'node:http';
import { startServer, request, assert, eq, isError, waitFor } from '../blackbox/lib.mjs';
import { makeZip, makeCrx3, markExtension, markSite, pageMark, sha256 } from './sdk/extensions.mjs';

const ADMIN = 'ext-admin-token';
const api = (s, method, path, body, key = s.key, headers = {}) => request(s.base, method, path, { key, body, headers });

// A multipart body of parts [{name, data, filename?}] in the given order.
async function multipart(s, method, path, parts, key = s.key, headers = {}) {
  const fd = new FormData();
  for (const p of parts) {
    if (p.filename) fd.append(p.name, new Blob([p.data]), p.filename);
    else fd.append(p.name, p.data);
  }
  const r = await fetch(new URL(path, s.base), { method, body: fd, headers: { authorization: `Bearer ${key}`, ...headers } });
  const text = await r.text();
  let json;
  try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
  return { status: r.status, headers: Object.fromEntries(r.headers), text, json };
}

const upload = (s, zip, name, key, headers) =>
  multipart(s, 'POST', '/extensions', [{ name: 'file', data: zip, filename: 'ext.zip' }, ...(name ? [{ name: 'name', data: name }] : [])], key, headers);

async function withServer(fn, { env = {}, args = [] } = {}) {
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN, ...env }, args });
  try { await fn(s); } finally { await s.stop(); s.cleanup(); }
}

const admin = (s, method, path, body) => request(s.base, method, path, { body, headers: { authorization: `Bearer ${ADMIN}` } });

// A new org (plan startup: extensions on, 100 stored) with a key.
async function newOrg(s, overrides) {
  const o = await admin(s, 'POST', '/admin/orgs', { name: 'other', plan: 'startup', ...(overrides ? { overrides } : {}) });
  assert(o.status < 300, `create org: ${o.text}`);
  const k = await admin(s, 'POST', `/admin/orgs/${o.json.id}/api_keys`, {});
  assert(k.status < 300, `create key: ${k.text}`);
  return { org: o.json, key: k.json.key };
}

async function create(s, body, key = s.key) {
  const r = await api(s, 'POST', '/browsers', { headless: true, ...body }, key);
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

const manifest = (v) => ({ name: 'manifest.json', data: typeof v === 'string' ? v : JSON.stringify(v) });

export const tests = [
  {
    name: 'issue 19 create: a session created with extensions [{name}] runs the content script (the page is marked); a session without it is not; unknown extension -> 404 naming it',
    timeout: 90000,
    fn: async () => {
      const site = await markSite();
      try {
        await withServer(async (s) => {
          const up = await upload(s, markExtension('at-create'), 'marker');
          eq(up.status, 201, up.text);
          const plain = await create(s, {});
          const withExt = await create(s, { extensions: [{ name: 'marker' }] });
          eq(await pageMark(withExt.cdp_ws_url, site.url), 'at-create', 'the session with the extension marks the page');
          eq(await pageMark(plain.cdp_ws_url, site.url), null, 'the session without it does not');
          const meta = await api(s, 'GET', `/extensions/${up.json.id}/metadata`);
          assert(meta.json.last_used_at !== null, `last_used_at is set once loaded: ${meta.text}`);
          const bad = await api(s, 'POST', '/browsers', { headless: true, extensions: [{ name: 'marker' }, { id: 'nosuchextensionid0000000' }] });
          isError(bad, 404, 'extension_not_found');
          assert(/nosuchextensionid0000000/.test(bad.json.message), bad.json.message);
          for (const b of [plain, withExt]) eq((await api(s, 'DELETE', `/browsers/${b.session_id}`)).status, 204, 'delete');
        }, { args: site.allow });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 19 loadExtensions: parts in reverse order (zip before name, index 1 before 0) -> 201 and the restarted browser marks the page; a name already loaded -> 400; a symlink planted at /home/kernel/extensions -> 400 and nothing written outside the session',
    timeout: 120000,
    fn: async () => {
      const site = await markSite();
      try {
        await withServer(async (s) => {
          const b = await create(s, {});
          eq(await pageMark(b.cdp_ws_url, site.url), null, 'no mark before');
          const noop = makeZip([manifest({ manifest_version: 3, name: 'noop', version: '1' })]);
          const r = await multipart(s, 'POST', `/browsers/${b.session_id}/extensions`, [
            { name: 'extensions[1][zip_file]', data: markExtension('reloaded'), filename: 'b.zip' },
            { name: 'extensions[0][zip_file]', data: noop, filename: 'a.zip' },
            { name: 'extensions[1][name]', data: 'marker' },
            { name: 'extensions[0][name]', data: 'noop' },
          ]);
          eq(r.status, 201, r.text);
          eq(await pageMark(b.cdp_ws_url, site.url), 'reloaded', 'the restarted browser runs the content script');
          const again = await multipart(s, 'POST', `/browsers/${b.session_id}/extensions`, [
            { name: 'extensions[0][name]', data: 'marker' }, { name: 'extensions[0][zip_file]', data: noop, filename: 'a.zip' }]);
          isError(again, 400);
          assert(/already exists: marker/.test(again.json.message), again.json.message);

          // The session's user owns /home/kernel: a fresh session plants a
          // symlink to a host folder where uploads are unpacked.
          const c = await create(s, {});
          const ln = await api(s, 'POST', `/browsers/${c.session_id}/process/exec`, { command: '/bin/ln', args: ['-s', s.dir, '/home/kernel/extensions'] });
          eq(ln.status, 200, `exec ln: ${ln.text}`);
          eq(ln.json.exit_code, 0, `ln: ${Buffer.from(ln.json.stderr_b64 || '', 'base64')}`);
          const before = readdirSync(s.dir).sort();
          const esc = await multipart(s, 'POST', `/browsers/${c.session_id}/extensions`, [
            { name: 'extensions[0][name]', data: 'escape' }, { name: 'extensions[0][zip_file]', data: markExtension(), filename: 'e.zip' }]);
          isError(esc, 400);
          assert(/symbolic link/.test(esc.json.message), esc.json.message);
          eq(readdirSync(s.dir).sort(), before, 'nothing written in the data folder');
          assert(!existsSync(`${s.dir}/escape`), 'no escape folder');
        }, { args: site.allow });
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 19 loadExtensions: malformed calls -> 400 naming the field (no parts, name without zip, bad name, index past 20, not an extension); another org\'s session -> 404',
    timeout: 60000,
    fn: async () => {
      await withServer(async (s) => {
        const b = await create(s, {});
        const path = `/browsers/${b.session_id}/extensions`;
        const zip = markExtension();
        const cases = [
          [[{ name: 'other', data: 'x' }], /other/],
          [[{ name: 'extensions[0][name]', data: 'a' }], /both name and zip_file/],
          [[{ name: 'extensions[0][name]', data: 'a/b' }, { name: 'extensions[0][zip_file]', data: zip, filename: 'z' }], /invalid extension name/],
          [[{ name: 'extensions[0][name]', data: '..' }, { name: 'extensions[0][zip_file]', data: zip, filename: 'z' }], /invalid extension name/],
          [[{ name: 'extensions[20][name]', data: 'a' }, { name: 'extensions[20][zip_file]', data: zip, filename: 'z' }], /at most 20/],
          [[{ name: 'extensions[0][name]', data: 'a' }, { name: 'extensions[0][zip_file]', data: Buffer.from('nope'), filename: 'z' }], /invalid zip file/],
          [[{ name: 'extensions[0][name]', data: 'a' }, { name: 'extensions[0][zip_file]', data: zip, filename: 'z' },
            { name: 'extensions[1][name]', data: 'a' }, { name: 'extensions[1][zip_file]', data: zip, filename: 'z' }], /duplicate name/],
        ];
        for (const [parts, re] of cases) {
          const r = await multipart(s, 'POST', path, parts);
          isError(r, 400);
          assert(re.test(JSON.stringify(r.json)), `${re}: ${r.text}`);
        }
        const other = await newOrg(s);
        const r = await multipart(s, 'POST', path, [{ name: 'extensions[0][name]', data: 'a' }, { name: 'extensions[0][zip_file]', data: zip, filename: 'z' }], other.key);
        isError(r, 404);
      });
    },
  },
  {
    name: 'issue 19 upload: archives that are not extensions or try to escape -> 400 naming the reason; name pattern; duplicate name -> 409 x-should-retry false',
    timeout: 60000,
    fn: async () => {
      await withServer(async (s) => {
        const good = manifest({ manifest_version: 3, name: 'x', version: '1' });
        const cases = [
          [Buffer.from('plain text'), /not a zip/],
          [makeCrx3(markExtension()), /CRX/],
          [makeZip([{ name: 'x.js', data: '1' }]), /no manifest\.json/],
          [makeZip([{ name: 'sub/manifest.json', data: good.data }]), /no manifest\.json at the top/],
          [makeZip([manifest('{not json')]), /manifest\.json is not JSON/],
          [makeZip([manifest('[1]')]), /not a JSON object/],
          [makeZip([manifest({ manifest_version: 4, name: 'x', version: '1' })]), /manifest_version must be 2 or 3/],
          [makeZip([good, { name: '../evil.js', data: 'x' }]), /zip-slip/],
          [makeZip([good, { name: 'a/../../evil.js', data: 'x' }]), /zip-slip/],
          [makeZip([good, { name: '/etc/evil', data: 'x' }]), /absolute path/],
          [makeZip([good, { name: 'a\\..\\evil', data: 'x' }]), /backslash|zip-slip/],
          [makeZip([good, { name: 'link', data: '/etc/passwd', symlink: true }]), /symbolic link/],
        ];
        for (const [zip, re] of cases) {
          const r = await upload(s, zip);
          isError(r, 400);
          assert(re.test(r.json.message), `${re}: ${r.json.message}`);
        }
        const many = [good, ...Array.from({ length: 5001 }, (_, i) => ({ name: `f${i}.js`, data: '' }))];
        const r = await upload(s, makeZip(many));
        isError(r, 400);
        assert(/more than 5000 entries/.test(r.json.message), r.json.message);
        isError(await upload(s, markExtension(), 'bad name!'), 400);
        eq((await upload(s, markExtension(), 'dup')).status, 201, 'first');
        const dup = await upload(s, markExtension(), 'dup');
        isError(dup, 409);
        eq(dup.headers['x-should-retry'], 'false', 'x-should-retry');
        const list = await api(s, 'GET', '/extensions');
        eq(list.json.map((x) => x.name), ['dup'], 'only the accepted upload is stored');
      });
    },
  },
  {
    name: 'issue 19 plan: browser_extensions off -> 403 on upload, create with extensions, loadExtensions, from_chrome_store; max_stored_per_org 1 -> the second upload 403 naming the limit',
    timeout: 60000,
    fn: async () => {
      await withServer(async (s) => {
        const off = await newOrg(s, { features: { browser_extensions: { enabled: false } } });
        isError(await upload(s, markExtension(), 'x', off.key), 403, 'feature_not_enabled');
        const c = await api(s, 'POST', '/browsers', { headless: true, extensions: [{ name: 'x' }] }, off.key);
        isError(c, 403, 'feature_not_enabled');
        assert(/browser_extensions/.test(c.json.message), c.json.message);
        const b = await create(s, {}, off.key);
        isError(await multipart(s, 'POST', `/browsers/${b.session_id}/extensions`,
          [{ name: 'extensions[0][name]', data: 'a' }, { name: 'extensions[0][zip_file]', data: markExtension(), filename: 'z' }], off.key), 403);
        isError(await api(s, 'GET', `/extensions/from_chrome_store?url=${'a'.repeat(32)}`, undefined, off.key), 403);
        const one = await newOrg(s, { features: { browser_extensions: { enabled: true, max_stored_per_org: 1 } } });
        eq((await upload(s, markExtension(), 'first', one.key)).status, 201, 'first upload');
        const second = await upload(s, markExtension(), 'second', one.key);
        isError(second, 403);
        assert(/max_stored_per_org \(1\)/.test(second.json.message), second.json.message);
        const unl = await newOrg(s, { features: { browser_extensions: { enabled: true, max_stored_per_org: null } } });
        for (const n of ['a', 'b', 'c']) eq((await upload(s, markExtension(), n, unl.key)).status, 201, `null = unlimited (${n})`);
      });
    },
  },
  {
    name: 'issue 19 isolation: another project\'s and another org\'s extensions are invisible (list, metadata, download, delete 404) and cannot be loaded (404)',
    timeout: 60000,
    fn: async () => {
      await withServer(async (s) => {
        const mine = await upload(s, markExtension(), 'mine');
        eq(mine.status, 201, mine.text);
        const other = await newOrg(s);
        const proj = await api(s, 'POST', '/org/projects', { name: 'p2' });
        eq(proj.status < 300, true, proj.text);
        const asProject = { 'x-kernel-project-id': proj.json.id };
        for (const [key, headers, who] of [[other.key, {}, 'another org'], [s.key, asProject, 'another project']]) {
          const l = await request(s.base, 'GET', '/extensions', { key, headers });
          eq(l.json, [], `${who}: list`);
          for (const ref of [mine.json.id, 'mine']) {
            isError(await request(s.base, 'GET', `/extensions/${ref}/metadata`, { key, headers }), 404);
            isError(await request(s.base, 'GET', `/extensions/${ref}`, { key, headers }), 404);
            isError(await request(s.base, 'DELETE', `/extensions/${ref}`, { key, headers }), 404);
          }
          isError(await request(s.base, 'POST', '/browsers', { key, headers, body: { headless: true, extensions: [{ id: mine.json.id }] } }), 404);
        }
        eq((await api(s, 'GET', `/extensions/${mine.json.id}/metadata`)).status, 200, 'still there for its owner');
      });
    },
  },
  {
    name: 'issue 19 from_chrome_store: a CRX3 behind a redirect of a local fake store -> the zip inside; an unreachable store -> 502 naming it; a URL without an id or a bad os -> 400',
    timeout: 60000,
    fn: async () => {
      const zip = markExtension('store');
      const id = 'ponmlkjihgfedcbaponmlkjihgfedcba';
      const store = http.createServer((q, r) => {
        if (q.url.startsWith('/update')) { r.writeHead(302, { location: `/files/${id}.crx` }); r.end(); return; }
        r.setHeader('transfer-encoding', 'chunked');
        r.write(makeCrx3(zip).subarray(0, 10));
        r.end(makeCrx3(zip).subarray(10));
      });
      await new Promise((r) => store.listen(0, '127.0.0.1', r));
      const port = store.address().port;
      try {
        await withServer(async (s) => {
          const r = await request(s.base, 'GET', `/extensions/from_chrome_store?url=${encodeURIComponent(`https://chromewebstore.google.com/detail/some-name/${id}?hl=en`)}`, { key: s.key });
          eq(r.status, 200, r.text);
          const got = await fetch(`${s.base}/extensions/from_chrome_store?url=${id}`, { headers: { authorization: `Bearer ${s.key}` } });
          eq(sha256(Buffer.from(await got.arrayBuffer())), sha256(zip), 'the zip inside the CRX');
          isError(await api(s, 'GET', '/extensions/from_chrome_store?url=https%3A%2F%2Fevil.example%2Fx'), 400);
          isError(await api(s, 'GET', `/extensions/from_chrome_store?url=${id}&os=beos`), 400);
        }, { env: { BROWSERD_CHROME_STORE_URL: `http://127.0.0.1:${port}/update?x={id}` } });
      } finally { store.close(); }
      await withServer(async (s) => {
        const r = await api(s, 'GET', `/extensions/from_chrome_store?url=${id}`);
        isError(r, 502, 'bad_gateway');
        eq(r.headers['x-should-retry'], 'false', 'not retried by the SDK');
        assert(/could not be reached/.test(r.json.message) && /127\.0\.0\.1/.test(r.json.message), r.json.message);
      }, { env: { BROWSERD_CHROME_STORE_URL: `http://127.0.0.1:${port}/update?x={id}` } });
    },
  },
];

// Pools (wired by the lead from docs/extensions.md "Pools"): selectors
// resolved in extension_ids, echoed as sent, loaded into the pool's browsers.
tests.push({
  name: 'issue 19 pools: PATCH extensions [{name}] -> extension_ids resolved and the selectors echoed; an acquired browser marks the page; the extension cannot be deleted while named (409); unknown -> 404; [] clears',
  timeout: 120000,
  fn: async () => {
    const site = await markSite();
    try {
      await withServer(async (s) => {
        const up = await upload(s, markExtension('pool'), 'marker');
        eq(up.status, 201, up.text);
        const c = await api(s, 'POST', '/browser_pools', { size: 1, headless: true, fill_rate_per_minute: 6000 });
        eq(c.status, 200, c.text);
        eq(c.json.extension_ids, [], 'none at first');
        // A browser of the old configuration is ready; the PATCH discards it.
        await waitFor(async () => (await api(s, 'GET', `/browser_pools/${c.json.id}`)).json.available_count === 1, 'the first pool browser', 30000, 150);
        const p = await api(s, 'PATCH', `/browser_pools/${c.json.id}`, { extensions: [{ name: 'marker' }], discard_all_idle: true });
        eq(p.status, 200, p.text);
        eq(p.json.extension_ids, [up.json.id], 'extension_ids resolved');
        eq(p.json.browser_pool_config.extensions, [{ name: 'marker' }], 'the selectors as sent');
        const del = await api(s, 'DELETE', '/extensions/marker');
        isError(del, 409, 'extension_in_use');
        const a = await api(s, 'POST', `/browser_pools/${c.json.id}/acquire`, { acquire_timeout_seconds: 30 });
        eq(a.status, 200, a.text);
        const mk = await pageMark(a.json.cdp_ws_url, site.url);
        eq(mk, 'pool', 'the pool browser runs the content script');
        isError(await api(s, 'PATCH', `/browser_pools/${c.json.id}`, { extensions: [{ name: 'nope' }] }), 404, 'extension_not_found');
        const cleared = await api(s, 'PATCH', `/browser_pools/${c.json.id}`, { extensions: [] });
        eq(cleared.json.extension_ids, [], 'cleared');
        eq((await api(s, 'DELETE', '/extensions/marker')).status, 204, 'deletable once no pool names it');
        const off = await newOrg(s, { features: { browser_extensions: { enabled: false } } });
        isError(await api(s, 'POST', '/browser_pools', { size: 1, extensions: [{ name: 'x' }] }, off.key), 403, 'feature_not_enabled');
      }, { args: site.allow });
    } finally { site.close(); }
  },
});
