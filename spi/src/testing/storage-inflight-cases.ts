import assert from 'node:assert/strict';
import type { InflightRecord } from '../storage';
import { assertSameData, isBytes } from './contract-checks';
import { numberedInboxMessage, richInboxMessage, type AddStorageCase } from './storage-fixtures';

const publish = (packetId: number, i = packetId): InflightRecord => ({ packetId, phase: 'publish', message: numberedInboxMessage(i) });
const packetIds = (records: readonly InflightRecord[]): number[] => records.map((r) => r.packetId);
const sorted = (ids: readonly number[]): number[] => [...ids].sort((a, b) => a - b);

/** The inflight store cases of the storage kit. */
export function inflightCases(add: AddStorageCase): void {
  add('inflight: an unknown session has no outbound records and no incoming ids', async (s) => {
    assertSameData(await s.inflight.list('t1', 'nobody'), []);
    assertSameData(await s.inflight.listIncoming('t1', 'nobody'), []);
    await s.inflight.remove('t1', 'nobody', [1, 2]);
    await s.inflight.removeIncoming('t1', 'nobody', 1);
  });

  add('inflight: list returns records in first-put order with their messages intact', async (s) => {
    // inboxSeq (SPI 1.4.0): the inbox entry the message was read from, kept as it is.
    const rich: InflightRecord = { packetId: 1, phase: 'publish', message: richInboxMessage('rich/1'), inboxSeq: 9_007_199_254_740 };
    await s.inflight.put('t1', 'c1', [publish(500), rich]);
    await s.inflight.put('t1', 'c1', [publish(3)]);
    await s.inflight.put('t1', 'c1', [{ packetId: 65535, phase: 'pubrel' }]);
    const listed = await s.inflight.list('t1', 'c1');
    assertSameData(packetIds(listed), [500, 1, 3, 65535], 'first-put order, not packet id order');
    assertSameData(listed, [publish(500), rich, publish(3), { packetId: 65535, phase: 'pubrel' }], 'records round-trip');
    assert.ok(isBytes(listed[1].message?.message.payload), 'payload must come back as a Uint8Array');
  });

  add('inflight: put replaces a record by packet id and keeps its place', async (s) => {
    await s.inflight.put('t1', 'c1', [publish(5), publish(1), publish(3)]);
    await s.inflight.put('t1', 'c1', [{ packetId: 1, phase: 'pubrel' }]);
    const listed = await s.inflight.list('t1', 'c1');
    assertSameData(packetIds(listed), [5, 1, 3], 'a replaced record keeps its place');
    assertSameData(listed[1], { packetId: 1, phase: 'pubrel' }, 'the replacement (without message) wins');
    await s.inflight.put('t1', 'c1', [publish(3, 99)]);
    assertSameData((await s.inflight.list('t1', 'c1'))[2], publish(3, 99), 'a replaced publish record');
    assert.equal((await s.inflight.list('t1', 'c1')).length, 3, 'replacing must not add records');
  });

  add('inflight: remove deletes the given packet ids and ignores unknown ones', async (s) => {
    await s.inflight.put('t1', 'c1', [publish(1), publish(2), publish(3), publish(4)]);
    await s.inflight.remove('t1', 'c1', [2, 4, 77]);
    assertSameData(packetIds(await s.inflight.list('t1', 'c1')), [1, 3]);
    await s.inflight.remove('t1', 'c1', []);
    assertSameData(packetIds(await s.inflight.list('t1', 'c1')), [1, 3]);
    await s.inflight.put('t1', 'c1', [publish(2)]);
    assertSameData(packetIds(await s.inflight.list('t1', 'c1')), [1, 3, 2], 'a packet id put again after removal goes last');
    await s.inflight.remove('t1', 'c1', [1, 2, 3]);
    assertSameData(await s.inflight.list('t1', 'c1'), []);
  });

  add('inflight: incoming QoS 2 packet ids are added once, removed and listed', async (s) => {
    await s.inflight.addIncoming('t1', 'c1', 7);
    await s.inflight.addIncoming('t1', 'c1', 3);
    await s.inflight.addIncoming('t1', 'c1', 65535);
    await s.inflight.addIncoming('t1', 'c1', 7);
    assertSameData(sorted(await s.inflight.listIncoming('t1', 'c1')), [3, 7, 65535], 'each id once');
    await s.inflight.removeIncoming('t1', 'c1', 7);
    await s.inflight.removeIncoming('t1', 'c1', 8);
    assertSameData(sorted(await s.inflight.listIncoming('t1', 'c1')), [3, 65535]);
    assertSameData(await s.inflight.list('t1', 'c1'), [], 'incoming ids are not outbound records');
    await s.inflight.put('t1', 'c1', [publish(3)]);
    await s.inflight.remove('t1', 'c1', [3]);
    assertSameData(sorted(await s.inflight.listIncoming('t1', 'c1')), [3, 65535], 'outbound and incoming packet ids are separate spaces');
  });

  add('inflight: state of different sessions and tenants is separate', async (s) => {
    await s.inflight.put('t1', 'c1', [publish(1)]);
    await s.inflight.put('t1', 'c2', [publish(2)]);
    await s.inflight.put('t2', 'c1', [publish(3)]);
    await s.inflight.addIncoming('t1', 'c1', 10);
    await s.inflight.addIncoming('t2', 'c1', 20);
    assertSameData(packetIds(await s.inflight.list('t1', 'c1')), [1]);
    assertSameData(packetIds(await s.inflight.list('t1', 'c2')), [2]);
    assertSameData(packetIds(await s.inflight.list('t2', 'c1')), [3]);
    assertSameData(await s.inflight.listIncoming('t1', 'c1'), [10]);
    assertSameData(await s.inflight.listIncoming('t2', 'c1'), [20]);
    assertSameData(await s.inflight.listIncoming('t1', 'c2'), []);
    await s.inflight.remove('t2', 'c1', [1, 3]);
    assertSameData(packetIds(await s.inflight.list('t1', 'c1')), [1], 'a remove in another tenant must not touch this one');
  });

  add('inflight: stored records do not change when the caller later mutates its buffers', async (s) => {
    const record: InflightRecord = { packetId: 1, phase: 'publish', message: richInboxMessage('rich/1') };
    await s.inflight.put('t1', 'c1', [record]);
    record.message?.message.payload.fill(0x55);
    record.message?.message.properties?.correlationData?.fill(0x55);
    assertSameData(
      await s.inflight.list('t1', 'c1'),
      [{ packetId: 1, phase: 'publish', message: richInboxMessage('rich/1') }],
      'the stored record must keep its bytes',
    );
  });
}
