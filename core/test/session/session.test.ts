import 'reflect-metadata';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClientInfo, PluginContext, QoS, Storage } from '@bifro/spi';
import { testPluginContext } from '@bifro/spi/testing';
import { LevelStorage } from '@bifro/plugin-storage-level';
import { Message } from '../../src/session/message';
import { Session, type Inflight, type SessionHost } from '../../src/session/session';
import { SessionPersistence, toInboxMessage } from '../../src/session/session-persistence';
import type { QueueResource } from '../../src/session/session-queue';
import type { Delivery, DropReason, QueueLimit, SessionLink, WriteWaiter } from '../../src/session/session-types';

/** The storage fixture that fails every write while its control file says `fail` (test/fixtures/plugins/faulty-storage). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const FAULTY = require('../../../test/fixtures/plugins/faulty-storage') as { storage: unknown };

/**
 * The Session class on its own: a recording host and link, a clock the test moves, and, for
 * persistent sessions, the real SessionPersistence over a level storage in a temp dir.
 */

const TENANT = 'acme';
const T0 = 1_700_000_000_000;
const CLIENT = { tenantId: TENANT, userId: 'u', remoteAddress: '::1', remotePort: 1, listener: 't', attrs: {} };

/** A connection the test steers: `open` is writable(), `accept` what sendPublish returns; after `budget` sends it turns unwritable. */
class TestLink implements SessionLink {
  open = true;
  budget = Infinity;
  buffered = 0;
  accept: (d: Delivery) => boolean = () => true;
  /** `topic:packetId`, with `:dup` for a resend. */
  readonly sent: string[] = [];
  readonly pubrels: number[] = [];
  constructor(
    readonly v5 = true,
    readonly receiveMaximum = 65535,
    readonly maxQueuedBytes = 1 << 20,
  ) {}
  writable = (): boolean => this.open;
  bufferedBytes = (): number => this.buffered;
  sendPublish(d: Delivery, packetId: number, dup: boolean): boolean {
    this.sent.push(`${d.msg.topic}:${packetId}${dup ? ':dup' : ''}`);
    if (--this.budget <= 0) this.open = false;
    return this.accept(d);
  }
  sendPubrel = (packetId: number): void => void this.pubrels.push(packetId);
  queueOverflowed = (): void => undefined;
}

/** The broker as the session sees it: a clock the test moves, a queue policy it sets, and records of what it was told. */
class TestHost implements SessionHost {
  clock = T0;
  limit: QueueLimit = { maxSize: 100, dropOldest: false, maxTenantBytes: 0 };
  room = true;
  /** `topic:reason` */
  readonly drops: string[] = [];
  /** `topic:qN` (`-` when the delivery is gone: QoS 2 after PUBREC) */
  readonly confirms: string[] = [];
  readonly deferred: Inflight[] = [];
  readonly failures: string[] = [];
  readonly usage: Record<QueueResource, number> = { TotalSessionMemoryBytes: 0, TotalPersistentSessionSpaceBytes: 0 };
  resendWatches = 0;
  constructor(readonly persistence: SessionPersistence) {}
  now = (): number => this.clock;
  queueLimit = (): QueueLimit => this.limit;
  tenantQueuedBytes = (): number => this.usage.TotalSessionMemoryBytes;
  hasRoom = (): boolean => this.room;
  dropped = (_s: Session, d: Delivery, reason: DropReason): void => void this.drops.push(`${d.msg.topic}:${reason}`);
  adjustUsage = (_s: Session, resource: QueueResource, delta: number): void => void (this.usage[resource] += delta);
  storageFailed = (_s: Session, what: string): void => void this.failures.push(what);
  successes = 0;
  storageSucceeded = (): void => void this.successes++;
  confirmed = (_s: Session, d: Delivery | undefined, qos: QoS): void => void this.confirms.push(`${d?.msg.topic ?? '-'}:q${qos}`);
  deferInflight = (write: Inflight): void => void this.deferred.push(write);
  /** As the engine does: the session's deferred records still waiting are put now, in one call. */
  flushDeferred = (session: Session): void => {
    const due = this.deferred.filter((w) => w.session === session && w.state === 'waiting');
    for (const w of due) w.state = 'issued';
    if (due.length > 0)
      void this.persistence.putInflight(
        session,
        due.map((w) => ({ packetId: w.packetId, phase: 'publish' as const, message: toInboxMessage(w.delivery!) })),
      );
  };
  onDeadline = (): number => 0;
  /** Sessions the test says are served (by key). */
  readonly serving = new Map<string, Session>();
  served = (key: string): Session | undefined => this.serving.get(key);
  watchResends(session: Session): void {
    this.resendWatches++;
    session.resendWatched = true; // as the engine does
  }
}

/** A publisher's write waiter: `pending` counts what still holds it. */
class TestWaiter implements WriteWaiter {
  pending = 0;
  readonly failures: unknown[] = [];
  hold = (): void => void this.pending++;
  release = (): void => void this.pending--;
  fail = (err: unknown): void => void this.failures.push(err);
  add(write: Promise<unknown>): void {
    this.hold();
    write.then(this.release, this.fail);
  }
}

let dir: string;
let storage: LevelStorage;
let persistence: SessionPersistence;
let host: TestHost;
let clients = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bifro-session-'));
  storage = new LevelStorage({ path: join(dir, 'db'), sync: false });
  await storage.init();
  persistence = new SessionPersistence(storage);
});
afterAll(async () => {
  await storage.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  host = new TestHost(persistence);
});

/** A new session of a fresh client id (persistent ones share one storage), MQTT 5 unless `v5` is false. */
function newSession(opts: { persistent?: boolean; v5?: boolean } = {}): Session {
  const clientId = `c${++clients}`;
  const version = opts.v5 === false ? 4 : 5;
  const client: ClientInfo = { ...CLIENT, clientId, protocolVersion: version };
  const s = new Session(`${TENANT}/${clientId}`, client, version, opts.persistent ? 60 : 0, host.clock, host);
  s.stored = opts.persistent === true;
  return s;
}

/** A delivery of a message on `topic` (payload `payload`), at `qos`; `expiresAt` 0 = never. */
function delivery(topic: string, qos: QoS, expiresAt = 0, payload = 'x'): Delivery {
  const msg = new Message(topic, Buffer.from(payload), qos, false, undefined, host.clock, expiresAt, 'publisher');
  return { msg, qos, retain: false, subscriptionIds: undefined };
}

/** Deliver one message per topic at `qos`. */
function deliverAll(s: Session, qos: QoS, ...topics: string[]): void {
  for (const t of topics) s.deliver(delivery(t, qos));
}

/** Wait on the event loop (no timers) until `cond` holds: for the level storage's I/O. */
async function until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** The session's inflight records in storage, as `packetId:phase[:topic]`. */
const inflightIn = async (s: Session): Promise<string[]> =>
  (await persistence.listInflight(s)).map((r) => `${r.packetId}:${r.phase}${r.message ? ':' + r.message.message.topic : ''}`);

describe('transient session without a link', () => {
  it('queues QoS 0, 1 and 2 and sends them in order on attach, with increasing packet ids', () => {
    const s = newSession();
    s.deliver(delivery('a', 0));
    s.deliver(delivery('b', 1));
    s.deliver(delivery('c', 2));
    s.deliver(delivery('d', 0));
    s.deliver(delivery('e', 1));
    expect(s.connected).toBe(false);
    expect(s.backlog).toBe(5);
    expect(s.memoryBytes).toBe(10);
    expect(host.usage.TotalSessionMemoryBytes).toBe(10);

    const link = new TestLink();
    s.attach(link);
    expect(s.connected).toBe(true);
    expect(link.sent).toEqual(['a:0', 'b:1', 'c:2', 'd:0', 'e:3']);
    expect(s.backlog).toBe(3); // the QoS 1/2 ones, now in flight
    expect(s.inflightSize).toBe(3);
    expect(s.memoryBytes).toBe(0);
    expect(host.usage.TotalSessionMemoryBytes).toBe(0);
    expect(host.drops).toEqual([]);
  });

  it('wraps packet ids after 65535 and skips ids still in flight', () => {
    const s = newSession();
    const link = new TestLink();
    s.attach(link);
    s.deliver(delivery('held', 1)); // id 1 stays in flight
    const d = delivery('x', 1);
    let acked = 0;
    for (let id = 2; id <= 65534; id++) {
      s.deliver(d);
      if (s.complete(id)) acked++;
    }
    expect(acked).toBe(65533);
    link.sent.length = 0;
    deliverAll(s, 1, 'last', 'wrapped', 'next');
    expect(link.sent).toEqual(['last:65535', 'wrapped:2', 'next:3']);
    expect(s.inflightSize).toBe(4);
  });
});

describe('Receive Maximum', () => {
  it('keeps at most receiveMaximum QoS 1/2 in flight; each ack releases the next, QoS 0 keeps its place', () => {
    const s = newSession();
    const link = new TestLink(true, 2);
    s.attach(link);
    s.deliver(delivery('a', 1));
    s.deliver(delivery('b', 2));
    s.deliver(delivery('c', 1));
    s.deliver(delivery('d', 0)); // behind c in the queue
    s.deliver(delivery('e', 1));
    expect(link.sent).toEqual(['a:1', 'b:2']);
    expect(s.backlog).toBe(5);

    expect(s.complete(1)).toBe(true);
    expect(host.confirms).toEqual(['a:q1']);
    expect(link.sent).toEqual(['a:1', 'b:2', 'c:3', 'd:0']);
    expect(s.complete(1)).toBe(false); // already done
    expect(s.complete(42)).toBe(false);

    expect(s.received(2, false)).toBe(true);
    expect(link.sent).toHaveLength(4); // PUBREL phase still holds its slot
    expect(s.complete(2)).toBe(true);
    expect(host.confirms).toEqual(['a:q1', '-:q2']);
    expect(link.sent).toEqual(['a:1', 'b:2', 'c:3', 'd:0', 'e:4']);
    expect(s.inflightSize).toBe(2);
  });
});

describe('QoS 2 outbound', () => {
  it('PUBREC sends PUBREL, PUBCOMP completes', () => {
    const s = newSession();
    const link = new TestLink();
    s.attach(link);
    deliverAll(s, 2, 'q2');
    deliverAll(s, 1, 'q1');
    expect(s.received(2, false)).toBe(false); // PUBREC for a QoS 1 delivery
    expect(s.received(9, false)).toBe(false); // unknown id
    expect(s.received(1, false)).toBe(true);
    expect(link.pubrels).toEqual([1]);
    expect(host.confirms).toEqual([]);
    expect(s.complete(1)).toBe(true);
    expect(host.confirms).toEqual(['-:q2']);
    expect(s.inflightSize).toBe(1);
    // After a reconnect only the PUBREL phase is repeated, not the PUBLISH.
    deliverAll(s, 2, 'again');
    s.received(3, false);
    s.detach();
    const next = new TestLink();
    s.attach(next);
    expect(next.sent).toEqual(['q1:2:dup']);
    expect(next.pubrels).toEqual([3]);
  });

  it('a failed PUBREC (reason ≥ 0x80) ends the flow without PUBREL and frees the window', () => {
    const s = newSession();
    const link = new TestLink(true, 1);
    s.attach(link);
    deliverAll(s, 2, 'a', 'b');
    expect(s.received(1, true)).toBe(true);
    expect(link.pubrels).toEqual([]);
    expect(host.confirms).toEqual(['a:q2']);
    expect(link.sent).toEqual(['a:1', 'b:2']);
  });
});

describe('queue limits', () => {
  it('maxSize with dropOldest false drops the new delivery as queue-full', () => {
    host.limit = { maxSize: 2, dropOldest: false, maxTenantBytes: 0 };
    const s = newSession();
    s.deliver(delivery('a', 0));
    s.deliver(delivery('b', 1));
    s.deliver(delivery('c', 2));
    expect(host.drops).toEqual(['c:queue-full']);
    const link = new TestLink();
    s.attach(link);
    expect(link.sent).toEqual(['a:0', 'b:1']);
  });

  it('maxSize with dropOldest true drops the oldest queued delivery, whatever its QoS', () => {
    host.limit = { maxSize: 2, dropOldest: true, maxTenantBytes: 0 };
    const s = newSession();
    s.deliver(delivery('a', 2));
    s.deliver(delivery('b', 0));
    s.deliver(delivery('c', 1));
    s.deliver(delivery('d', 1));
    expect(host.drops).toEqual(['a:queue-full', 'b:queue-full']);
    expect(host.usage.TotalSessionMemoryBytes).toBe(4);
    const link = new TestLink();
    s.attach(link);
    expect(link.sent).toEqual(['c:1', 'd:2']);
  });

  it('maxQueuedBytes minus bufferedBytes bounds the queue: queue-bytes', () => {
    // Each message is 20 bytes (topic 3 + payload 17); room for the queue: 100 - 40 = 60.
    const payload = 'p'.repeat(17);
    const link = new TestLink(true, 10, 100);
    link.open = false;
    link.buffered = 40;
    const s = newSession();
    s.attach(link);
    for (const t of ['t/a', 't/b', 't/c', 't/d']) s.deliver(delivery(t, 1, 0, payload));
    expect(host.drops).toEqual(['t/d:queue-bytes']);
    expect(s.memoryBytes).toBe(60);

    host.limit = { maxSize: 100, dropOldest: true, maxTenantBytes: 0 };
    s.deliver(delivery('t/e', 1, 0, payload));
    expect(host.drops).toEqual(['t/d:queue-bytes', 't/a:queue-bytes']);
    // Larger than the whole bound: dropped itself, even with dropOldest.
    s.deliver(delivery('big', 1, 0, 'p'.repeat(60)));
    expect(host.drops).toEqual(['t/d:queue-bytes', 't/a:queue-bytes', 'big:queue-bytes']);
    link.open = true;
    s.drain();
    expect(link.sent).toEqual(['t/b:1', 't/c:2', 't/e:3']);
  });

  it('without room in the tenant quota the delivery is dropped as quota', () => {
    host.room = false;
    const s = newSession();
    s.deliver(delivery('a', 1));
    expect(host.drops).toEqual(['a:quota']);
    expect(s.backlog).toBe(0);
  });
});

describe('message expiry', () => {
  it('drops a queued message expired by the host clock when the queue is flushed', () => {
    const s = newSession();
    s.deliver(delivery('soon', 1, T0 + 1000));
    s.deliver(delivery('never', 1));
    s.deliver(delivery('exact', 0, T0 + 2000));
    s.deliver(delivery('later', 2, T0 + 5000));
    host.clock = T0 + 2000; // 'exact' is still valid at its expiry instant
    const link = new TestLink();
    s.attach(link);
    expect(host.drops).toEqual(['soon:expired']);
    expect(link.sent).toEqual(['never:1', 'exact:0', 'later:2']);
  });

  it('on reconnect, in-flight messages go again with DUP and their ids (unless expired), then what waited', () => {
    const s = newSession();
    s.attach(new TestLink());
    s.deliver(delivery('short', 1, T0 + 1000));
    s.deliver(delivery('long', 1, T0 + 9000));
    s.detach();
    s.deliver(delivery('queued', 1));
    expect(s.backlog).toBe(3);
    host.clock = T0 + 1001;
    const link = new TestLink();
    s.attach(link);
    expect(host.drops).toEqual(['short:expired']);
    expect(link.sent).toEqual(['long:2:dup', 'queued:3']);
    expect(s.inflightSize).toBe(2);
  });
});

describe('link not writable', () => {
  it('sends nothing while unwritable, and stops a drain when the link turns unwritable midway', () => {
    const s = newSession();
    const link = new TestLink();
    link.open = false;
    s.attach(link);
    s.deliver(delivery('a', 0));
    deliverAll(s, 1, 'b', 'c', 'd');
    s.drain();
    expect(link.sent).toEqual([]);
    link.budget = 2; // the socket buffer goes over its high-water mark again after two PUBLISH
    link.open = true;
    s.drain();
    expect(link.sent).toEqual(['a:0', 'b:1']);
    expect(s.backlog).toBe(3);
    link.budget = Infinity;
    link.open = true;
    s.drain();
    expect(link.sent).toEqual(['a:0', 'b:1', 'c:2', 'd:3']);
  });

  it('a PUBLISH the link refuses (too large) is dropped and its packet id freed', () => {
    const s = newSession();
    const link = new TestLink();
    link.accept = (d) => d.msg.topic !== 'huge';
    s.attach(link);
    deliverAll(s, 1, 'huge', 'ok');
    expect(host.drops).toEqual(['huge:too-large']);
    expect(s.inflightSize).toBe(1);
    expect(s.complete(1)).toBe(false);
    expect(s.complete(2)).toBe(true);
  });
});

describe('retained hold', () => {
  it('delivers the retained messages before live ones that arrived during the lookup', () => {
    const s = newSession();
    const link = new TestLink();
    s.attach(link);
    s.holdForRetained();
    deliverAll(s, 1, 'live1');
    deliverAll(s, 0, 'live2');
    expect(link.sent).toEqual([]);
    s.releaseRetained([delivery('ret1', 1), delivery('ret2', 0)]);
    expect(link.sent).toEqual(['ret1:1', 'ret2:0', 'live1:2', 'live2:0']);
    deliverAll(s, 0, 'after');
    expect(link.sent[4]).toBe('after:0');
  });

  it('with two lookups pending, live deliveries wait for both', () => {
    const s = newSession();
    const link = new TestLink();
    s.attach(link);
    s.holdForRetained();
    s.holdForRetained();
    deliverAll(s, 0, 'live');
    s.releaseRetained([delivery('r1', 0)]);
    expect(link.sent).toEqual(['r1:0']);
    s.releaseRetained([delivery('r2', 0)]);
    expect(link.sent).toEqual(['r1:0', 'r2:0', 'live:0']);
  });
});

describe('session state basics', () => {
  it('inbound QoS 2 ids, subscriptions, counted subscriptions, backlog, connected and clearState', () => {
    const s = newSession();
    expect(s.tenantId).toBe(TENANT);
    expect(s.persistent).toBe(false);
    expect(s.subscriptions).toBe(s.subscriptions);
    s.subscriptions.set('a/#', { filter: 'a/#', qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0 });
    expect([...s.subscriptions.keys()]).toEqual(['a/#']);
    expect(s.countedFilters()).toEqual([]);
    s.countedSubscriptions.set('a/#', 'TotalTransientSubscriptions');
    s.countedSubscriptions.set('$share/g/b', 'TotalSharedSubscriptions');
    const filters = s.countedFilters();
    s.countedSubscriptions.delete('a/#');
    expect(filters).toEqual(['a/#', '$share/g/b']); // a copy
    s.dropSubscriptions();
    expect(s.subscriptions.size).toBe(0);

    s.inboundQoS2.add(7);
    expect(s.inboundQoS2.has(7)).toBe(true);
    s.attach(new TestLink(true, 1));
    deliverAll(s, 1, 'a', 'b');
    deliverAll(s, 0, 'c');
    expect(s.backlog).toBe(3);
    s.clearState();
    expect(s.backlog).toBe(0);
    expect(s.inboundQoS2.size).toBe(0);
    expect(s.memoryBytes).toBe(0);
    expect(host.usage.TotalSessionMemoryBytes).toBe(0);
    expect(s.connected).toBe(true);
    s.detach();
    expect(s.connected).toBe(false);
  });
});

describe('persistent session over level storage', () => {
  it('a QoS 1 delivery while disconnected goes to the inbox, then in flight on attach, removed on ack', async () => {
    const s = newSession({ persistent: true });
    const waiter = new TestWaiter();
    s.deliver(delivery('p/1', 1), waiter);
    expect(waiter.pending).toBe(1); // the publisher waits for the append
    await until(() => waiter.pending === 0, 'the inbox append');
    expect(await persistence.count(s)).toBe(1);
    expect(s.backlog).toBe(1);

    const link = new TestLink();
    s.attach(link);
    await until(() => link.sent.length === 1, 'the inbox pump');
    expect(link.sent).toEqual(['p/1:1']);
    await until(async () => (await inflightIn(s)).length > 0, 'the inflight put');
    expect(await inflightIn(s)).toEqual(['1:publish:p/1']);
    expect(await persistence.count(s)).toBe(0); // committed with it
    expect(s.backlog).toBe(1);

    expect(s.complete(1)).toBe(true);
    expect(host.confirms).toEqual(['p/1:q1']);
    await until(async () => (await inflightIn(s)).length === 0, 'the inflight removal');
    expect(host.failures).toEqual([]);
  });

  it('a QoS 0 delivery while disconnected is kept in the inbox; connected but unwritable it is dropped', async () => {
    const s = newSession({ persistent: true });
    s.deliver(delivery('q0', 0));
    // No waiter for QoS 0: the append is done when its bytes are counted.
    await until(() => host.usage.TotalPersistentSessionSpaceBytes === 3, 'the inbox append');
    expect(await persistence.count(s)).toBe(1);
    const link = new TestLink();
    s.attach(link);
    // Live QoS 0 while the inbox still holds older messages queues behind them [MQTT-4.6.0-5].
    s.deliver(delivery('live', 0));
    await until(() => link.sent.length === 2, 'the inbox pump');
    expect(link.sent).toEqual(['q0:0', 'live:0']);
    await until(async () => (await persistence.count(s)) === 0, 'the inbox commit');
    await new Promise((r) => setTimeout(r, 20));
    s.deliver(delivery('direct', 0));
    expect(link.sent).toEqual(['q0:0', 'live:0', 'direct:0']);
    link.open = false;
    s.deliver(delivery('lost', 0));
    expect(host.drops).toEqual(['lost:queue-full']);
  });

  it('connected QoS 1: the inflight write is deferred, and not needed when the PUBACK comes first', async () => {
    const s = newSession({ persistent: true });
    const link = new TestLink();
    s.attach(link);
    const waiter = new TestWaiter();
    s.deliver(delivery('fast', 1), waiter);
    expect(link.sent).toEqual(['fast:1']);
    expect(host.deferred.map((e) => [e.packetId, e.state])).toEqual([[1, 'waiting']]);
    expect(waiter.pending).toBe(1);
    expect(s.complete(1)).toBe(true);
    expect(host.deferred[0]!.state).toBe('settled');
    expect(waiter.pending).toBe(0);
    expect(await inflightIn(s)).toEqual([]);
  });

  it('a record written at once follows the deferred records of earlier deliveries, so a restart resends in sending order', async () => {
    const s = newSession({ persistent: true });
    s.attach(new TestLink());
    s.deliver(delivery('first', 1), new TestWaiter());
    s.deliver(delivery('second', 2), new TestWaiter());
    const records = async (): Promise<string[]> =>
      (await persistence.listInflight(s)).map((r) => `${r.packetId}:${r.message?.message.topic ?? r.phase}`);
    await until(async () => (await records()).length === 2, 'both records');
    expect(await records()).toEqual(['1:first', '2:second']);
  });

  it('connected QoS 2: the record is written at once, becomes pubrel on PUBREC and goes on PUBCOMP', async () => {
    const s = newSession({ persistent: true });
    const link = new TestLink();
    s.attach(link);
    const waiter = new TestWaiter();
    s.deliver(delivery('q2', 2), waiter);
    expect(link.sent).toEqual(['q2:1']);
    await until(() => waiter.pending === 0, 'the inflight put');
    expect(await inflightIn(s)).toEqual(['1:publish:q2']);
    s.received(1, false);
    // PUBREL goes out once the pubrel record is stored.
    await until(async () => (await inflightIn(s))[0] === '1:pubrel', 'the pubrel record');
    await until(() => Promise.resolve(link.pubrels.length > 0), 'the PUBREL');
    expect(link.pubrels).toEqual([1]);
    s.complete(1);
    await until(async () => (await inflightIn(s)).length === 0, 'the inflight removal');
    expect(host.confirms).toEqual(['-:q2']);
  });

  it('a restored session reads its inflight state back, resends it and continues the packet ids', async () => {
    const s = newSession({ persistent: true });
    const old = { topic: 'old', payload: Buffer.from('x'), qos: 1, retain: false, publishedAt: T0 } as const;
    await persistence.putInflight(s, [
      { packetId: 65534, phase: 'publish', message: { message: old, qos: 1, retain: false } },
      { packetId: 7, phase: 'pubrel' },
    ]);
    await persistence.addIncoming(s, 12);
    s.loaded = false;
    // Loaded before CONNACK (SessionRegistry.store); concurrent loads share one read.
    const loads = [s.load(), s.load()];
    expect(loads[0]).toBe(loads[1]);
    await Promise.all(loads);
    expect(s.loaded).toBe(true);
    const link = new TestLink();
    s.attach(link);
    expect(link.pubrels.length).toBe(1);
    expect(link.sent).toEqual(['old:65534:dup']);
    expect(link.pubrels).toEqual([7]);
    expect([...s.inboundQoS2]).toEqual([12]);
    s.deliver(delivery('new1', 1), new TestWaiter());
    s.deliver(delivery('new2', 1), new TestWaiter());
    expect(link.sent).toEqual(['old:65534:dup', 'new1:65535', 'new2:1']);
    expect(s.complete(65534)).toBe(true);
    await until(async () => !(await inflightIn(s)).includes('65534:publish:old'), 'the inflight removal');
  });

  it('with the window full, a delivery goes through the inbox and follows the ack', async () => {
    const s = newSession({ persistent: true });
    const link = new TestLink(true, 1);
    s.attach(link);
    s.deliver(delivery('a', 1), new TestWaiter());
    const waiter = new TestWaiter();
    s.deliver(delivery('b', 1), waiter);
    await until(() => waiter.pending === 0, 'the inbox append');
    expect(link.sent).toEqual(['a:1']);
    s.complete(1);
    await until(() => link.sent.length === 2, 'the inbox pump');
    expect(link.sent).toEqual(['a:1', 'b:2']);
  });

  // Regression: an ack that arrived while the append of the next delivery was still being
  // written started the pump, which read an empty inbox and zeroed the backlog: the stored
  // delivery stayed in storage while the client was connected, and later ones overtook it.
  it('an ack during a pending inbox append does not strand the appended delivery', async () => {
    const s = newSession({ persistent: true });
    const link = new TestLink(true, 1);
    s.attach(link);
    s.deliver(delivery('a', 1), new TestWaiter());
    const waiter = new TestWaiter();
    s.deliver(delivery('b', 1), waiter); // window full: appended to the inbox
    s.complete(1); // PUBACK before the append is written
    await until(() => waiter.pending === 0, 'the inbox append');
    await until(() => link.sent.length === 2, 'b', 500);
    expect(link.sent).toEqual(['a:1', 'b:2']);
  });

  // Regression: the same when the client reconnected while a delivery for it was being
  // appended: the pump started by attach read nothing yet and zeroed the backlog.
  it('attaching during a pending inbox append does not strand the appended delivery', async () => {
    const s = newSession({ persistent: true });
    const waiter = new TestWaiter();
    s.deliver(delivery('b', 1), waiter);
    const link = new TestLink();
    s.attach(link);
    await until(() => waiter.pending === 0, 'the inbox append');
    await until(() => link.sent.length === 1, 'b', 500);
    expect(link.sent).toEqual(['b:1']);
  });

  it('a live delivery held behind a retained lookup keeps holding its publisher', async () => {
    const s = newSession({ persistent: true });
    const link = new TestLink();
    s.attach(link);
    s.holdForRetained();
    const waiter = new TestWaiter();
    s.deliver(delivery('live', 2), waiter);
    expect(waiter.pending).toBe(1);
    s.releaseRetained([delivery('ret', 2)]);
    expect(link.sent).toEqual(['ret:1', 'live:2']);
    await until(() => waiter.pending === 0, 'the inflight put');
    expect(await inflightIn(s)).toEqual(['1:publish:ret', '2:publish:live']);
  });
});

describe('MQTT 3 resends (v5 false)', () => {
  it('asks the host to watch, then resends overdue deliveries with DUP and gives up after maxResends', () => {
    const s = newSession({ v5: false });
    const link = new TestLink(false);
    s.attach(link);
    deliverAll(s, 1, 'a', 'b');
    expect(host.resendWatches).toBe(1);
    expect(s.resendOverdue(1, 2, 1)).toBe(true); // first seen
    expect(s.resendOverdue(2, 2, 1)).toBe(true); // not overdue yet
    expect(link.sent).toEqual(['a:1', 'b:2']);
    s.complete(2);
    expect(s.resendOverdue(3, 2, 1)).toBe(true);
    expect(link.sent).toEqual(['a:1', 'b:2', 'a:1:dup']);
    expect(s.resendOverdue(4, 2, 1)).toBe(true);
    expect(s.resendOverdue(5, 2, 1)).toBe(false); // resends exhausted: given up, id freed
    expect(host.drops).toEqual(['a:resends-exhausted']);
    expect(s.inflightSize).toBe(0);
  });

  it('repeats PUBREL for a QoS 2 delivery in its second phase', () => {
    const s = newSession({ v5: false });
    const link = new TestLink(false);
    s.attach(link);
    deliverAll(s, 2, 'q2');
    s.received(1, false);
    s.resendOverdue(1, 1, 1);
    s.resendOverdue(2, 1, 1);
    expect(link.pubrels).toEqual([1, 1]);
    expect(s.resendOverdue(3, 1, 1)).toBe(false);
    expect(host.confirms).toEqual(['-:q2']);
  });

  it('attaching an MQTT 3 link with deliveries in flight starts the watch; an MQTT 5 link never resends', () => {
    const s = newSession({ v5: false });
    deliverAll(s, 1, 'a');
    s.attach(new TestLink(false));
    s.detach();
    s.resendWatched = false; // the engine left the watch when the link went
    const link = new TestLink(false);
    s.attach(link);
    expect(host.resendWatches).toBe(2);
    expect(link.sent).toEqual(['a:1:dup']);

    const v5 = newSession();
    const v5link = new TestLink(true);
    v5.attach(v5link);
    deliverAll(v5, 1, 'b');
    expect(v5.resendOverdue(1, 1, 5)).toBe(false);
    expect(v5.resendOverdue(9, 1, 5)).toBe(false);
    expect(v5link.sent).toEqual(['b:1']);
    expect(host.resendWatches).toBe(2);
  });

  // Regression: giving up a delivery freed its slot in the window but drained nothing, so what
  // waited in the queue stayed there while the client was connected.
  it('giving up a delivery lets the next queued one go', () => {
    const s = newSession({ v5: false });
    const link = new TestLink(false, 1);
    s.attach(link);
    deliverAll(s, 1, 'a', 'b');
    s.resendOverdue(1, 1, 0);
    s.resendOverdue(2, 1, 0);
    expect(host.drops).toEqual(['a:resends-exhausted']);
    expect(link.sent).toEqual(['a:1', 'b:2']);
  });
});

describe('persistent session while storage writes fail (the faulty-storage fixture over level storage)', () => {
  let faultyDir: string;
  let control: string;
  let faulty: Storage;
  let faultyHost: TestHost;

  beforeAll(async () => {
    faultyDir = mkdtempSync(join(tmpdir(), 'bifro-session-faulty-'));
    control = join(faultyDir, 'control');
    writeFileSync(control, 'ok');
    const ctx = testPluginContext({
      options: { inner: 'level', innerOptions: { path: join(faultyDir, 'db') }, controlFile: control, pollMs: 5 },
    });
    faulty = await (FAULTY.storage as (c: PluginContext) => Promise<Storage>)(ctx);
    await faulty.init?.();
  });
  afterAll(async () => {
    await faulty.close?.();
    rmSync(faultyDir, { recursive: true, force: true });
  });
  beforeEach(() => {
    faultyHost = new TestHost(new SessionPersistence(faulty));
  });

  async function failing(on: boolean): Promise<void> {
    writeFileSync(control, on ? 'fail' : 'ok');
    await new Promise((r) => setTimeout(r, 30));
  }

  function faultySession(): Session {
    const clientId = `f${++clients}`;
    const s = new Session(`${TENANT}/${clientId}`, { ...CLIENT, clientId, protocolVersion: 5 }, 5, 60, faultyHost.clock, faultyHost);
    s.stored = true;
    return s;
  }

  it('sends PUBREL only once the pubrel record is stored: a failed write is tried again, and again at the next connection', async () => {
    const s = faultySession();
    const link = new TestLink();
    s.attach(link);
    const waiter = new TestWaiter();
    s.deliver(delivery('q2', 2), waiter);
    await until(() => waiter.pending === 0, 'the inflight put');
    await failing(true);
    s.received(1, false);
    await until(() => faultyHost.failures.includes('inflight pubrel'), 'the failed pubrel write');
    expect(link.pubrels).toEqual([]);
    // A new connection meanwhile gets no PUBREL either while the record cannot be stored.
    s.detach();
    const next = new TestLink();
    s.attach(next);
    await new Promise((r) => setTimeout(r, 50));
    expect(next.pubrels).toEqual([]);
    await failing(false);
    await until(() => next.pubrels.length > 0, 'the PUBREL once the record is stored', 3000);
    expect(next.pubrels).toEqual([1]);
    expect((await new SessionPersistence(faulty).listInflight(s)).map((r) => r.phase)).toEqual(['pubrel']);
  });

  it('stores again the records and the inbox commit of entries moved into flight while writes failed', async () => {
    const s = faultySession();
    s.deliver(delivery('a', 2), new TestWaiter());
    s.deliver(delivery('b', 2), new TestWaiter());
    const p = new SessionPersistence(faulty);
    await until(async () => (await p.count(s)) === 2, 'the inbox appends');
    await failing(true);
    const link = new TestLink();
    s.attach(link);
    await until(() => faultyHost.failures.includes('inbox pump'), 'the failed writes of the moved entries');
    expect(link.sent).toEqual(['a:1', 'b:2']);
    await failing(false);
    const records = async (): Promise<string[]> => (await p.listInflight(s)).map((r) => `${r.packetId}:${r.phase}:${r.inboxSeq}`);
    await until(async () => (await records()).length === 2, 'the records, written again', 3000);
    expect(await records()).toEqual(['1:publish:1', '2:publish:2']);
    expect(await p.count(s)).toBe(0);
  });

  it('appends again a QoS 1/2 delivery no publisher waits for (a will) after a failed write, to the session served under its key then', async () => {
    const s = faultySession();
    const p = new SessionPersistence(faulty);
    await failing(true);
    s.deliver(delivery('will/a', 1));
    await until(() => faultyHost.failures.includes('inbox append'), 'the failed append');
    // Not served here meanwhile (a cluster node without its lease): it waits.
    await new Promise((r) => setTimeout(r, 1200));
    expect(faultyHost.failures.filter((f) => f === 'inbox append')).toHaveLength(1);
    await failing(false);
    // Served again, by a new session object (taken back): appended there.
    const again = new Session(s.key, s.client, 5, 60, faultyHost.clock, faultyHost);
    again.stored = true;
    faultyHost.serving.set(s.key, again);
    await until(async () => (await p.count(again)) === 1, 'the append, tried again', 3000);
    // With a waiter, the publisher is told instead, and nothing is tried again.
    await failing(true);
    const waiter = new TestWaiter();
    again.deliver(delivery('q1', 1), waiter);
    await until(() => waiter.failures.length === 1, 'the waiter failed');
    await failing(false);
    await new Promise((r) => setTimeout(r, 1200));
    expect(await p.count(again)).toBe(1);
  });

  it('a moved entry that got PUBREC while its record was unstored is committed past only with its pubrel record', async () => {
    const s = faultySession();
    s.deliver(delivery('a', 2), new TestWaiter());
    const p = new SessionPersistence(faulty);
    await until(async () => (await p.count(s)) === 1, 'the inbox append');
    await failing(true);
    const link = new TestLink();
    s.attach(link);
    await until(() => faultyHost.failures.includes('inbox pump'), 'the failed writes of the moved entry');
    s.received(1, false);
    await until(() => faultyHost.failures.includes('inflight pubrel'), 'the failed pubrel write');
    // Gone: the pubrel write is not tried again until the next connection; the pump's retry is.
    s.detach();
    await failing(false);
    const records = async (): Promise<string[]> => (await p.listInflight(s)).map((r) => `${r.packetId}:${r.phase}:${r.inboxSeq}`);
    await until(async () => (await records()).length > 0, 'the record, written with the commit', 3000);
    // A crash now must find the message: its record in phase pubrel, so the next owner sends PUBREL.
    expect(await records()).toEqual(['1:pubrel:1']);
    expect(await p.count(s)).toBe(0);
  });
});
