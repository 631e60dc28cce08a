import { connect, type KV, type NatsConnection } from 'nats';
import { RESOURCE_TYPES } from '@bifro/spi';
import { createLogger } from '../../src/base/logger';
import { MAX_WRITES_PER_TICK, USAGE_BUCKET, usageKey, UsagePublisher, UsageTable } from '../../src/cluster/usage';
import { TenantUsage } from '../../src/tenancy/tenant-usage';
import { startNatsServer, type NatsCluster } from '../../../test/support/nats-server';

/**
 * A node's usage in the `bifro_usage` bucket of a real nats-server: what changed since the last
 * write, gauges as they are, rates per second over the period, deleted when all zero, at most
 * {@link MAX_WRITES_PER_TICK} writes per tick; and another node's table reading it back.
 */

let nats: NatsCluster;
let nc: NatsConnection;
let kv: KV;
const logger = createLogger({ level: 'silent' });
const RETAIN_TOPICS = RESOURCE_TYPES.indexOf('TotalRetainTopics');

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: [...nats.urls] });
  kv = await nc.jetstream().views.kv(USAGE_BUCKET, { history: 1 });
}, 30_000);
afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

async function value(key: string): Promise<unknown> {
  const e = await kv.get(key);
  return e === null || e.operation !== 'PUT' ? undefined : e.json();
}

describe('a node’s usage in bifro_usage', () => {
  it('writes changed tenants, rates per second, deletes a tenant back at zero, and another node sums it', async () => {
    let now = 1_000_000;
    const usage = new TenantUsage(() => now);
    usage.add('t', 'TotalConnections', 3);
    const publisher = new UsagePublisher('p1', usage, new Set([RETAIN_TOPICS]), logger, () => now);
    await publisher.attach(kv);
    usage.set('t', 'TotalRetainTopics', 5); // counted by a shared store: never written
    for (let i = 0; i < 10; i++) usage.count('t', 'TotalConnectPerSecond', 1, now + i * 150);
    now += 2000;
    await publisher.tick();
    expect(await value(usageKey('p1', 't'))).toEqual({
      node: 'p1',
      tenant: 't',
      usage: { TotalConnections: 3, TotalConnectPerSecond: 5 },
    });
    const revision = (await kv.get(usageKey('p1', 't')))!.revision;

    // Nothing changed but the rate, which fell to 0: written again; then nothing at all: no write.
    now += 2000;
    await publisher.tick();
    expect(await value(usageKey('p1', 't'))).toEqual({ node: 'p1', tenant: 't', usage: { TotalConnections: 3 } });
    const again = (await kv.get(usageKey('p1', 't')))!.revision;
    expect(again).toBeGreaterThan(revision);
    now += 2000;
    await publisher.tick();
    expect((await kv.get(usageKey('p1', 't')))!.revision).toBe(again);

    // Another node reads it and sums it for its quota checks.
    const other = new TenantUsage(() => now);
    const table = new UsageTable(
      'p2',
      (n) => n === 'p1',
      (t, sums) => other.remoteChanged(t, sums),
    );
    other.addRemote(table.sums);
    const e = await kv.get(usageKey('p1', 't'));
    table.apply(e!);
    expect(other.get('t', 'TotalConnections')).toBe(3);

    usage.add('t', 'TotalConnections', -3);
    now += 2000;
    await publisher.tick();
    expect(await value(usageKey('p1', 't'))).toBeUndefined();
    table.apply((await kv.get(usageKey('p1', 't')))!);
    expect(other.get('t', 'TotalConnections')).toBe(0);
  });

  it('writes at most MAX_WRITES_PER_TICK tenants per tick, the rest at the next ones', async () => {
    let now = 2_000_000;
    const usage = new TenantUsage(() => now);
    const publisher = new UsagePublisher('p3', usage, new Set(), logger, () => now);
    await publisher.attach(kv);
    const tenants = MAX_WRITES_PER_TICK + 200;
    for (let i = 0; i < tenants; i++) usage.add(`t${i}`, 'TotalConnections', 1);
    const keys = async (): Promise<number> => {
      let n = 0;
      for await (const _ of await kv.keys('p3.>')) n++;
      return n;
    };
    now += 2000;
    await publisher.tick();
    expect(await keys()).toBe(MAX_WRITES_PER_TICK);
    now += 2000;
    await publisher.tick();
    expect(await keys()).toBe(tenants);
  }, 30_000);

  it('at attach, deletes the keys of its previous run that nothing wants any more', async () => {
    await kv.put(usageKey('p4', 'gone'), JSON.stringify({ node: 'p4', tenant: 'gone', usage: { TotalConnections: 9 } }));
    await kv.put(usageKey('p4', 'kept'), JSON.stringify({ node: 'p4', tenant: 'kept', usage: { TotalConnections: 9 } }));
    let now = 3_000_000;
    const usage = new TenantUsage(() => now);
    usage.add('kept', 'TotalConnections', 1);
    const publisher = new UsagePublisher('p4', usage, new Set(), logger, () => now);
    now += 2000;
    await publisher.tick(); // not attached yet: nothing is written
    await publisher.attach(kv);
    expect(await value(usageKey('p4', 'gone'))).toBeUndefined();
    now += 2000;
    await publisher.tick();
    expect(await value(usageKey('p4', 'kept'))).toEqual({ node: 'p4', tenant: 'kept', usage: { TotalConnections: 1 } });
  });
});
