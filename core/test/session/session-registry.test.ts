import 'reflect-metadata';
import type { ClientInfo, ProtocolVersion } from '@bifro/spi';
import { Engine } from '../../src/broker/engine';
import { StandaloneTopology } from '../../src/topology/standalone';
import { loadPlugins } from '../../src/plugin-host';
import type { PluginHost } from '../../src/plugin-host/managers';
import { RC } from '../../src/codec/reason-codes';
import { createLogger } from '../../src/base/logger';
import type { Logger } from '../../src/base/logger';
import type { BrokerConfig } from '../../src/base/config-types';
import { Message } from '../../src/session/message';
import { LocalRouter } from '../../src/routing/local-router';
import { RetainService } from '../../src/retain/retain-service';
import { SessionPersistence } from '../../src/session/session-persistence';
import type { Delivery, Session, SessionLink } from '../../src/session/session';
import type { SessionRegistry } from '../../src/session/session-registry';
import { TimerWheel } from '../../src/session/timer-wheel';
import { TenantUsage } from '../../src/tenancy/tenant-usage';
import { configWith } from '../plugin-host/plugin-host-fixtures';

/** A connection as the registry sees it: a session link that records how it was disconnected. */
class FakeLink implements SessionLink {
  readonly v5 = true;
  readonly receiveMaximum = 65535;
  readonly maxQueuedBytes = 1 << 20;
  readonly origin = { listener: 'test', remoteAddress: '127.0.0.1', remotePort: 1 };
  closeCause: unknown;
  disconnectedWith: number | undefined;
  readonly sent: Delivery[] = [];
  writable(): boolean {
    return true;
  }
  bufferedBytes(): number {
    return 0;
  }
  sendPublish(delivery: Delivery): boolean {
    this.sent.push(delivery);
    return true;
  }
  sendPubrel(): void {}
  queueOverflowed(): void {}
  disconnect(reasonCode: number): void {
    this.disconnectedWith = reasonCode;
  }
}

function clientInfo(clientId: string, protocolVersion: ProtocolVersion = 5): ClientInfo {
  return {
    tenantId: 'acme',
    userId: 'u',
    clientId,
    protocolVersion,
    remoteAddress: '127.0.0.1',
    remotePort: 1,
    listener: 'test',
    attrs: {},
  };
}

function will(clientId: string, delaySeconds: number): { message: Message; delaySeconds: number } {
  return { message: new Message('wills/' + clientId, Buffer.from('gone'), 0, false, undefined, 0, 0, clientId), delaySeconds };
}

/** An engine over the loaded plugins' managers, as the composition root injects them. */
function engineOver(config: BrokerConfig, logger: Logger, wheel: TimerWheel, usage: TenantUsage, host: PluginHost): Engine {
  const topology = new StandaloneTopology(config, wheel.clock);
  const engine = new Engine(
    config,
    logger,
    wheel,
    usage,
    host.auth,
    host.acl,
    host.balancer,
    host.events,
    host.settings,
    host.throttler,
    new LocalRouter<Session>(),
    new RetainService(host.storage, wheel.clock),
    new SessionPersistence(host.storage),
    topology,
  );
  topology.bind(engine);
  return engine;
}

describe('SessionRegistry (injectable clock, memory storage)', () => {
  let host: PluginHost;
  let wheel: TimerWheel;
  let engine: Engine;
  let registry: SessionRegistry;
  let now: number;
  /** Topics published through the broker's publish path (wills). */
  let published: string[];

  /** Move the clock on by `ms`, one wheel slot at a time. */
  function advance(ms: number): void {
    for (const end = now + ms; now < end;) {
      now = Math.min(end, now + wheel.slotMs);
      wheel.tick(now);
    }
  }

  /** A session opened by CONNECT and attached to `link`. */
  function connect(clientId: string, link: SessionLink, clean: boolean, expiry: number, w?: ReturnType<typeof will>) {
    const opened = registry.open(link, clientInfo(clientId), clean, expiry, w);
    opened.session.attach(link);
    return opened;
  }

  beforeEach(async () => {
    now = 1_700_000_000_000;
    wheel = new TimerWheel(250, 512, { clock: () => now, manual: true });
    const usage = new TenantUsage();
    const config = configWith({ storage: { use: '@bifro/plugin-storage-memory', required: true, options: {} } });
    const logger = createLogger({ level: 'silent' });
    host = await loadPlugins(config, logger, usage);
    engine = engineOver(config, logger, wheel, usage, host);
    registry = engine.sessions;
    published = [];
    const publish = engine.publish.bind(engine);
    engine.publish = (tenantId: string, msg: Message) => {
      published.push(msg.topic);
      return publish(tenantId, msg);
    };
  });

  afterEach(async () => {
    engine.close();
    wheel.close();
    await host.close();
  });

  it('takes over a live connection with 0x8E and resumes its session (Session Present)', () => {
    const first = new FakeLink();
    const a = connect('c1', first, false, 60);
    expect(a.existing).toBeUndefined();
    const second = new FakeLink();
    const b = registry.open(second, clientInfo('c1'), false, 60, undefined);
    expect(first.disconnectedWith).toBe(RC.SessionTakenOver);
    expect(first.closeCause).toBe('reported');
    expect(b.existing).toBe(a.session);
    expect(b.session).toBe(a.session);
    expect(registry.size).toBe(1);
  });

  it("adopts a record judging its expiry at the CONNECT's arrival when given (a claim that waited for a silent owner)", () => {
    const record = (clientId: string) => ({
      tenantId: 'acme',
      clientId,
      userId: 'u',
      protocolVersion: 5 as const,
      expirySeconds: 2,
      createdAt: now - 10_000,
      disconnectedAt: now - 3000,
      subscriptions: [],
    });
    // Judged now: expired 1 s ago, ended at once.
    registry.adopt(record('late'));
    expect(registry.get('acme\u0000late')).toBeUndefined();
    // Judged when the CONNECT arrived, 1.5 s after the disconnect: still there for it to resume.
    const kept = registry.adopt(record('waited'), now - 1500);
    expect(registry.get('acme\u0000waited')).toBe(kept);
    const link = new FakeLink();
    const opened = connect('waited', link, false, 2);
    expect(opened.existing).toBe(kept);
  });

  it('does not kick the connection that is connecting', () => {
    const link = new FakeLink();
    const a = connect('c1', link, false, 60);
    registry.open(link, clientInfo('c1'), false, 60, undefined);
    expect(link.disconnectedWith).toBeUndefined();
    expect(registry.get(a.session.key)).toBe(a.session);
  });

  it('clean start ends the stored session; a new connection within the will delay cancels the will [MQTT-3.1.2-8]', () => {
    const a = connect('c1', new FakeLink(), false, 60, will('c1', 10));
    registry.disconnected(a.session, true);
    advance(5000);
    const b = connect('c1', new FakeLink(), true, 60);
    expect(b.existing).toBeUndefined();
    expect(b.session).not.toBe(a.session);
    advance(20_000);
    expect(published).toEqual([]);
  });

  it('resume within the will delay cancels the will and the expiry', () => {
    const a = connect('c1', new FakeLink(), false, 30, will('c1', 10));
    registry.disconnected(a.session, true);
    advance(5000);
    const b = connect('c1', new FakeLink(), false, 30);
    expect(b.session).toBe(a.session);
    advance(60_000);
    expect(published).toEqual([]);
    expect(registry.get(a.session.key)).toBe(a.session);
  });

  it('fires the will after its delay, not before, and once', () => {
    const a = connect('c1', new FakeLink(), false, 60, will('c1', 3));
    registry.disconnected(a.session, true);
    advance(2750);
    expect(published).toEqual([]);
    advance(500);
    expect(published).toEqual(['wills/c1']);
    advance(10_000);
    expect(published).toEqual(['wills/c1']);
  });

  it('publishes the will at once without a delay, and not after a normal DISCONNECT', () => {
    const a = connect('c1', new FakeLink(), false, 60, will('c1', 0));
    registry.disconnected(a.session, true);
    expect(published).toEqual(['wills/c1']);
    const b = connect('c2', new FakeLink(), false, 60, will('c2', 0));
    registry.disconnected(b.session, false);
    advance(5000);
    expect(published).toEqual(['wills/c1']);
  });

  it('the will delay is capped by the session expiry, and the session ends at its expiry', () => {
    const a = connect('c1', new FakeLink(), false, 4, will('c1', 100));
    registry.disconnected(a.session, true);
    advance(3500);
    expect(registry.get(a.session.key)).toBe(a.session);
    expect(published).toEqual([]);
    advance(1000);
    expect(published).toEqual(['wills/c1']);
    expect(registry.get(a.session.key)).toBeUndefined();
  });

  it('ends a session with expiry 0 at disconnect', () => {
    const a = connect('c1', new FakeLink(), true, 0);
    expect(a.expiry).toBe(0);
    registry.disconnected(a.session, false);
    expect(registry.get(a.session.key)).toBeUndefined();
    expect(registry.size).toBe(0);
  });

  it('clamps the requested expiry; v3 without clean session never expires', () => {
    const v5 = connect('c1', new FakeLink(), false, 0xfffffffe);
    expect(v5.requested).toBe(0xfffffffe);
    expect(v5.expiry).toBe(Math.min(0xfffffffe, host.settings.get('acme', 'MaxSessionExpirySeconds')));
    const v3 = registry.open(new FakeLink(), clientInfo('c3', 4), false, undefined, undefined);
    expect(v3.requested).toBe(0xffffffff);
    const v3clean = registry.open(new FakeLink(), clientInfo('c4', 4), true, undefined, undefined);
    expect(v3clean.requested).toBe(0);
    expect(v3clean.expiry).toBe(0);
  });

  it('restores stored sessions at boot with their will and expiry deadlines', async () => {
    const a = connect('c1', new FakeLink(), false, 60, will('c1', 5));
    await registry.store(a.session, undefined);
    // The broker stops while c1 is connected: a fresh registry over the same storage brings it back.
    const again = engineOver(engine.config, engine.logger, wheel, engine.usage, host);
    try {
      const republished: string[] = [];
      const publish = again.publish.bind(again);
      again.publish = (tenantId: string, msg: Message) => {
        republished.push(msg.topic);
        return publish(tenantId, msg);
      };
      expect(await again.sessions.restore()).toBe(1);
      const restored = again.sessions.get(a.session.key) as Session;
      expect(restored.connected).toBe(false);
      advance(4750);
      expect(republished).toEqual([]);
      advance(500);
      expect(republished).toEqual(['wills/c1']);
      advance(60_000);
      expect(again.sessions.get(a.session.key)).toBeUndefined();
    } finally {
      again.close();
    }
  });
});
