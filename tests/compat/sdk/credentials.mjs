// client.credentials of @onkernel/sdk 0.84.0 (issue 35 item 1): every method
// through the official client; values never come back, totpCode is RFC 6238.
import { totp } from '../../blackbox/lib.mjs';

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

export function register(t) {
  const { sdkTest, withServer, assert, eq, errors, rejects } = t;
  sdkTest('credentials.create', 'create, retrieve, list (domain filter, auto-pagination), update, totpCode, delete: no value is ever returned', async () => {
    await withServer(async (s, client) => {
      const c = await client.credentials.create({ name: 'shop', domain: 'shop.example', values: { username: 'ann', password: 'hunter2-secret' }, totp_secret: SECRET });
      eq([c.name, c.domain, c.has_values, c.has_totp_secret, [...c.value_keys].sort()], ['shop', 'shop.example', true, true, ['password', 'username']], 'created');
      assert(!JSON.stringify(c).includes('hunter2-secret') && !JSON.stringify(c).includes(SECRET), 'no value in the record');
      eq((await client.credentials.retrieve('shop')).id, c.id, 'retrieve by name');
      eq((await client.credentials.retrieve(c.id)).name, 'shop', 'retrieve by id');
      for (let i = 0; i < 3; i++) await client.credentials.create({ name: `m${i}`, domain: 'mail.example', values: { email: `${i}@x` } });
      const names = [];
      for await (const x of client.credentials.list({ limit: 2 })) names.push(x.name);
      eq(names, ['shop', 'm0', 'm1', 'm2'], 'every page');
      eq((await client.credentials.list({ domain: 'shop.example' })).getPaginatedItems().map((x) => x.id), [c.id], 'domain filter');
      const code = await client.credentials.totpCode('shop');
      eq(code.code, totp(SECRET, Date.parse(code.expires_at) / 1000 - 1), 'totpCode');
      const u = await client.credentials.update('shop', { remove_value_keys: ['username'], values: { otp: 'x' }, name: 'store' });
      eq([u.name, [...u.value_keys].sort()], ['store', ['otp', 'password']], 'updated');
      await client.credentials.delete('store');
      await rejects(() => client.credentials.retrieve(c.id), errors.NotFoundError, 404, 'deleted');
      await rejects(() => client.credentials.create({ name: 'm0', domain: 'd', values: {} }), errors.ConflictError, 409, 'duplicate name');
    });
  }, 60000, ['credentials.retrieve', 'credentials.list', 'credentials.update', 'credentials.delete', 'credentials.totpCode']);
}
