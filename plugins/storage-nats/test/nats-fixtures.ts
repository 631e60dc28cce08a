import { connect, type NatsConnection } from 'nats';
import type { InboxMessage } from '@bifro/spi';
import { NatsStorage, parseOptions, type NatsStorageOptions } from '../src';

/** A storage under its own prefix, so cases sharing one nats-server never see each other's data. */
let counter = 0;
export function uniquePrefix(tag = 't'): string {
  return `${tag}${process.pid}_${++counter}`;
}

export function storageOn(servers: readonly string[], overrides: Record<string, unknown> = {}): NatsStorage {
  return new NatsStorage(parseOptions({ servers: [...servers], prefix: uniquePrefix(), partitions: 2, replicas: 1, ...overrides }));
}

/** The same storage configuration again (a reopen, or a second node). */
export function sameStorage(previous: NatsStorage, overrides: Partial<NatsStorageOptions> = {}): NatsStorage {
  return new NatsStorage({ ...previous.options, ...overrides });
}

/** Deletes every stream of a prefix (KV buckets and inbox streams), so one server can hold many cases. */
export async function deleteStreams(nc: NatsConnection, prefix: string): Promise<void> {
  const jsm = await nc.jetstreamManager();
  const names: string[] = [];
  for await (const name of jsm.streams.names())
    if (name.startsWith(`KV_${prefix}_`) || name.startsWith(`${prefix.toUpperCase()}_INBOX_`)) names.push(name);
  await Promise.all(names.map((n) => jsm.streams.delete(n)));
}

export function adminConnection(servers: readonly string[]): Promise<NatsConnection> {
  return connect({ servers: [...servers] });
}

/** Inbox message `i` of a numbered load: its payload is `i` as 4 bytes, so a read back tells which arrived. */
export function numberedMessage(i: number): InboxMessage {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(i);
  return { message: { topic: `load/${i}`, payload, qos: 1, retain: false, publishedAt: 1 }, qos: 1, retain: false };
}
