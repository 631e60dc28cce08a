import assert from 'node:assert/strict';
import { sessionListKey } from '../paging';
import type { SessionRecord, Storage } from '../storage';
import { assertSameData, isBytes } from './contract-checks';
import { numberedInboxMessages, sampleSession, type AddStorageCase } from './storage-fixtures';

const ids = (records: readonly SessionRecord[]): string[] => records.map((r) => `${r.tenantId}|${r.clientId}`);

async function pageAll(s: Storage, limit: number, tenantId?: string): Promise<SessionRecord[]> {
  const out: SessionRecord[] = [];
  let after: string | undefined;
  for (let guard = 0; guard < 1000; guard++) {
    const page = await s.sessions.list({ tenantId, after, limit });
    assert.ok(page.length <= limit, `list returned ${page.length} records for limit ${limit}`);
    if (page.length === 0) return out;
    out.push(...page);
    const last = page[page.length - 1];
    after = tenantId === undefined ? sessionListKey(last.tenantId, last.clientId) : last.clientId;
  }
  assert.fail('paging through sessions did not end');
}

/** The session store cases of the storage kit. */
export function sessionCases(add: AddStorageCase): void {
  add('sessions: get of an unknown session resolves undefined', async (s) => {
    assert.equal(await s.sessions.get('t1', 'nobody'), undefined);
    await s.sessions.put(sampleSession('t1', 'someone'));
    assert.equal(await s.sessions.get('t1', 'nobody'), undefined);
    assert.equal(await s.sessions.get('t2', 'someone'), undefined);
  });

  add('sessions: put then get round-trips every field (subscriptions, will with binary payload and properties)', async (s) => {
    const plain = sampleSession('t1', 'plain');
    const rich = sampleSession('t1', 'rich', true);
    const connected = sampleSession('t1', 'connected', false, { disconnectedAt: undefined, protocolVersion: 3, subscriptions: [] });
    for (const r of [plain, rich, connected]) await s.sessions.put(r);
    assertSameData(await s.sessions.get('t1', 'plain'), plain, 'plain session');
    assertSameData(await s.sessions.get('t1', 'rich'), rich, 'session with will');
    const got = await s.sessions.get('t1', 'connected');
    assertSameData(got, connected, 'connected v3 session without subscriptions');
    assert.equal(got?.disconnectedAt, undefined, 'an absent disconnectedAt must stay absent');
    const will = (await s.sessions.get('t1', 'rich'))?.will;
    assert.ok(isBytes(will?.payload), 'will payload must come back as a Uint8Array');
    assert.ok(isBytes(will.properties?.correlationData), 'correlationData must come back as a Uint8Array');
  });

  add('sessions: put replaces an existing record', async (s) => {
    await s.sessions.put(sampleSession('t1', 'c1', true));
    const replacement = sampleSession('t1', 'c1', false, { userId: 'other', expirySeconds: 5, subscriptions: [] });
    await s.sessions.put(replacement);
    assertSameData(await s.sessions.get('t1', 'c1'), replacement, 'the replaced record (the will of the first one must be gone)');
    assertSameData(ids(await s.sessions.list({ limit: 10 })), ['t1|c1'], 'a replace must not add a second record');
  });

  add('sessions: delete removes the record; deleting an unknown session resolves', async (s) => {
    await s.sessions.put(sampleSession('t1', 'c1'));
    await s.sessions.put(sampleSession('t1', 'c2'));
    await s.sessions.delete('t1', 'c1');
    assert.equal(await s.sessions.get('t1', 'c1'), undefined);
    assert.ok(await s.sessions.get('t1', 'c2'), 'deleting one session must keep the others');
    await s.sessions.delete('t1', 'c1');
    await s.sessions.delete('t9', 'never-there');
    assertSameData(ids(await s.sessions.list({ limit: 10 })), ['t1|c2']);
  });

  add('sessions: the same client id in two tenants is two sessions', async (s) => {
    const a = sampleSession('tenant-a', 'same', false, { userId: 'ua' });
    const b = sampleSession('tenant-b', 'same', true, { userId: 'ub' });
    await s.sessions.put(a);
    await s.sessions.put(b);
    assertSameData(await s.sessions.get('tenant-a', 'same'), a, 'tenant-a session');
    assertSameData(await s.sessions.get('tenant-b', 'same'), b, 'tenant-b session');
    assertSameData(ids(await s.sessions.list({ tenantId: 'tenant-a', limit: 10 })), ['tenant-a|same']);
    await s.sessions.delete('tenant-a', 'same');
    assertSameData(await s.sessions.get('tenant-b', 'same'), b, 'deleting in tenant-a must keep tenant-b');
  });

  add('sessions: list of one tenant is ordered by client id and leaves other tenants out', async (s) => {
    for (const c of ['m', 'b', 'z', 'a', 'ab', 'B', '0']) await s.sessions.put(sampleSession('t1', c));
    for (const c of ['c', 'n']) await s.sessions.put(sampleSession('t0', c));
    await s.sessions.put(sampleSession('t2', 'a'));
    const listed = await s.sessions.list({ tenantId: 't1', limit: 100 });
    assertSameData(
      listed.map((r) => r.clientId),
      ['0', 'B', 'a', 'ab', 'b', 'm', 'z'],
    );
    assert.ok(
      listed.every((r) => r.tenantId === 't1'),
      'only records of the tenant',
    );
    assertSameData(listed[0], sampleSession('t1', '0'), 'listed records are whole records');
    assertSameData(await s.sessions.list({ tenantId: 'nobody', limit: 10 }), []);
  });

  add('sessions: list of one tenant pages with an exclusive after and a limit', async (s) => {
    const clients = Array.from({ length: 10 }, (_, i) => `c${i}`);
    for (const c of [...clients].reverse()) await s.sessions.put(sampleSession('t1', c));
    await s.sessions.put(sampleSession('t2', 'c55'));
    assertSameData(
      (await s.sessions.list({ tenantId: 't1', limit: 3 })).map((r) => r.clientId),
      ['c0', 'c1', 'c2'],
      'first page',
    );
    assertSameData(
      (await s.sessions.list({ tenantId: 't1', after: 'c4', limit: 3 })).map((r) => r.clientId),
      ['c5', 'c6', 'c7'],
      '`after` is exclusive',
    );
    assertSameData(
      (await s.sessions.list({ tenantId: 't1', after: 'c45', limit: 2 })).map((r) => r.clientId),
      ['c5', 'c6'],
      '`after` need not exist',
    );
    assertSameData(
      (await s.sessions.list({ tenantId: 't1', after: 'c9', limit: 3 })).map((r) => r.clientId),
      [],
      'after the last key',
    );
    assertSameData(
      (await pageAll(s, 3, 't1')).map((r) => r.clientId),
      clients,
      'pages of 3 cover the tenant once, in order',
    );
    assertSameData(
      (await pageAll(s, 1, 't1')).map((r) => r.clientId),
      clients,
      'pages of 1 cover the tenant once, in order',
    );
  });

  add('sessions: list across tenants is ordered by tenant then client id and pages with sessionListKey', async (s) => {
    const wanted = ['a|x', 'a|z', 'ab|a', 'ab|b', 'b|a', 'b|m', 'b|n'];
    for (const k of [...wanted].reverse()) {
      const [t, c] = k.split('|');
      await s.sessions.put(sampleSession(t, c));
    }
    assertSameData(ids(await s.sessions.list({ limit: 100 })), wanted, 'all sessions ordered by (tenant, client id)');
    assertSameData(ids(await s.sessions.list({ limit: 3 })), wanted.slice(0, 3), 'limit');
    assertSameData(
      ids(await s.sessions.list({ after: sessionListKey('a', 'z'), limit: 2 })),
      ['ab|a', 'ab|b'],
      '`after` is exclusive and crosses tenants',
    );
    for (const limit of [1, 2, 3, 7, 8])
      assertSameData(ids(await pageAll(s, limit)), wanted, `pages of ${limit} cover every session once, in order`);
  });

  add('sessions: delete removes the session inbox and inflight state', async (s) => {
    for (const t of ['t1', 't2']) {
      await s.sessions.put(sampleSession(t, 'c1'));
      await s.inbox.append(t, 'c1', numberedInboxMessages(1, 3), { maxSize: 100, dropOldest: false });
      await s.inflight.put(t, 'c1', [
        { packetId: 1, phase: 'publish', message: numberedInboxMessages(9, 1)[0] },
        { packetId: 2, phase: 'pubrel' },
      ]);
      await s.inflight.addIncoming(t, 'c1', 11);
    }
    await s.sessions.delete('t1', 'c1');
    assert.equal(await s.inbox.count('t1', 'c1'), 0, 'inbox count after delete');
    assertSameData(await s.inbox.read('t1', 'c1', 0, 100), [], 'inbox entries after delete');
    assertSameData(await s.inflight.list('t1', 'c1'), [], 'outbound inflight after delete');
    assertSameData(await s.inflight.listIncoming('t1', 'c1'), [], 'incoming QoS 2 ids after delete');
    assert.equal(await s.inbox.count('t2', 'c1'), 3, 'the same client id in another tenant keeps its inbox');
    assert.equal((await s.inflight.list('t2', 'c1')).length, 2, 'the same client id in another tenant keeps its inflight state');
    assertSameData(await s.inflight.listIncoming('t2', 'c1'), [11]);
  });

  add('sessions: a delete issued while the session still writes removes what those writes add', async (s) => {
    // The broker ends a session (expiry, clean start) while appends and inflight writes it issued
    // are still under way; the next session with the client id must start empty.
    await s.sessions.put(sampleSession('t1', 'c1'));
    const limit = { maxSize: 10_000, dropOldest: false };
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 50; i++) {
      writes.push(s.inbox.append('t1', 'c1', numberedInboxMessages(i * 4 + 1, 4), limit));
      writes.push(s.inflight.put('t1', 'c1', [{ packetId: i + 1, phase: 'publish', message: numberedInboxMessages(i, 1)[0] }]));
      writes.push(s.inflight.addIncoming('t1', 'c1', i + 1));
    }
    const deleted = s.sessions.delete('t1', 'c1');
    await Promise.allSettled(writes);
    await deleted;
    assert.equal(await s.inbox.count('t1', 'c1'), 0, 'inbox count after the delete');
    assertSameData(await s.inbox.read('t1', 'c1', 0, 1000), [], 'inbox entries after the delete');
    assertSameData(await s.inflight.list('t1', 'c1'), [], 'outbound inflight after the delete');
    assertSameData(await s.inflight.listIncoming('t1', 'c1'), [], 'incoming QoS 2 ids after the delete');
  });

  add('sessions: a stored record does not change when the caller later mutates its buffers', async (s) => {
    const record = sampleSession('t1', 'c1', true);
    const expected = sampleSession('t1', 'c1', true);
    await s.sessions.put(record);
    record.will?.payload.fill(0x55);
    record.will?.properties?.correlationData?.fill(0x55);
    assertSameData(await s.sessions.get('t1', 'c1'), expected, 'the stored session must keep the bytes it was given');
  });
}
