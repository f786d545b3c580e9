// Tenant fairness: ended browser sessions in the one shared database
// (docs/sandbox.md "Tenant fairness: ended sessions"). An organization keeps
// its newest LIM_SESSIONS_ENDED_KEPT (5000) ended sessions, readable through
// GET /browsers?status=deleted and GET /browsers/{id}?include_deleted=true;
// the end that goes past it deletes the oldest, so a POST + DELETE /browsers
// loop cannot grow the database. BROWSERD_SESSIONS_ENDED_KEPT may only lower
// it (docs/operator.md); the tests use 3.
import {
  request, assert, eq, isError, newOrg, withServer, createSession, deleteSession, assertStartRefused,
} from './lib.mjs';

const ADMIN = 'admin-token-for-tests';
const KEPT = 3;

// The ids of the ended sessions the key's organization lists.
async function endedIds(s, key) {
  const l = await request(s.base, 'GET', '/browsers?status=deleted&limit=100', { key });
  eq(l.status, 200, l.text);
  return l.json.map((b) => b.session_id).sort();
}

export const tests = [
  {
    name: 'tenant fairness (ended sessions): with BROWSERD_SESSIONS_ENDED_KEPT=3, 5 created and deleted sessions leave the newest 3 listed; the oldest is 404 with include_deleted (and for its replays, as an unknown id); another organization\'s ended sessions stay',
    timeout: 90000,
    fn: () => withServer({ args: ['--admin-token', ADMIN], env: { BROWSERD_SESSIONS_ENDED_KEPT: String(KEPT) } }, async (s) => {
      const other = (await newOrg(s, ADMIN, { name: 'bystander' })).key;
      const theirs = [];
      for (let i = 0; i < 2; i++) {
        theirs.push(await createSession(s, {}, other));
        await deleteSession(s, theirs[i], other);
      }
      const ours = [];
      for (let i = 0; i < 5; i++) {
        ours.push(await createSession(s));
        await deleteSession(s, ours[i]);
      }
      eq(JSON.stringify(await endedIds(s, s.key)), JSON.stringify(ours.slice(-KEPT).sort()),
        'the newest 3 ended sessions are listed, no more');
      const oldest = await request(s.base, 'GET', `/browsers/${ours[0]}?include_deleted=true`, { key: s.key });
      isError(oldest, 404, 'not_found');
      const kept = await request(s.base, 'GET', `/browsers/${ours[4]}?include_deleted=true`, { key: s.key });
      eq(kept.status, 200, kept.text);
      assert(kept.json.deleted_at, `the kept one is ended: ${kept.text}`);
      // What referred to a pruned session answers as for an id never seen.
      const unknown = await request(s.base, 'GET', '/browsers/aaaaaaaaaaaaaaaaaaaaaaaa/replays', { key: s.key });
      const replays = await request(s.base, 'GET', `/browsers/${ours[0]}/replays`, { key: s.key });
      eq(replays.status, unknown.status, `replays of a pruned session: ${replays.text}`);
      assert(replays.status < 500, `replays of a pruned session: ${replays.status} ${replays.text}`);
      eq(JSON.stringify(await endedIds(s, other)), JSON.stringify(theirs.slice().sort()),
        'the other organization keeps its ended sessions');
    }),
  },
  {
    name: 'tenant fairness (ended sessions): BROWSERD_SESSIONS_ENDED_KEPT can only lower the share: a bigger value, 0 or a non-number stops the server (exit 2 naming it)',
    fn: async () => assertStartRefused('BROWSERD_SESSIONS_ENDED_KEPT', ['999999', '0', 'many']),
  },
];
