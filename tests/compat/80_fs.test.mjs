// Issue 20, part 1: browsers.fs.* on the session's own files (docs/fs.md),
// with real Chromium. What the browser sees and what fs sees are the same
// files: a file written through fs is owned by the session's user, read by a
// page (file://) and put into a page's file input; a download from a page
// shows up through fs. Escapes fail: "..", links planted by the session
// towards /etc, the server's data folder or the root's parent, /proc/1/root,
// zip entries with "..", absolute names or outward links, move at both ends;
// another session's files are invisible; another org's key gets 404; a plan
// without file_io gets 403; setuid bits never land.
import { existsSync, lchownSync, lstatSync, mkdirSync, readdirSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { chromium } from 'playwright-core';
import { startServer, startSite, request, assert, eq, waitFor } from '../blackbox/lib.mjs';

const ADMIN = 'fs-admin-token';
const api = (s, method, path, body, key = s.key) => request(s.base, method, path, { key, body });
const raw = (s, method, path, data, headers = {}, key = s.key) =>
  request(s.base, method, path, { key, raw: data, headers });
const q = encodeURIComponent;

async function withServer(fn, args = []) {
  const s = await startServer({ env: { BROWSERD_ADMIN_TOKEN: ADMIN }, args });
  try {
    assert(/sandbox: on/.test(s.log), `the server runs sessions sandboxed:\n${s.log}`);
    await fn(s);
  } finally { await s.stop(); s.cleanup(); }
}

async function create(s, key = s.key) {
  const r = await api(s, 'POST', '/browsers', { headless: true }, key);
  eq(r.status, 200, `create: ${r.text}`);
  return r.json;
}

// The session's files as the host sees them (browsers.c: DATA/sessions/ID.root).
const hostRoot = (s, id) => join(s.dir, 'sessions', `${id}.root`);

const write = (s, id, path, data, mode, key) =>
  raw(s, 'PUT', `/browsers/${id}/fs/write_file?path=${q(path)}${mode ? `&mode=${mode}` : ''}`, data,
    { 'content-type': 'application/octet-stream' }, key);
const read = (s, id, path, key) => api(s, 'GET', `/browsers/${id}/fs/read_file?path=${q(path)}`, undefined, key);

// A multipart body as the SDK sends it (parts in the order given).
function multipart(parts) {
  const boundary = `----fs${Date.now()}`;
  const chunks = [];
  for (const p of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"` +
      `${p.filename ? `; filename="${p.filename}"` : ''}\r\n${p.filename ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`));
    chunks.push(Buffer.from(p.data));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}

// A stored (uncompressed) zip whose entries carry unix modes: {name, data,
// mode} (mode includes the file type, e.g. 0o120777 for a link whose data is
// its target).
function zip(entries) {
  const local = [], central = [];
  let off = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name), data = Buffer.from(e.data || '');
    const crc = crc32(data) >>> 0;
    const lh = Buffer.alloc(30);
    lh.writeUInt32LE(0x04034b50, 0); lh.writeUInt16LE(20, 4); lh.writeUInt32LE(crc, 14);
    lh.writeUInt32LE(data.length, 18); lh.writeUInt32LE(data.length, 22); lh.writeUInt16LE(name.length, 26);
    const ch = Buffer.alloc(46);
    ch.writeUInt32LE(0x02014b50, 0); ch.writeUInt16LE((3 << 8) | 20, 4); ch.writeUInt16LE(20, 6);
    ch.writeUInt32LE(crc, 16); ch.writeUInt32LE(data.length, 20); ch.writeUInt32LE(data.length, 24);
    ch.writeUInt16LE(name.length, 28); ch.writeUInt32LE(((e.mode || 0o100644) << 16) >>> 0, 38); ch.writeUInt32LE(off, 42);
    local.push(lh, name, data);
    central.push(ch, name);
    off += 30 + name.length + data.length;
  }
  const cd = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(entries.length, 8); end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12); end.writeUInt32LE(off, 16);
  return Buffer.concat([...local, cd, end]);
}

const uploadZip = (s, id, dest, z) => {
  const m = multipart([{ name: 'dest_path', data: dest }, { name: 'zip_file', filename: 'a.zip', data: z }]);
  return raw(s, 'POST', `/browsers/${id}/fs/upload_zip`, m.body, { 'content-type': m.type });
};

async function page(b) {
  const br = await chromium.connectOverCDP(b.cdp_ws_url);
  const ctx = br.contexts()[0];
  const pg = ctx.pages()[0] || await ctx.newPage();
  return { br, pg };
}

// Every path component under `dir` on the host (to show nothing landed outside).
// The running browser creates and removes its own temporary files meanwhile
// (CI once saw a cache index vanish mid-walk): an entry gone between the
// listing and its lstat was not the test's, and is skipped.
function tree(dir) {
  const out = [];
  const gone = (e) => { if (e.code !== 'ENOENT') throw e; return null; };
  const walk = (d, rel) => {
    let names;
    try { names = readdirSync(d); } catch (e) { names = gone(e) || []; }
    for (const n of names) {
      const p = join(d, n);
      let st;
      try { st = lstatSync(p); } catch (e) { st = gone(e); }
      if (!st) continue;
      out.push(`${rel}${n}`);
      if (st.isDirectory()) walk(p, `${rel}${n}/`);
    }
  };
  walk(dir, '');
  return out;
}

export const tests = [
  {
    name: 'issue 20 fs: a file written through fs belongs to the session\'s user, a page reads it (file://) and uploads it through a file input',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((rq, rs) => { rs.setHeader('content-type', 'text/html'); rs.end('<input type=file id=f>'); });
      try {
        await withServer(async (s) => {
          const b = await create(s);
          const id = b.session_id;
          eq((await write(s, id, '/home/kernel/report.txt', 'quarterly numbers')).status, 201, 'write_file answers 201');
          const host = join(hostRoot(s, id), 'home/kernel/report.txt');
          const st = statSync(host);
          const owner = statSync(join(hostRoot(s, id), 'home/kernel')).uid;
          assert(owner >= 1100000, `the session's home belongs to its sandbox user (${owner})`);
          eq(st.uid, owner, 'the new file belongs to the session\'s user, not root');
          eq(st.gid, owner, 'and to its group');
          eq(st.mode & 0o7777, 0o644, 'mode 644 whatever the server\'s umask');
          const { br, pg } = await page(b);
          try {
            await pg.goto('file:///home/kernel/report.txt');
            eq(await pg.evaluate(() => document.body.innerText.trim()), 'quarterly numbers', 'the page reads it over file://');
            await pg.goto(`${site.url}/`);
            const cdp = await pg.context().newCDPSession(pg);
            const { root } = await cdp.send('DOM.getDocument', {});
            const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: '#f' });
            await cdp.send('DOM.setFileInputFiles', { nodeId, files: ['/home/kernel/report.txt'] });
            eq(await pg.evaluate(() => document.getElementById('f').files[0].text()), 'quarterly numbers',
              'the in-session path goes into the page\'s file input');
          } finally { await br.close(); }
        }, site.allow);
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 20 fs: a download from a page (download attribute, Content-Disposition attachment) shows up in /home/kernel/Downloads through list_files and read_file',
    timeout: 90000,
    fn: async () => {
      const site = await startSite((rq, rs) => {
        if (rq.url === '/file') {
          rs.setHeader('content-type', 'text/csv');
          rs.setHeader('content-disposition', 'attachment; filename="report.csv"');
          rs.end('a,b\n1,2\n');
          return;
        }
        rs.setHeader('content-type', 'text/html');
        rs.end('<a id=d href="/file" download="report.csv">get</a>');
      });
      try {
        await withServer(async (s) => {
          const b = await create(s);
          const id = b.session_id;
          const { br, pg } = await page(b);
          try {
            // Playwright points downloads at a folder of its own machine when
            // it connects; 'default' gives the browser its own behaviour back,
            // which saves to $HOME/Downloads (HOME is /home/kernel).
            const bc = await br.newBrowserCDPSession();
            await bc.send('Browser.setDownloadBehavior', { behavior: 'default' });
            await pg.goto(`${site.url}/`);
            await pg.click('#d');
            const list = await waitFor(async () => {
              const r = await api(s, 'GET', `/browsers/${id}/fs/list_files?path=${q('/home/kernel/Downloads')}`);
              eq(r.status, 200, r.text);
              return r.json.find((e) => e.name === 'report.csv' && e.size_bytes === 8) && r.json;
            }, 'report.csv in /home/kernel/Downloads');
            eq(list.find((e) => e.name === 'report.csv').path, '/home/kernel/Downloads/report.csv', 'its path');
            eq((await read(s, id, '/home/kernel/Downloads/report.csv')).text, 'a,b\n1,2\n', 'its content');
          } finally { await br.close(); }
        }, site.allow);
      } finally { site.close(); }
    },
  },
  {
    name: 'issue 20 fs: escapes fail: .., links the session plants towards /etc, the data folder and above its root, /proc/1/root, move at both ends',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const hr = hostRoot(s, id);
      eq((await write(s, id, '/tmp/own.txt', 'mine')).status, 201, 'control: the session\'s own file');
      eq((await read(s, id, '/tmp/own.txt')).text, 'mine', 'control: read back');
      for (const p of ['/tmp/../../etc/passwd', '/../../../etc/shadow', '/etc/passwd', '/proc/1/root/etc/shadow',
        '/proc/self/root/etc/passwd', `${s.dir}/bootstrap-api-key`, `/tmp/../../${id}.root/tmp/own.txt`]) {
        const r = await read(s, id, p);
        eq(r.status, 404, `read ${p}: ${r.text}`);
        assert(!r.text.includes('root:') && !r.text.includes(s.key), `nothing of ${p} leaks`);
      }
      // Links planted inside the session's files (as its processes could):
      // each resolves inside the root, never on the host.
      const owner = statSync(join(hr, 'home/kernel')).uid;
      symlinkSync('/etc', join(hr, 'tmp/etc-link'));
      symlinkSync(s.dir, join(hr, 'tmp/data-link'));
      symlinkSync('../../../../../../', join(hr, 'tmp/up-link'));
      for (const l of ['etc-link', 'data-link', 'up-link']) lchownSync(join(hr, 'tmp', l), owner, owner);
      for (const p of ['/tmp/etc-link/passwd', '/tmp/data-link/bootstrap-api-key', '/tmp/up-link/etc/passwd']) {
        const r = await read(s, id, p);
        eq(r.status, 404, `read through a link ${p}: ${r.text}`);
      }
      eq((await read(s, id, '/tmp/up-link/tmp/own.txt')).text, 'mine', 'an upward link stops at the session\'s root');
      // The data folder's path resolves inside the session's own /tmp, where
      // nothing of it exists (issue 29.16: the browser's home is bound at
      // /profile, so bwrap makes no mount point at its host path there): the
      // write finds no folder, and never lands in the server's folder.
      eq((await write(s, id, '/tmp/data-link/planted', 'x')).status, 404, 'write through a link to the data folder');
      assert(!existsSync(join(s.dir, 'planted')), 'nothing planted in the data folder');
      assert(!existsSync(join(hr, s.dir)), 'the host path of the data folder does not exist in the session\'s root');
      const lst = await api(s, 'GET', `/browsers/${id}/fs/list_files?path=${q('/tmp/etc-link')}`);
      eq(lst.status, 404, `list through a link to /etc: ${lst.text}`);
      const perm = await api(s, 'PUT', `/browsers/${id}/fs/set_file_permissions`, { path: '/tmp/etc-link/passwd', mode: '777' });
      eq(perm.status, 404, `chmod through a link: ${perm.text}`);
      eq(statSync('/etc/passwd').mode & 0o777, 0o644, '/etc/passwd untouched');
      // move at both ends
      eq((await api(s, 'PUT', `/browsers/${id}/fs/move`, { src_path: '/etc/hostname', dest_path: '/tmp/h' })).status, 404, 'move from /etc');
      eq((await api(s, 'PUT', `/browsers/${id}/fs/move`, { src_path: '/tmp/own.txt', dest_path: '/tmp/etc-link/own.txt' })).status, 404, 'move into /etc through a link');
      const up = await api(s, 'PUT', `/browsers/${id}/fs/move`, { src_path: '/tmp/own.txt', dest_path: '/../../../own.txt' });
      eq(up.status, 403, `move above the root lands at the root, which is not the session's to write: ${up.text}`);
      assert(!existsSync(join(s.dir, 'own.txt')) && !existsSync(join(s.dir, 'sessions', 'own.txt')), 'nothing moved out');
      // delete through a link removes the link's target inside the root only
      eq((await api(s, 'PUT', `/browsers/${id}/fs/delete_directory`, { path: '/tmp/etc-link' })).status, 400, 'a link is not a folder to delete');
      assert(existsSync('/etc/hostname') || existsSync('/etc/passwd'), '/etc untouched');
      eq((await api(s, 'PUT', `/browsers/${id}/fs/delete_file`, { path: '/tmp/data-link' })).status, 200, 'deleting a link removes the link');
      assert(existsSync(join(s.dir, 'bootstrap-api-key')), 'not what it points to');
      // setuid/setgid never land
      eq((await write(s, id, '/tmp/suid', '#!/bin/sh\n', '6755')).status, 201, 'write with 6755');
      eq(statSync(join(hr, 'tmp/suid')).mode & 0o7777, 0o755, 'setuid/setgid dropped');
      eq(statSync(join(hr, 'tmp/suid')).uid, owner, 'owned by the session\'s user');
    }),
  },
  {
    name: 'issue 20 fs: zip-slip fails: entries with .., absolute names, links leaving the folder; setuid dropped from entry modes',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const hr = hostRoot(s, id);
      const before = tree(s.dir).filter((p) => !p.includes(`${id}.root/`) && !p.startsWith(`sessions/${id}/`));
      for (const [what, entries] of [
        ['a ../ entry', [{ name: '../../../../slip.txt', data: 'x' }]],
        ['a nested ../ entry', [{ name: 'a/../../slip.txt', data: 'x' }]],
        ['an absolute entry', [{ name: `${s.dir}/slip.txt`, data: 'x' }]],
        ['a link to /etc', [{ name: 'etc', data: '/etc', mode: 0o120777 }, { name: 'etc/slip.txt', data: 'x' }]],
        ['a link climbing out', [{ name: 'up', data: '../../..', mode: 0o120777 }]],
      ]) {
        const r = await uploadZip(s, id, '/tmp/z', zip(entries));
        eq(r.status, 400, `${what}: ${r.text}`);
        assert(/invalid zip file/.test(r.json.message), `${what}: ${r.json.message}`);
      }
      const after = tree(s.dir).filter((p) => !p.includes(`${id}.root/`) && !p.startsWith(`sessions/${id}/`));
      eq(after.filter((p) => /slip/.test(p)), [], 'nothing written outside the session');
      eq(before.filter((p) => /slip/.test(p)), [], 'control');
      assert(!existsSync('/etc/slip.txt') && !existsSync('/slip.txt'), 'nothing on the host');
      const ok = await uploadZip(s, id, '/tmp/z', zip([
        { name: 'bin/tool', data: 'run', mode: 0o104755 },
        { name: 'bin/link', data: 'tool', mode: 0o120777 },
        { name: 'doc/', mode: 0o42755 },
      ]));
      eq(ok.status, 201, `a good zip: ${ok.text}`);
      eq(statSync(join(hr, 'tmp/z/bin/tool')).mode & 0o7777, 0o755, 'setuid dropped from an entry');
      eq(statSync(join(hr, 'tmp/z/doc')).mode & 0o7777, 0o755, 'setgid dropped from a folder entry');
      eq((await read(s, id, '/tmp/z/bin/link')).text, 'run', 'a link inside the folder works');
    }),
  },
  {
    name: 'issue 20 fs: upload pairs parts by index whatever their order (SESSION_API.md 0.2); a missing half, an unknown field or a relative dest_path is a 400',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const up = (parts) => {
        const m = multipart(parts);
        return raw(s, 'POST', `/browsers/${id}/fs/upload`, m.body, { 'content-type': m.type });
      };
      const r = await up([
        { name: 'files[1][dest_path]', data: '/tmp/u/one.txt' },
        { name: 'files[0][dest_path]', data: '/home/kernel/zero.txt' },
        { name: 'files[1][file]', filename: 'one.txt', data: 'ONE' },
        { name: 'files[0][file]', filename: 'zero.txt', data: 'ZERO' },
      ]);
      eq(r.status, 201, r.text);
      eq(r.text, '', 'an empty body');
      eq((await read(s, id, '/home/kernel/zero.txt')).text, 'ZERO', 'files[0]');
      eq((await read(s, id, '/tmp/u/one.txt')).text, 'ONE', 'files[1]');
      for (const [what, parts, msg] of [
        ['a file without dest_path', [{ name: 'files[0][file]', filename: 'a', data: 'a' }], /each item must include file and dest_path/],
        ['an unknown field', [{ name: 'other', data: 'x' }], /invalid form field: other/],
        ['a relative dest_path', [{ name: 'files[0][file]', filename: 'a', data: 'a' }, { name: 'files[0][dest_path]', data: 'tmp/a' }], /dest_path must be an absolute path/],
        ['nothing', [], /no files provided/],
      ]) {
        const e = await up(parts);
        eq(e.status, 400, `${what}: ${e.text}`);
        assert(msg.test(e.json.message), `${what}: ${e.json.message}`);
      }
      const bad = await raw(s, 'POST', `/browsers/${id}/fs/upload`, 'x', { 'content-type': 'application/json' });
      eq(bad.status, 400, `not multipart: ${bad.text}`);
    }),
  },
  {
    name: 'issue 20 fs: another session\'s files are invisible, another org\'s key gets 404, a plan without file_io gets 403',
    timeout: 90000,
    fn: () => withServer(async (s) => {
      const a = await create(s);
      const b = await create(s);
      eq((await write(s, b.session_id, '/tmp/secret.txt', 'b only')).status, 201, 'b writes');
      eq((await read(s, a.session_id, '/tmp/secret.txt')).status, 404, 'a does not see b\'s /tmp');
      const la = await api(s, 'GET', `/browsers/${a.session_id}/fs/list_files?path=/tmp`);
      assert(!la.json.some((e) => e.name === 'secret.txt'), `a's listing: ${la.text}`);
      eq((await read(s, a.session_id, `/tmp/../${b.session_id}.root/tmp/secret.txt`)).status, 404, 'no way across through ..');
      const org = (await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: 'other', plan: 'enterprise' } })).json;
      const key = (await request(s.base, 'POST', `/admin/orgs/${org.id}/api_keys`, { key: ADMIN, body: { name: 'k' } })).json.key;
      const id = b.session_id;
      for (const [m, p, body] of [
        ['GET', `/browsers/${id}/fs/read_file?path=/tmp/secret.txt`],
        ['GET', `/browsers/${id}/fs/list_files?path=/tmp`],
        ['GET', `/browsers/${id}/fs/file_info?path=/tmp/secret.txt`],
        ['GET', `/browsers/${id}/fs/download_dir_zip?path=/tmp`],
        ['PUT', `/browsers/${id}/fs/delete_file`, { path: '/tmp/secret.txt' }],
        ['PUT', `/browsers/${id}/fs/move`, { src_path: '/tmp/secret.txt', dest_path: '/tmp/x' }],
        ['POST', `/browsers/${id}/fs/watch`, { path: '/tmp' }],
      ]) {
        const r = await api(s, m, p, body, key);
        eq(r.status, 404, `${m} ${p} with another org's key: ${r.text}`);
      }
      eq((await write(s, id, '/tmp/secret.txt', 'overwritten', undefined, key)).status, 404, 'write with another org\'s key');
      eq((await read(s, id, '/tmp/secret.txt')).text, 'b only', 'b\'s file unchanged');
      const off = (await request(s.base, 'POST', '/admin/orgs', { key: ADMIN, body: { name: 'nofs', plan: 'enterprise', overrides: { features: { file_io: { enabled: false } } } } })).json;
      const okey = (await request(s.base, 'POST', `/admin/orgs/${off.id}/api_keys`, { key: ADMIN, body: { name: 'k' } })).json.key;
      const c = await create(s, okey);
      const r = await api(s, 'GET', `/browsers/${c.session_id}/fs/list_files?path=/tmp`, undefined, okey);
      eq(r.status, 403, `file_io off: ${r.text}`);
      assert(/file_io/.test(r.json.message), r.json.message);
      eq((await write(s, c.session_id, '/tmp/x', 'x', undefined, okey)).status, 403, 'write with file_io off');
    }),
  },
  {
    name: 'issue 20 fs: without the session sandbox (BROWSERD_SANDBOX=off) every fs call is a 503 sandbox_required, never a file of the server\'s user',
    timeout: 60000,
    fn: async () => {
      const s = await startServer({ env: { BROWSERD_SANDBOX: 'off' } });
      try {
        const b = await create(s);
        const id = b.session_id;
        for (const r of [
          await api(s, 'GET', `/browsers/${id}/fs/list_files?path=/tmp`),
          await read(s, id, '/etc/hostname'),
          await write(s, id, '/tmp/x', 'x'),
          await api(s, 'POST', `/browsers/${id}/fs/watch`, { path: '/tmp' }),
        ]) {
          eq(r.status, 503, r.text);
          eq(r.json.code, 'sandbox_required', 'code');
        }
      } finally { await s.stop(); s.cleanup(); }
    },
  },
  {
    name: 'issue 20 fs: the 1 GiB quota: a write past it is a 413 insufficient_storage naming the quota, not a 500; deleting frees it',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const chunk = Buffer.alloc(60 * 1024 * 1024, 7);
      let r, n = 0;
      const t0 = Date.now();
      for (; n < 24; n++) {
        r = await write(s, id, `/tmp/fill-${n}`, chunk);
        if (r.status !== 201) break;
      }
      const ms = Date.now() - t0;
      console.log(`  measured: ${n} writes of 60 MiB through write_file in ${ms} ms (${Math.round((n * 60 * 1000) / ms)} MiB/s)`);
      assert(n >= 15 && n < 24, `the quota stops the writes near 1 GiB (${n} x 60 MiB went in)`);
      eq(r.status, 413, `past the quota: ${r.text}`);
      eq(r.json.code, 'insufficient_storage', 'code');
      assert(/full \(1024 MiB quota\)/.test(r.json.message), r.json.message);
      const t1 = Date.now();
      const rd = await read(s, id, '/tmp/fill-5');
      eq(rd.status, 200, 'read a 60 MiB file (streamed past 8 MiB)');
      eq(rd.text.length, chunk.length, 'all of it');
      assert(rd.text === chunk.toString('utf8'), 'the same bytes');
      console.log(`  measured: read_file of 60 MiB in ${Date.now() - t1} ms`);
      for (let i = 0; i < 3; i++) eq((await api(s, 'PUT', `/browsers/${id}/fs/delete_file`, { path: `/tmp/fill-${i}` })).status, 200, 'delete');
      eq((await write(s, id, '/tmp/after', chunk)).status, 201, 'room again after deleting');
      await api(s, 'DELETE', `/browsers/${id}`);
    }),
  },
  {
    name: 'issue 20 fs: download_dir_zip streams a large folder (extracts back identical), survives a client leaving mid-way; a file is 400, a missing folder 404',
    timeout: 120000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const big = Buffer.alloc(40 * 1024 * 1024);
      for (let i = 0; i < big.length; i += 4096) big.writeUInt32LE((i * 2654435761) >>> 0, i);
      eq((await write(s, id, '/tmp/big/a.bin', big)).status, 201, 'write a');
      eq((await write(s, id, '/tmp/big/sub/b.bin', big.subarray(0, 1234567))).status, 201, 'write b');
      const { default: http } = await import('node:http');
      const url = `${s.base}/browsers/${id}/fs/download_dir_zip?path=${q('/tmp/big')}`;
      const headers = { authorization: `Bearer ${s.key}` };
      // A client that leaves after the first bytes.
      await new Promise((resolve, reject) => {
        const rq = http.get(url, { headers }, (rs) => {
          eq(rs.statusCode, 200, 'status');
          rs.once('data', () => { rq.destroy(); resolve(); });
        });
        rq.on('error', (e) => (e.code === 'ECONNRESET' ? resolve() : reject(e)));
      });
      const t0 = Date.now();
      const zipBytes = await new Promise((resolve, reject) => {
        http.get(url, { headers }, (rs) => {
          eq(rs.headers['content-type'], 'application/zip', 'content type');
          const parts = [];
          rs.on('data', (d) => parts.push(d));
          rs.on('end', () => resolve(Buffer.concat(parts)));
        }).on('error', reject);
      });
      console.log(`  measured: download_dir_zip of 41 MiB in ${Date.now() - t0} ms (${zipBytes.length} bytes of zip)`);
      eq(zipBytes.subarray(0, 2).toString(), 'PK', 'a zip');
      eq((await uploadZip(s, id, '/tmp/back', zipBytes)).status, 201, 'extracts');
      const back = await read(s, id, '/tmp/back/a.bin');
      assert(back.text === big.toString('utf8'), 'a.bin comes back identical');
      const info = await api(s, 'GET', `/browsers/${id}/fs/file_info?path=${q('/tmp/back/sub/b.bin')}`);
      eq(info.json.size_bytes, 1234567, 'b.bin size');
      const f = await api(s, 'GET', `/browsers/${id}/fs/download_dir_zip?path=${q('/tmp/big/a.bin')}`);
      eq(f.status, 400, `a file: ${f.text}`);
      assert(/not a directory/.test(f.json.message), f.json.message);
      eq((await api(s, 'GET', `/browsers/${id}/fs/download_dir_zip?path=/etc`)).status, 404, '/etc');
    }),
  },
  {
    name: 'issue 20 fs: a watch dies with its session: the events stream ends when the session is deleted',
    timeout: 60000,
    fn: () => withServer(async (s) => {
      const b = await create(s);
      const id = b.session_id;
      const w = await api(s, 'POST', `/browsers/${id}/fs/watch`, { path: '/tmp' });
      eq(w.status, 201, w.text);
      const { default: http } = await import('node:http');
      let body = '', ended = false;
      await new Promise((resolve, reject) => {
        const rq = http.get(`${s.base}/browsers/${id}/fs/watch/${w.json.watch_id}/events`, { headers: { authorization: `Bearer ${s.key}` } }, (rs) => {
          eq(rs.statusCode, 200, 'events stream');
          eq(rs.headers['content-type'], 'text/event-stream', 'content type');
          rs.on('data', (d) => { body += d; });
          rs.on('end', () => { ended = true; });
          resolve();
        });
        rq.on('error', reject);
      });
      eq((await write(s, id, '/tmp/seen.txt', 'x')).status, 201, 'write');
      await waitFor(() => /"type":"CREATE","name":"seen.txt","path":"\/tmp\/seen.txt","is_dir":false/.test(body), `a CREATE frame (${body})`);
      assert(/^data: \{/.test(body) && !/event:/.test(body), `frames are data: lines only: ${body}`);
      // At most 16 watches per session; each inotify instance is charged to the
      // session's own user, not to the server's root (docs/fs.md).
      for (let i = 1; i < 16; i++) eq((await api(s, 'POST', `/browsers/${id}/fs/watch`, { path: '/home/kernel' })).status, 201, `watch ${i + 1}`);
      const over = await api(s, 'POST', `/browsers/${id}/fs/watch`, { path: '/tmp' });
      eq(over.status, 429, `a 17th watch: ${over.text}`);
      assert(/at most 16 watches/.test(over.json.message), over.json.message);
      const del = await api(s, 'DELETE', `/browsers/${id}`);
      assert(del.status >= 200 && del.status < 300, `delete the session: ${del.status}`);
      await waitFor(() => ended, 'the stream ends with the session');
    }),
  },
];
