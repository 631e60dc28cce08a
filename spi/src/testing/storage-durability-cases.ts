import assert from 'node:assert/strict';
import type { Storage } from '../storage';
import { assertSameData } from './contract-checks';
import { numberedInboxMessages, richInboxMessage, richMessage, sampleSession } from './storage-fixtures';

/** Registers one durability case: `write` on a storage, then `verify` on the storage reopened over the same data. */
export type AddDurabilityCase = (
  name: string,
  write: (storage: Storage) => Promise<void>,
  verify: (storage: Storage) => Promise<void>,
) => void;

/** The cases of the storage kit that need `reopen`: data written before a close is there after a reopen. */
export function durabilityCases(add: AddDurabilityCase): void {
  add(
    'durability: sessions survive close and reopen',
    async (s) => {
      await s.sessions.put(sampleSession('t1', 'c1', true));
      await s.sessions.put(sampleSession('t2', 'c1'));
      await s.sessions.put(sampleSession('t1', 'gone'));
      await s.sessions.delete('t1', 'gone');
    },
    async (s) => {
      assertSameData(await s.sessions.get('t1', 'c1'), sampleSession('t1', 'c1', true), 'session with will');
      assertSameData(await s.sessions.list({ limit: 10 }), [sampleSession('t1', 'c1', true), sampleSession('t2', 'c1')], 'all sessions');
    },
  );

  add(
    'durability: inbox entries, commits and the seq counter survive close and reopen',
    async (s) => {
      await s.inbox.append('t1', 'c1', [richInboxMessage('rich/0'), ...numberedInboxMessages(1, 4)], { maxSize: 100, dropOldest: false });
      const entries = await s.inbox.read('t1', 'c1', 0, 100);
      await s.inbox.commit('t1', 'c1', entries[1].seq);
    },
    async (s) => {
      assert.equal(await s.inbox.count('t1', 'c1'), 3, 'count after reopen');
      const entries = await s.inbox.read('t1', 'c1', 0, 100);
      assertSameData(
        entries.map((e) => e.message.topic),
        ['q/2', 'q/3', 'q/4'],
        'committed entries stay removed',
      );
      await s.inbox.append('t1', 'c1', numberedInboxMessages(5, 1), { maxSize: 100, dropOldest: false });
      const after = await s.inbox.read('t1', 'c1', entries[2].seq, 100);
      assertSameData(
        after.map((e) => e.message.topic),
        ['q/5'],
        'a new entry after reopen follows the old ones',
      );
      assert.equal(after[0].seq, entries[2].seq + 1, 'the seq counter continues after reopen');
      await s.inbox.commit('t1', 'c1', after[0].seq);
      await s.inbox.append('t1', 'c1', numberedInboxMessages(6, 1), { maxSize: 100, dropOldest: false });
      const last = await s.inbox.read('t1', 'c1', 0, 100);
      assert.ok(last[0].seq > after[0].seq, 'a seq is never reused, even once the inbox was emptied');
    },
  );

  add(
    'durability: inflight records and incoming ids survive close and reopen',
    async (s) => {
      await s.inflight.put('t1', 'c1', [
        { packetId: 9, phase: 'publish', message: richInboxMessage('rich/9') },
        { packetId: 2, phase: 'pubrel' },
      ]);
      await s.inflight.addIncoming('t1', 'c1', 4);
    },
    async (s) => {
      assertSameData(
        await s.inflight.list('t1', 'c1'),
        [
          { packetId: 9, phase: 'publish', message: richInboxMessage('rich/9') },
          { packetId: 2, phase: 'pubrel' },
        ],
        'outbound records in order',
      );
      assertSameData(await s.inflight.listIncoming('t1', 'c1'), [4]);
    },
  );

  add(
    'durability: retained messages, their index and totals survive close and reopen',
    async (s) => {
      await s.retained.put('t1', richMessage('a/b'));
      await s.retained.put('t1', richMessage('a/c/d'));
      await s.retained.put('t1', richMessage('gone'));
      await s.retained.delete('t1', 'gone');
    },
    async (s) => {
      assertSameData(await s.retained.get('t1', 'a/b'), richMessage('a/b'), 'retained message');
      const matched = await s.retained.match('t1', 'a/+', 10, 0);
      assertSameData(
        matched.map((m) => m.topic),
        ['a/b'],
        'wildcard match after reopen',
      );
      assertSameData(
        (await s.retained.match('t1', '#', 10, 0)).map((m) => m.topic).sort(),
        ['a/b', 'a/c/d'],
        'deleted topics stay deleted',
      );
      assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 2, bytes: 3 + 512 + 5 + 512 });
    },
  );
}
