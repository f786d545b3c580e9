// browsers.fs.* through the official client (issue 20, part 1; SESSION_API.md
// section 2): every method's round trip on a real sandboxed session, with the
// wire facts the SDK relies on (201/200/204, bare arrays, FileInfo with Go
// FileMode strings, SSE FileSystemEvents) and escape attempts through the
// client's own calls.
import { toFile } from '@onkernel/sdk';

const bytes = async (r) => Buffer.from(await r.arrayBuffer());

export function register(t) {
  const { sdkTest, withServer, rejects, assert, eq, errors } = t;

  sdkTest('browsers.fs.writeFile', 'write, read back, info, list, mkdir, move, chmod, delete: the session\'s own files through every void method', async () => {
    await withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const id = b.session_id;
      const fs = client.browsers.fs;
      await fs.createDirectory(id, { path: '/tmp/work/sub', mode: '750' });
      await fs.writeFile(id, Buffer.from('hello fs\n'), { path: '/tmp/work/a.txt' });
      await fs.writeFile(id, 'second', { path: '/tmp/work/new/deep/b.txt', mode: '600' });
      eq((await bytes(await fs.readFile(id, { path: '/tmp/work/a.txt' }))).toString(), 'hello fs\n', 'readFile');
      const info = await fs.fileInfo(id, { path: '/tmp/work/a.txt' });
      eq(info.name, 'a.txt', 'name');
      eq(info.path, '/tmp/work/a.txt', 'path');
      eq(info.size_bytes, 9, 'size');
      eq(info.is_dir, false, 'is_dir');
      eq(info.mode, '-rw-r--r--', 'mode (Go FileMode, 644 by default)');
      assert(!Number.isNaN(Date.parse(info.mod_time)) && /T.*(Z|[+-]\d\d:\d\d)$/.test(info.mod_time), `RFC 3339 mod_time: ${info.mod_time}`);
      eq((await fs.fileInfo(id, { path: '/tmp/work/new/deep/b.txt' })).mode, '-rw-------', 'mode query applies');
      eq((await fs.fileInfo(id, { path: '/tmp/work/sub' })).mode, 'drwxr-x---', 'directory mode');
      eq((await fs.fileInfo(id, { path: '/tmp' })).mode, 'dtrwxrwxrwx', 'a sticky folder as Go prints it');
      const list = await fs.listFiles(id, { path: '/tmp/work' });
      assert(Array.isArray(list), 'a bare array');
      eq(list.map((e) => e.name).sort(), ['a.txt', 'new', 'sub'], 'entries');
      const sub = list.find((e) => e.name === 'sub');
      eq(sub.path, '/tmp/work/sub', 'listing path is dir/name');
      eq(sub.is_dir, true, 'is_dir');
      eq(sub.size_bytes, 0, 'folders have size 0');
      await fs.move(id, { src_path: '/tmp/work/a.txt', dest_path: '/tmp/work/sub/c.txt' });
      await rejects(() => fs.readFile(id, { path: '/tmp/work/a.txt' }), errors.NotFoundError, 404, 'moved away');
      eq((await bytes(await fs.readFile(id, { path: '/tmp/work/sub/c.txt' }))).toString(), 'hello fs\n', 'moved content');
      await fs.setFilePermissions(id, { path: '/tmp/work/sub/c.txt', mode: '4755', owner: 'kernel' });
      eq((await fs.fileInfo(id, { path: '/tmp/work/sub/c.txt' })).mode, '-rwxr-xr-x', 'setuid bit dropped');
      await rejects(() => fs.setFilePermissions(id, { path: '/tmp/work/sub/c.txt', mode: '644', owner: 'root' }), errors.BadRequestError, 400, 'owner root');
      await rejects(() => fs.setFilePermissions(id, { path: '/tmp/work/sub/c.txt', mode: '9z' }), errors.BadRequestError, 400, 'invalid mode');
      await fs.deleteFile(id, { path: '/tmp/work/sub/c.txt' });
      await rejects(() => fs.fileInfo(id, { path: '/tmp/work/sub/c.txt' }), errors.NotFoundError, 404, 'deleted');
      await rejects(() => fs.deleteFile(id, { path: '/tmp/work/sub/c.txt' }), errors.NotFoundError, 404, 'delete twice');
      await fs.deleteDirectory(id, { path: '/tmp/work' });
      await rejects(() => fs.listFiles(id, { path: '/tmp/work' }), errors.NotFoundError, 404, 'folder deleted');
      await rejects(() => fs.readFile(id, { path: 'tmp/x' }), errors.BadRequestError, 400, 'relative path');
      // Escapes: outside the session's files nothing exists.
      await rejects(() => fs.readFile(id, { path: '/tmp/../../etc/passwd' }), errors.NotFoundError, 404, '../../etc/passwd');
      await rejects(() => fs.readFile(id, { path: '/proc/1/root/etc/shadow' }), errors.NotFoundError, 404, '/proc/1/root');
      await rejects(() => fs.move(id, { src_path: '/etc/hostname', dest_path: '/tmp/h' }), errors.NotFoundError, 404, 'move from outside');
      await client.browsers.deleteByID(id);
    });
  }, 120000, ['browsers.fs.readFile', 'browsers.fs.fileInfo', 'browsers.fs.listFiles', 'browsers.fs.createDirectory',
    'browsers.fs.move', 'browsers.fs.setFilePermissions', 'browsers.fs.deleteFile', 'browsers.fs.deleteDirectory']);

  sdkTest('browsers.fs.upload', 'multipart upload of several files, then a zip of the folder and its extraction elsewhere; zip-slip refused', async () => {
    await withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const id = b.session_id;
      const fs = client.browsers.fs;
      await fs.upload(id, {
        files: [
          { file: await toFile(Buffer.from('one'), 'one.txt'), dest_path: '/tmp/up/one.txt' },
          { file: await toFile(Buffer.from([0, 1, 2, 255]), 'two.bin'), dest_path: '/home/kernel/up/two.bin' },
        ],
      });
      eq((await bytes(await fs.readFile(id, { path: '/tmp/up/one.txt' }))).toString(), 'one', 'first file');
      eq([...await bytes(await fs.readFile(id, { path: '/home/kernel/up/two.bin' }))], [0, 1, 2, 255], 'binary file');
      await fs.writeFile(id, 'deep', { path: '/tmp/up/d/e.txt' });
      const zip = await bytes(await fs.downloadDirZip(id, { path: '/tmp/up' }));
      eq(zip.subarray(0, 2).toString(), 'PK', 'a zip');
      await fs.uploadZip(id, { zip_file: await toFile(zip, 'up.zip'), dest_path: '/tmp/copy' });
      eq((await bytes(await fs.readFile(id, { path: '/tmp/copy/d/e.txt' }))).toString(), 'deep', 'extracted');
      eq((await bytes(await fs.readFile(id, { path: '/tmp/copy/one.txt' }))).toString(), 'one', 'extracted');
      const x = await toFile(Buffer.from('x'), 'x');
      await rejects(() => fs.upload(id, { files: [{ file: x, dest_path: 'relative' }] }),
        errors.BadRequestError, 400, 'relative dest_path');
      const notZip = await toFile(Buffer.from('not a zip'), 'z.zip');
      await rejects(() => fs.uploadZip(id, { zip_file: notZip, dest_path: '/tmp/z' }),
        errors.BadRequestError, 400, 'invalid zip file');
      await client.browsers.deleteByID(id);
    });
  }, 120000, ['browsers.fs.uploadZip', 'browsers.fs.downloadDirZip']);

  sdkTest('browsers.fs.watch.start', 'watch a folder: CREATE/WRITE/DELETE events as SSE, stop ends the stream, unknown watch 404', async () => {
    await withServer(async (s, client) => {
      const b = await client.browsers.create({ headless: true });
      const id = b.session_id;
      const fs = client.browsers.fs;
      await fs.createDirectory(id, { path: '/tmp/w' });
      const { watch_id } = await fs.watch.start(id, { path: '/tmp/w', recursive: true });
      assert(typeof watch_id === 'string' && watch_id, 'watch_id');
      const stream = await fs.watch.events(watch_id, { id });
      const seen = [];
      const reader = (async () => { for await (const ev of stream) seen.push(ev); })();
      await fs.createDirectory(id, { path: '/tmp/w/sub' });
      // A folder created under a recursive watch is watched too.
      const until = async (pred, what) => {
        const end = Date.now() + 10000;
        while (!seen.some(pred)) {
          if (Date.now() > end) throw new Error(`no ${what} event: ${JSON.stringify(seen)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      await until((e) => e.type === 'CREATE' && e.path === '/tmp/w/sub' && e.is_dir === true, 'CREATE sub');
      await fs.writeFile(id, 'x', { path: '/tmp/w/sub/f.txt' });
      await until((e) => e.type === 'CREATE' && e.path === '/tmp/w/sub/f.txt' && e.name === 'f.txt', 'CREATE f.txt in the new folder');
      await until((e) => e.type === 'WRITE' && e.path === '/tmp/w/sub/f.txt', 'WRITE');
      await fs.deleteFile(id, { path: '/tmp/w/sub/f.txt' });
      await until((e) => e.type === 'DELETE' && e.path === '/tmp/w/sub/f.txt', 'DELETE');
      await fs.watch.stop(watch_id, { id });
      await reader; // the stream ends once the watch is stopped
      await rejects(() => fs.watch.stop(watch_id, { id }), errors.NotFoundError, 404, 'stopped twice');
      await rejects(() => fs.watch.start(id, { path: '/etc' }), errors.NotFoundError, 404, 'watch outside');
      await client.browsers.deleteByID(id);
    });
  }, 120000, ['browsers.fs.watch.events', 'browsers.fs.watch.stop']);
}
