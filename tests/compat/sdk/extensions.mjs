// Extensions through the official client (issue 19; SESSION_API.md section
// 8): client.extensions.* and browsers.loadExtensions. The helpers that build
// archives (a zip writer, a CRX3 wrapper, the test extension) are exported
// for tests/compat/82_extensions.test.mjs too.
import { chromium } from 'playwright-core';
import { toFile } from '@onkernel/sdk';
import { createHash } from 'node:crypto';
import http from 'node:http';

// ---- archives ----------------------------------------------------------------

const CRC = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// A zip (stored, no compression) of entries [{name, data, symlink?, dir?}]:
// enough to build good archives and hostile ones (zip-slip names, symlinks).
export function makeZip(entries) {
  const locals = [], centrals = [];
  let off = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const data = Buffer.from(e.data ?? '');
    const crc = crc32(data);
    const lh = Buffer.alloc(30);
    lh.writeUInt32LE(0x04034b50, 0); lh.writeUInt16LE(20, 4); lh.writeUInt16LE(0x800, 6);
    lh.writeUInt16LE(0, 8); lh.writeUInt32LE(0, 10); lh.writeUInt32LE(crc, 14);
    lh.writeUInt32LE(data.length, 18); lh.writeUInt32LE(data.length, 22);
    lh.writeUInt16LE(name.length, 26); lh.writeUInt16LE(0, 28);
    const ch = Buffer.alloc(46);
    ch.writeUInt32LE(0x02014b50, 0); ch.writeUInt16LE(0x031e, 4); ch.writeUInt16LE(20, 6);
    ch.writeUInt16LE(0x800, 8); ch.writeUInt16LE(0, 10); ch.writeUInt32LE(0, 12);
    ch.writeUInt32LE(crc, 16); ch.writeUInt32LE(data.length, 20); ch.writeUInt32LE(data.length, 24);
    ch.writeUInt16LE(name.length, 28);
    const mode = e.symlink ? 0o120777 : e.dir ? 0o40755 : 0o100644;
    ch.writeUInt32LE(((mode << 16) | (e.dir ? 0x10 : 0)) >>> 0, 38);
    ch.writeUInt32LE(off, 42);
    locals.push(lh, name, data);
    centrals.push(ch, name);
    off += lh.length + name.length + data.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(entries.length, 8); end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12); end.writeUInt32LE(off, 16);
  return Buffer.concat([...locals, cd, end]);
}

// A CRX3 package around a zip: "Cr24", version 3, header length, a header
// (opaque here: the server does not verify signatures), then the zip.
export function makeCrx3(zip) {
  const header = Buffer.from('0a0212000a', 'hex'); // a few protobuf bytes
  const h = Buffer.alloc(12);
  h.write('Cr24', 0, 'latin1'); h.writeUInt32LE(3, 4); h.writeUInt32LE(header.length, 8);
  return Buffer.concat([h, header, zip]);
}

// The test extension: manifest v3 with a content script that marks every
// page it runs on (document.documentElement.dataset.ext = <mark>).
export function markExtension(mark = 'loaded', name = 'mark') {
  return makeZip([
    { name: 'manifest.json', data: JSON.stringify({
      manifest_version: 3, name, version: '1.0',
      content_scripts: [{ matches: ['<all_urls>'], js: ['mark.js'], run_at: 'document_start' }],
    }) },
    { name: 'mark.js', data: `document.documentElement.dataset.ext = ${JSON.stringify(mark)};` },
  ]);
}

export const sha256 = (b) => createHash('sha256').update(b).digest('hex');

// A page on loopback the session may open (pass site.allow as server args).
export async function markSite() {
  const srv = http.createServer((q, r) => { r.setHeader('content-type', 'text/html'); r.end('<html><body>page</body></html>'); });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const hostport = `127.0.0.1:${srv.address().port}`;
  return { url: `http://${hostport}/`, allow: ['--allow-loopback', hostport], close: () => srv.close() };
}

// The mark the page carries once loaded in the browser at cdpUrl (null when
// no extension marked it). Opens a fresh page each time: after a restart the
// old connection is gone.
export async function pageMark(cdpUrl, url) {
  const br = await chromium.connectOverCDP(cdpUrl);
  try {
    const ctx = br.contexts()[0];
    const pg = await ctx.newPage();
    await pg.goto(url);
    const v = await pg.evaluate(() => document.documentElement.dataset.ext ?? null);
    await pg.close().catch(() => {});
    return v;
  } finally {
    await br.close().catch(() => {});
  }
}

// ---- SDK tests ---------------------------------------------------------------

export function register(t) {
  const { sdkTest, withServer, rejects, assert, eq, errors } = t;
  const { BadRequestError, ConflictError, NotFoundError } = errors;

  sdkTest('extensions.upload', 'a zip with a name -> 201 Extension {id, created_at, size_bytes, checksum, last_used_at, name}; duplicate name -> ConflictError without retries; not an extension -> BadRequestError', (ctx) =>
    withServer(async (s, client) => {
      const zip = markExtension();
      const x = await client.extensions.upload({ file: await toFile(zip, 'mark.zip'), name: 'mark-ext' });
      assert(/^[a-z0-9]{24}$/.test(x.id), `id ${x.id}`);
      eq([x.name, x.size_bytes, x.checksum, x.last_used_at], ['mark-ext', zip.length, sha256(zip), null], 'record');
      assert(!Number.isNaN(Date.parse(x.created_at)), 'created_at');
      const err = await rejects(async () => client.extensions.upload({ file: await toFile(markExtension(), 'b.zip'), name: 'mark-ext' }),
        ConflictError, 409, 'duplicate name');
      assert(/mark-ext/.test(err.error.message), err.error.message);
      eq(err.headers.get('x-should-retry'), 'false', 'x-should-retry');
      await rejects(async () => client.extensions.upload({ file: await toFile(Buffer.from('not a zip'), 'x.zip') }),
        BadRequestError, 400, 'not a zip');
    }), 30000);

  sdkTest('extensions.list', 'every extension of the project, paged with X-Has-More, name and query filters', (ctx) =>
    withServer(async (s, client) => {
      for (const n of ['alpha', 'beta', 'gamma']) await client.extensions.upload({ file: await toFile(markExtension(n), `${n}.zip`), name: n });
      const all = [];
      for await (const x of client.extensions.list({ limit: 2 })) all.push(x.name);
      eq(all, ['alpha', 'beta', 'gamma'], 'all pages in upload order');
      const page = await client.extensions.list({ limit: 2 });
      eq(page.getPaginatedItems().length, 2, 'first page');
      eq(page.hasNextPage(), true, 'more pages');
      eq((await client.extensions.list({ name: 'BETA' })).getPaginatedItems().map((x) => x.name), ['beta'], 'name: exact, case-insensitive');
      eq((await client.extensions.list({ query: 'mm' })).getPaginatedItems().map((x) => x.name), ['gamma'], 'query: substring');
    }), 30000);

  sdkTest('extensions.get', 'by id and by name; unknown -> NotFoundError', (ctx) =>
    withServer(async (s, client) => {
      const x = await client.extensions.upload({ file: await toFile(markExtension(), 'm.zip'), name: 'meta' });
      eq(await client.extensions.get(x.id), x, 'by id');
      eq(await client.extensions.get('meta'), x, 'by name');
      await rejects(() => client.extensions.get('nope'), NotFoundError, 404, 'unknown');
    }), 30000);

  sdkTest('extensions.download', 'the uploaded bytes exactly, by id and by name; unknown -> NotFoundError', (ctx) =>
    withServer(async (s, client) => {
      const zip = markExtension('dl');
      const x = await client.extensions.upload({ file: await toFile(zip, 'm.zip'), name: 'dl' });
      for (const ref of [x.id, 'dl']) {
        const r = await client.extensions.download(ref);
        eq(sha256(Buffer.from(await r.arrayBuffer())), sha256(zip), `bytes by ${ref}`);
      }
      await rejects(() => client.extensions.download('nope'), NotFoundError, 404, 'unknown');
    }), 30000);

  sdkTest('extensions.delete', 'by name -> 204, then gone (get 404); unknown -> NotFoundError', (ctx) =>
    withServer(async (s, client) => {
      const x = await client.extensions.upload({ file: await toFile(markExtension(), 'm.zip'), name: 'gone' });
      await client.extensions.delete('gone');
      await rejects(() => client.extensions.get(x.id), NotFoundError, 404, 'after delete');
      await rejects(() => client.extensions.delete('gone'), NotFoundError, 404, 'twice');
    }), 30000);

  sdkTest('extensions.downloadFromChromeStore', 'a CRX3 from a local fake store (BROWSERD_CHROME_STORE_URL) -> the zip inside; a store URL without an id -> BadRequestError', async (ctx) => {
    const zip = markExtension('store');
    const id = 'abcdefghijklmnopabcdefghijklmnop';
    const seen = [];
    const store = http.createServer((q, r) => {
      seen.push(q.url);
      if (q.url.startsWith('/update')) { r.writeHead(302, { location: '/pkg.crx' }); r.end(); return; }
      r.end(makeCrx3(zip));
    });
    await new Promise((r) => store.listen(0, '127.0.0.1', r));
    try {
      await withServer(async (s, client) => {
        const res = await client.extensions.downloadFromChromeStore({ url: `https://chromewebstore.google.com/detail/mark/${id}`, os: 'linux' });
        eq(sha256(Buffer.from(await res.arrayBuffer())), sha256(zip), 'the zip inside the CRX');
        assert(seen.some((u) => u.includes(`id=${id}`) && u.includes('os=linux')), `the store got the id and os: ${seen}`);
        await rejects(() => client.extensions.downloadFromChromeStore({ url: 'https://example.com/x' }), BadRequestError, 400, 'not a store URL');
      }, { env: { BROWSERD_CHROME_STORE_URL: `http://127.0.0.1:${store.address().port}/update?id={id}&os={os}` } });
    } finally { store.close(); }
  }, 30000);

  sdkTest('browsers.loadExtensions', 'two extensions (parts in the SDK order) on a running session -> 201; the restarted browser runs their content scripts on a loopback page; a bad name -> BadRequestError', async (ctx) => {
    const site = await markSite();
    try {
      await withServer(async (s, client) => {
        const b = await client.browsers.create({ headless: true });
        eq(await pageMark(b.cdp_ws_url, site.url), null, 'no mark before loading');
        await client.browsers.loadExtensions(b.session_id, { extensions: [
          { name: 'first', zip_file: await toFile(makeZip([{ name: 'manifest.json', data: JSON.stringify({ manifest_version: 3, name: 'noop', version: '1' }) }]), 'a.zip') },
          { name: 'second', zip_file: await toFile(markExtension('sdk-load'), 'b.zip') },
        ] });
        eq(await pageMark(b.cdp_ws_url, site.url), 'sdk-load', 'the content script marks the page');
        await rejects(async () => client.browsers.loadExtensions(b.session_id, { extensions: [{ name: '..', zip_file: await toFile(markExtension(), 'c.zip') }] }),
          BadRequestError, 400, 'name ..');
        await client.browsers.deleteByID(b.session_id);
      }, { args: site.allow });
    } finally { site.close(); }
  }, 90000);
}
