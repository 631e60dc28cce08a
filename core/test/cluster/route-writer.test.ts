import type { SubscriptionOptions } from '@bifro/spi';
import { connect, type KV, type NatsConnection } from 'nats';
import { createLogger } from '../../src/base/logger';
import { RouteConfirmation } from '../../src/cluster/route-confirmation';
import { isProbeKey, probeKey, RouteWriter, ROUTES_BUCKET, routeKey } from '../../src/cluster/routes';
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
      // Resolves once its writes are done: the bucket holds exactly what it serves.
      expect(await writer.reconcile()).toBe(true);
      expect(await keysOf('node-r')).toEqual([a, b].sort());
      expect((await kv.get(a))?.json()).toEqual({ node: 'node-r', tenant: 't1', filter: 'a/#' });
      expect(writer.mended).toBe(1);
      // Nothing to mend: nothing written.
      expect(await writer.reconcile()).toBe(true);
      expect(writer.mended).toBe(1);
    } finally {
      writer.stop();
    }
  }, 20_000);
});

describe('RouteConfirmation', () => {
  const logger = createLogger({ level: 'silent' });

  /** A watch of the bucket feeding `confirmation` (delivering nothing while `deaf` says so). */
  async function watching(confirmation: RouteConfirmation, deaf: () => boolean): Promise<{ stop(): void }> {
    const entries = await kv.watch();
    void (async () => {
      for await (const e of entries) if (!deaf()) confirmation.observed(e);
    })();
    return entries;
  }

  it('is confirmed only once its own routes are in the bucket and its probe came back; lost and confirmed again', async () => {
    const router = new ClusterRouter<string>(new LocalRouter<string>());
    router.addRoute('t2', { subscriber: 'c1', clientId: 'c1', filter: 'x/#', options });
    const writer = new RouteWriter('node-c', router, logger);
    let rewatched = 0;
    const confirmation = new RouteConfirmation('node-c', writer, logger, Date.now, () => rewatched++);
    const key = routeKey('node-c', 't2', 'x/#');
    const watch = await watching(confirmation, () => false);
    try {
      expect(confirmation.current).toBe(false);
      await writer.attach(kv);
      // Someone deletes its route before it confirms: the confirmation writes it again first.
      await kv.delete(key);
      let presentWhenConfirmed: boolean | undefined;
      confirmation.attach(kv);
      await until('confirmed', async () => {
        if (!confirmation.current) return false;
        presentWhenConfirmed ??= (await kv.get(key))?.operation === 'PUT';
        return true;
      });
      expect(presentWhenConfirmed).toBe(true);
      expect(isProbeKey(probeKey('node-c'))).toBe(true);
      expect((await kv.get(probeKey('node-c')))?.json()).toMatchObject({ node: 'node-c' });
      confirmation.lose('a test');
      expect(confirmation.current).toBe(false);
      confirmation.confirm();
      await until('confirmed again', async () => confirmation.current);
      expect(rewatched).toBe(0);
    } finally {
      watch.stop();
      confirmation.stop();
      writer.stop();
    }
  }, 20_000);

  it('stays unconfirmed while its watch delivers nothing, and asks for a new watch', async () => {
    const router = new ClusterRouter<string>(new LocalRouter<string>());
    const writer = new RouteWriter('node-d', router, logger);
    let deaf = true;
    let rewatched = 0;
    const confirmation = new RouteConfirmation('node-d', writer, logger, Date.now, () => {
      rewatched++;
      deaf = false;
    });
    const watch = await watching(confirmation, () => deaf);
    try {
      await writer.attach(kv);
      confirmation.attach(kv);
      // The probe times out after 3 s, the watch is "opened again" (heard from then on), the next attempt confirms.
      await new Promise((r) => setTimeout(r, 2500));
      expect(confirmation.current).toBe(false);
      await until('confirmed after the new watch', async () => confirmation.current);
      expect(rewatched).toBe(1);
    } finally {
      watch.stop();
      confirmation.stop();
      writer.stop();
    }
  }, 20_000);
});
