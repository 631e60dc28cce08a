import type { SubscriptionOptions } from '@bifro/spi';
import { connect, type KV, type NatsConnection } from 'nats';
import { createLogger } from '../../src/base/logger';
import { RouteWriter, ROUTES_BUCKET, routeKey } from '../../src/cluster/routes';
import { ClusterRouter } from '../../src/routing/cluster-router';
import { LocalRouter } from '../../src/routing/local-router';
import { startNatsServer, type NatsCluster } from '../../../test/support/nats-server';

/**
 * A node's routes in the `bifro_routes` bucket of a real nats-server stay true to what it serves:
 * the periodic reconcile writes what is missing and deletes what it no longer serves, whoever
 * changed the bucket behind its back.
 */

const options: SubscriptionOptions = { qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 };
let nats: NatsCluster;
let nc: NatsConnection;
let kv: KV;

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await connect({ servers: [...nats.urls] });
  kv = await nc.jetstream().views.kv(ROUTES_BUCKET, { history: 1 });
}, 30_000);
afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

async function keysOf(node: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of await kv.keys(`${node}.>`)) keys.push(key);
  return keys.sort();
}

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('RouteWriter.reconcile', () => {
  it('writes the routes missing from the bucket and deletes the keys the node no longer serves', async () => {
    const router = new ClusterRouter<string>(new LocalRouter<string>());
    router.addRoute('t1', { subscriber: 'c1', clientId: 'c1', filter: 'a/#', options });
    router.addRoute('t1', { subscriber: 'c2', clientId: 'c2', filter: 'b/+', options });
    const writer = new RouteWriter('node-r', router, createLogger({ level: 'silent' }));
    try {
      await writer.attach(kv);
      const a = routeKey('node-r', 't1', 'a/#');
      const b = routeKey('node-r', 't1', 'b/+');
      const stale = routeKey('node-r', 't1', 'gone/#');
      await until('both routes', async () => (await keysOf('node-r')).length === 2);
      // Behind its back: one of its routes deleted, and a key it does not serve put.
      await kv.delete(a);
      await kv.put(stale, JSON.stringify({ node: 'node-r', tenant: 't1', filter: 'gone/#' }));
      expect(await keysOf('node-r')).toEqual([b, stale].sort());
      await writer.reconcile();
      await until('the mended bucket', async () => (await keysOf('node-r')).join() === [a, b].sort().join());
      expect((await kv.get(a))?.json()).toEqual({ node: 'node-r', tenant: 't1', filter: 'a/#' });
      expect(writer.mended).toBe(1);
      // Nothing to mend: nothing written.
      await writer.reconcile();
      expect(writer.mended).toBe(1);
    } finally {
      writer.stop();
    }
  }, 20_000);
});
