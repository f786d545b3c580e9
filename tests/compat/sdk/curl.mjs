// browsers.curl through the official client (issue 20, part 4).
import http from 'node:http';

export function register(t) {
  const { sdkTest, withServer, assert, eq, errors } = t;
  sdkTest('browsers.curl', 'GET and POST through the browser: status, multi-valued headers and body as data; a refused target is an APIError 502', async () => {
    const srv = http.createServer((rq, rs) => {
      let body = '';
      rq.on('data', (d) => { body += d; });
      rq.on('end', () => {
        rs.setHeader('set-cookie', ['a=1', 'b=2']);
        rs.writeHead(200, { 'content-type': 'text/plain' });
        rs.end(`${rq.method} ${body}`);
      });
    });
    await new Promise((r) => srv.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${srv.address().port}/x`;
    try {
      await withServer(async (s, client) => {
        const b = await client.browsers.create({ headless: true });
        let r = await client.browsers.curl(b.session_id, { url });
        eq(r.status, 200, 'status');
        eq(r.body, 'GET ', 'body');
        const sc = Object.entries(r.headers).find(([k]) => k.toLowerCase() === 'set-cookie');
        assert(sc && sc[1].length === 2, `multi-valued headers: ${JSON.stringify(r.headers)}`);
        assert(typeof r.duration_ms === 'number', 'duration_ms');
        r = await client.browsers.curl(b.session_id, { url, method: 'POST', body: 'payload' });
        eq(r.body, 'POST payload', 'POST body');
        let err;
        try { await client.browsers.curl(b.session_id, { url: 'http://169.254.169.254/', timeout_ms: 3000 }); } catch (e) { err = e; }
        assert(err instanceof errors.APIError && err.status === 502, `a refused target: ${err && err.status} ${err && err.message}`);
        assert(/^ERR_/.test(err.error.net_error_name), `net_error_name: ${JSON.stringify(err.error)}`);
        await client.browsers.deleteByID(b.session_id);
      }, { args: ['--allow-loopback', `127.0.0.1:${srv.address().port}`] });
    } finally { srv.close(); }
  }, 120000);
}
