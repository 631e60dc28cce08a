import { connect, type NatsConnection } from 'nats';
import type { InboxMessage } from '@bifro/spi';
import { NatsStorage, parseOptions, type NatsStorageOptions } from '../src';
import type { NatsCluster } from '../../../test/support/nats-server';

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

/** A test file's NATS servers and an admin connection to them: filled in before its tests, stopped after them. */
export interface FileNats {
  nats: NatsCluster;
  admin: NatsConnection;
}

/** Starts the file's NATS servers with `start` (and an admin connection) before its tests, and stops them after. */
export function natsForFile(start: () => Promise<NatsCluster>): FileNats {
  const env = {} as FileNats;
  beforeAll(async () => {
    env.nats = await start();
    env.admin = await adminConnection(env.nats.urls);
  }, 30_000);
  afterAll(async () => {
    await env.admin?.close();
    await env.nats?.dispose();
  });
  return env;
}

/** Inbox message `i` of a numbered load: its payload is `i` as 4 bytes, so a read back tells which arrived. */
export function numberedMessage(i: number): InboxMessage {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(i);
  return { message: { topic: `load/${i}`, payload, qos: 1, retain: false, publishedAt: 1 }, qos: 1, retain: false };
}
