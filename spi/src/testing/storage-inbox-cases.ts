import assert from 'node:assert/strict';
import type { InboxEntry, InboxMessage } from '../storage';
import { assertSameData, isBytes } from './contract-checks';
import { numberedInboxMessage, numberedInboxMessages, richInboxMessage, type AddStorageCase } from './storage-fixtures';

const ROOMY = { maxSize: 1_000_000, dropOldest: false } as const;

/** Topics of entries, to compare order compactly. */
const topics = (entries: readonly InboxEntry[]): string[] => entries.map((e) => e.message.topic);
const numbered = (...n: number[]): string[] => n.map((i) => `q/${i}`);

function assertConsecutiveSeqs(entries: readonly InboxEntry[], what: string): void {
  for (const e of entries)
    assert.ok(
      Number.isSafeInteger(e.seq) && e.seq >= 1,
      `${what}: seq must be a positive safe integer (so afterSeq 0 reads everything), got ${e.seq}`,
    );
  for (let i = 1; i < entries.length; i++) {
    assert.equal(entries[i].seq, entries[i - 1].seq + 1, `${what}: seqs must grow by one per appended message`);
  }
}

function withoutSeq(entries: readonly InboxEntry[]): InboxMessage[] {
  return entries.map((e) => ({ message: e.message, qos: e.qos, retain: e.retain, subscriptionIds: e.subscriptionIds }));
}

/** The inbox store cases of the storage kit. */
export function inboxCases(add: AddStorageCase): void {
  add('inbox: an unknown inbox counts 0 and reads empty', async (s) => {
    assert.equal(await s.inbox.count('t1', 'nobody'), 0);
    assertSameData(await s.inbox.read('t1', 'nobody', 0, 10), []);
    await s.inbox.commit('t1', 'nobody', 10);
    assert.equal(await s.inbox.count('t1', 'nobody'), 0);
  });

  add('inbox: an empty append queues nothing', async (s) => {
    assertSameData({ ...(await s.inbox.append('t1', 'c1', [], ROOMY)) }, { appended: 0, dropped: 0 });
    assert.equal(await s.inbox.count('t1', 'c1'), 0);
  });

  add('inbox: read returns appended entries oldest first with seq growing by one', async (s) => {
    assertSameData({ ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 3), ROOMY)) }, { appended: 3, dropped: 0 });
    assertSameData({ ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(4, 2), ROOMY)) }, { appended: 2, dropped: 0 });
    await s.inbox.append('t1', 'c1', [numberedInboxMessage(6)], ROOMY);
    const entries = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(topics(entries), numbered(1, 2, 3, 4, 5, 6), 'append order');
    assertConsecutiveSeqs(entries, 'read');
    assert.equal(await s.inbox.count('t1', 'c1'), 6);
  });

  add('inbox: read after a seq returns at most max entries', async (s) => {
    await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 6), ROOMY);
    const all = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(topics(await s.inbox.read('t1', 'c1', 0, 2)), numbered(1, 2), 'max from the start');
    assertSameData(topics(await s.inbox.read('t1', 'c1', all[1].seq, 2)), numbered(3, 4), 'afterSeq is exclusive');
    assertSameData(topics(await s.inbox.read('t1', 'c1', all[3].seq, 100)), numbered(5, 6), 'to the end');
    assertSameData(await s.inbox.read('t1', 'c1', all[5].seq, 100), [], 'after the last entry');
    assertSameData(await s.inbox.read('t1', 'c1', 0, 0), [], 'max 0');
    assertSameData(topics(await s.inbox.read('t1', 'c1', 0, 100)), numbered(1, 2, 3, 4, 5, 6), 'read must not remove entries');
  });

  add('inbox: commit removes every entry up to and including a seq', async (s) => {
    await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 5), ROOMY);
    const all = await s.inbox.read('t1', 'c1', 0, 100);
    await s.inbox.commit('t1', 'c1', all[2].seq);
    assert.equal(await s.inbox.count('t1', 'c1'), 2, 'count after commit');
    assertSameData(topics(await s.inbox.read('t1', 'c1', 0, 100)), numbered(4, 5), 'entries after commit');
    await s.inbox.commit('t1', 'c1', all[0].seq);
    assert.equal(await s.inbox.count('t1', 'c1'), 2, 'committing an already committed seq changes nothing');
    await s.inbox.commit('t1', 'c1', all[4].seq + 1000);
    assert.equal(await s.inbox.count('t1', 'c1'), 0, 'committing past the last entry empties the inbox');
    assertSameData(await s.inbox.read('t1', 'c1', 0, 100), []);
  });

  add('inbox: seq keeps growing after commits and is never reused', async (s) => {
    await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 3), ROOMY);
    const first = await s.inbox.read('t1', 'c1', 0, 100);
    await s.inbox.commit('t1', 'c1', first[2].seq);
    await s.inbox.append('t1', 'c1', numberedInboxMessages(4, 2), ROOMY);
    const next = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(topics(next), numbered(4, 5));
    assert.ok(next[0].seq > first[2].seq, `a new entry must get a seq above every earlier one (${next[0].seq} <= ${first[2].seq})`);
    assertConsecutiveSeqs(next, 'after commit');
    assertSameData(
      topics(await s.inbox.read('t1', 'c1', first[2].seq, 100)),
      numbered(4, 5),
      'a reader at the committed cursor sees the new entries',
    );
  });

  add('inbox: a full inbox with dropOldest true drops its oldest entries, with exact counts', async (s) => {
    const limit = { maxSize: 3, dropOldest: true };
    assertSameData({ ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 2), limit)) }, { appended: 2, dropped: 0 });
    assertSameData({ ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(3, 3), limit)) }, { appended: 3, dropped: 2 });
    assert.equal(await s.inbox.count('t1', 'c1'), 3);
    const kept = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(topics(kept), numbered(3, 4, 5), 'the newest entries stay');
    for (let i = 1; i < kept.length; i++) assert.ok(kept[i].seq > kept[i - 1].seq, 'seqs grow');
    assertSameData(
      { ...(await s.inbox.append('t1', 'c2', numberedInboxMessages(1, 5), limit)) },
      { appended: 5, dropped: 2 },
      'a batch larger than the inbox',
    );
    assertSameData(topics(await s.inbox.read('t1', 'c2', 0, 100)), numbered(3, 4, 5), 'the newest of the batch stay');
    assert.equal(await s.inbox.count('t1', 'c2'), 3);
  });

  add('inbox: a full inbox with dropOldest false refuses new entries, with exact counts', async (s) => {
    const limit = { maxSize: 3, dropOldest: false };
    assertSameData({ ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 2), limit)) }, { appended: 2, dropped: 0 });
    assertSameData({ ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(3, 3), limit)) }, { appended: 1, dropped: 2 });
    assertSameData({ ...(await s.inbox.append('t1', 'c1', [numberedInboxMessage(6)], limit)) }, { appended: 0, dropped: 1 });
    assert.equal(await s.inbox.count('t1', 'c1'), 3);
    const kept = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(topics(kept), numbered(1, 2, 3), 'the oldest entries stay, the first messages of a batch win');
    assertConsecutiveSeqs(kept, 'kept entries');
    await s.inbox.commit('t1', 'c1', kept[0].seq);
    assertSameData(
      { ...(await s.inbox.append('t1', 'c1', numberedInboxMessages(7, 2), limit)) },
      { appended: 1, dropped: 1 },
      'room made by a commit',
    );
    const after = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(topics(after), numbered(2, 3, 7));
    assert.ok(after[2].seq > kept[2].seq, 'the new entry gets a higher seq');
  });

  add('inbox: a lowered limit trims old entries (dropOldest true) or refuses new ones (false)', async (s) => {
    await s.inbox.append('t1', 'drop', numberedInboxMessages(1, 5), ROOMY);
    assertSameData(
      { ...(await s.inbox.append('t1', 'drop', [numberedInboxMessage(6)], { maxSize: 3, dropOldest: true })) },
      { appended: 1, dropped: 3 },
    );
    assert.equal(await s.inbox.count('t1', 'drop'), 3);
    assertSameData(topics(await s.inbox.read('t1', 'drop', 0, 100)), numbered(4, 5, 6));
    await s.inbox.append('t1', 'keep', numberedInboxMessages(1, 5), ROOMY);
    assertSameData(
      { ...(await s.inbox.append('t1', 'keep', [numberedInboxMessage(6)], { maxSize: 3, dropOldest: false })) },
      { appended: 0, dropped: 1 },
    );
    assert.equal(await s.inbox.count('t1', 'keep'), 5, 'existing entries are kept when new ones are refused');
    assertSameData(topics(await s.inbox.read('t1', 'keep', 0, 100)), numbered(1, 2, 3, 4, 5));
  });

  add('inbox: inboxes of different sessions and tenants are separate', async (s) => {
    await s.inbox.append('t1', 'c1', numberedInboxMessages(1, 3), ROOMY);
    await s.inbox.append('t1', 'c2', numberedInboxMessages(10, 2), ROOMY);
    await s.inbox.append('t2', 'c1', numberedInboxMessages(20, 1), ROOMY);
    assertSameData(topics(await s.inbox.read('t1', 'c1', 0, 100)), numbered(1, 2, 3));
    assertSameData(topics(await s.inbox.read('t1', 'c2', 0, 100)), numbered(10, 11));
    assertSameData(topics(await s.inbox.read('t2', 'c1', 0, 100)), numbered(20));
    assertSameData(await s.inbox.read('t2', 'c2', 0, 100), []);
    const c1 = await s.inbox.read('t1', 'c1', 0, 100);
    await s.inbox.commit('t1', 'c1', c1[2].seq + 100);
    assert.equal(await s.inbox.count('t1', 'c1'), 0);
    assert.equal(await s.inbox.count('t1', 'c2'), 2, 'a commit in another session must not touch this one');
    assert.equal(await s.inbox.count('t2', 'c1'), 1, 'a commit in another tenant must not touch this one');
    await s.inbox.append('t1', 'c2', numberedInboxMessages(12, 3), { maxSize: 3, dropOldest: true });
    assert.equal(await s.inbox.count('t2', 'c1'), 1, 'drops in another session must not touch this one');
  });

  add('inbox: binary payloads, properties and delivery fields round-trip exactly', async (s) => {
    const messages = [
      richInboxMessage('rich/1'),
      numberedInboxMessage(2, 0),
      { ...richInboxMessage('rich/3'), qos: 2 as const, retain: false, subscriptionIds: undefined },
    ];
    await s.inbox.append('t1', 'c1', messages, ROOMY);
    const entries = await s.inbox.read('t1', 'c1', 0, 100);
    assertSameData(withoutSeq(entries), messages, 'read entries must equal the appended messages');
    assert.ok(isBytes(entries[0].message.payload), 'payload must come back as a Uint8Array');
    assert.ok(isBytes(entries[0].message.properties?.correlationData), 'correlationData must come back as a Uint8Array');
  });

  add('inbox: stored entries do not change when the caller later mutates its buffers', async (s) => {
    const message = richInboxMessage('rich/1');
    await s.inbox.append('t1', 'c1', [message], ROOMY);
    message.message.payload.fill(0x55);
    message.message.properties?.correlationData?.fill(0x55);
    assertSameData(
      withoutSeq(await s.inbox.read('t1', 'c1', 0, 10)),
      [richInboxMessage('rich/1')],
      'the stored entry must keep the bytes it was given',
    );
  });

  add('inbox: concurrent appends to one inbox keep call order and distinct seqs', async (s) => {
    const batches = Array.from({ length: 20 }, (_, b) => numberedInboxMessages(b * 10, 1 + (b % 3)));
    const results = await Promise.all(batches.map((m) => s.inbox.append('t1', 'c1', m, ROOMY)));
    assert.equal(
      results.reduce((n, r) => n + r.appended, 0),
      batches.flat().length,
      'every message appended',
    );
    const entries = await s.inbox.read('t1', 'c1', 0, 1000);
    assertSameData(
      topics(entries),
      batches.flat().map((m) => m.message.topic),
      'entries in call order',
    );
    assertConsecutiveSeqs(entries, 'concurrent appends');
    assert.equal(await s.inbox.count('t1', 'c1'), entries.length);
  });

  add('inbox: count follows a long queue exactly', async (s) => {
    let expected = 0;
    for (let b = 0; b < 20; b++) {
      await s.inbox.append('t1', 'c1', numberedInboxMessages(b * 500, 500), { maxSize: 6000, dropOldest: true });
      expected = Math.min(6000, expected + 500);
      assert.equal(await s.inbox.count('t1', 'c1'), expected);
    }
    const head = await s.inbox.read('t1', 'c1', 0, 1);
    assertSameData(topics(head), numbered(4000), 'oldest entry after drops');
    await s.inbox.commit('t1', 'c1', head[0].seq + 2499);
    assert.equal(await s.inbox.count('t1', 'c1'), 3500);
  });
}
