// The audit log through the pinned client (issue 33 item 7;
// KERNEL_API_NEWER.md 1.4 "Audit logs"): auditLogs.list with its
// page-token pagination and filters, exportChunk's raw chunk, and download,
// which checks each chunk's X-Content-Sha256 and X-Row-Count.
import { gunzipSync } from 'node:zlib';

export function register(t) {
  const { sdkTest, withServer, assert, eq, errors } = t;
  const range = () => ({ start: new Date(Date.now() - 3600e3).toISOString(), end: new Date(Date.now() + 3600e3).toISOString() });
  // Makes n changes (profiles) and waits until the audit log lists them.
  async function changes(client, n) {
    for (let i = 0; i < n; i++) await client.profiles.create({ name: `audited-${i}` });
    const end = Date.now() + 15000;
    for (;;) {
      const page = await client.auditLogs.list({ ...range(), limit: 100 });
      if (page.getPaginatedItems().length >= n) return;
      assert(Date.now() < end, 'gave up waiting for the audit entries');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  sdkTest('auditLogs.list', 'auto-pagination by X-Next-Page-Token (limit 2), newest first; method and exclude_method (a comma list); a missing end -> BadRequestError', async () => {
    await withServer(async (s, client) => {
      await changes(client, 5);
      const all = [];
      for await (const e of client.auditLogs.list({ ...range(), limit: 2 })) all.push(e);
      eq(all.length, 5, `entries: ${JSON.stringify(all)}`);
      for (const e of all) {
        eq([e.method, e.path, e.route, e.status, e.auth_strategy], ['POST', '/profiles', '/profiles', 200, 'api_key'], 'fields');
        assert(typeof e.user_id === 'string' && e.user_id.length > 0, 'user_id');
      }
      const ts = all.map((e) => Date.parse(e.timestamp));
      assert(ts.every((x, i) => i === 0 || x <= ts[i - 1]), 'newest first');
      eq((await client.auditLogs.list({ ...range(), method: 'DELETE' })).getPaginatedItems().length, 0, 'method');
      eq((await client.auditLogs.list({ ...range(), exclude_method: ['GET', 'POST'] })).getPaginatedItems().length, 0, 'exclude_method');
      let err;
      try { await client.auditLogs.list({ start: range().start }); } catch (e) { err = e; }
      assert(err instanceof errors.BadRequestError, `no end: ${err && err.status}`);
    });
  });

  sdkTest('auditLogs.exportChunk', 'a jsonl.gz chunk as a raw Response: gzip JSON lines, X-Row-Count, X-Has-More, X-Next-Cursor', async () => {
    await withServer(async (s, client) => {
      await changes(client, 3);
      const res = await client.auditLogs.exportChunk({ ...range(), format: 'jsonl.gz', limit: 2 });
      const lines = gunzipSync(Buffer.from(await res.arrayBuffer())).toString().trim().split('\n').map((l) => JSON.parse(l));
      eq(lines.length, 2, 'two entries');
      eq(res.headers.get('x-row-count'), '2', 'X-Row-Count');
      eq(res.headers.get('x-has-more'), 'true', 'X-Has-More');
      assert(res.headers.get('x-next-cursor'), 'X-Next-Cursor');
    });
  });

  sdkTest('auditLogs.download', 'every chunk verified (X-Content-Sha256) and written; the rows add up', async () => {
    await withServer(async (s, client) => {
      await changes(client, 3);
      const parts = [];
      const result = await client.auditLogs.download({ ...range(), limit: 2 }, { write: (b) => { parts.push(Buffer.from(b)); } });
      eq([result.rows, result.chunks], [3, 2], `result ${JSON.stringify(result)}`);
      const text = parts.map((p) => gunzipSync(p).toString()).join('');
      eq(text.trim().split('\n').length, 3, 'three JSON lines');
    });
  });
}
