import type { LoadWindow, RateSeries, TenantRates } from '../tenancy/tenant-rates';
import type { TenantMetrics } from '../tenancy/tenant-usage';
import { CORE_VERSION } from '../plugin-host/core-version';
import { Message } from '../session/message';
import type { TimerWheel, WheelEntry } from '../session/timer-wheel';
import type { Engine } from './engine';

/** The publisher id of `$SYS` messages (No Local compares it with subscribers' client ids). */
const SYS_PUBLISHER = '';

/** One `$SYS` topic and how its figure is made from the tenant's metrics and rates. */
interface SysTopic {
  readonly topic: string;
  value(m: TenantMetrics, rates: TenantRates, tenantId: string, uptimeSeconds: number): string;
}

const LOADS: readonly [RateSeries, string, string][] = [
  ['messagesIn', 'messages', 'received'],
  ['messagesOut', 'messages', 'sent'],
  ['bytesIn', 'bytes', 'received'],
  ['bytesOut', 'bytes', 'sent'],
];
const LOAD_TOPIC_WINDOWS: readonly [LoadWindow, string][] = [
  ['1m', '1min'],
  ['5m', '5min'],
  ['15m', '15min'],
];

/**
 * The topics, named like mosquitto's (docs/metrics.md § $SYS topics). Load averages are per
 * minute, as mosquitto's are, so dashboards made for it read them right.
 */
export const SYS_TOPICS: readonly SysTopic[] = [
  { topic: '$SYS/broker/version', value: () => `bifro version ${CORE_VERSION}` },
  { topic: '$SYS/broker/uptime', value: (_m, _r, _t, up) => `${up} seconds` },
  { topic: '$SYS/broker/clients/connected', value: (m) => String(m.connections) },
  { topic: '$SYS/broker/clients/disconnected', value: (m) => String(Math.max(0, m.sessions - m.connections)) },
  { topic: '$SYS/broker/clients/total', value: (m) => String(m.sessions) },
  { topic: '$SYS/broker/messages/received', value: (m) => String(m.messagesIn) },
  { topic: '$SYS/broker/messages/sent', value: (m) => String(m.messagesOut) },
  { topic: '$SYS/broker/publish/messages/dropped', value: (m) => String(m.messagesDropped) },
  { topic: '$SYS/broker/bytes/received', value: (m) => String(m.bytesIn) },
  { topic: '$SYS/broker/bytes/sent', value: (m) => String(m.bytesOut) },
  { topic: '$SYS/broker/retained messages/count', value: (m) => String(m.retainedMessages) },
  {
    topic: '$SYS/broker/subscriptions/count',
    value: (m) => String(m.transientSubscriptions + m.persistentSubscriptions + m.sharedSubscriptions),
  },
  ...LOADS.flatMap(([series, what, direction]) =>
    LOAD_TOPIC_WINDOWS.map(([window, suffix]) => ({
      topic: `$SYS/broker/load/${what}/${direction}/${suffix}`,
      value: (_m: TenantMetrics, rates: TenantRates, tenantId: string) => (rates.rate(tenantId, series, window) * 60).toFixed(2),
    })),
  ),
];

/**
 * `$SYS` topics per tenant: every `sysInterval` seconds each tenant with a subscriber to one of
 * the topics gets its own figures (never another tenant's, never the broker's sum), published
 * through the engine like any message, at QoS 0. Not retained: Bifro would otherwise write every
 * tenant's figures to storage every interval; a new subscriber gets them at the next
 * publication. Clients cannot publish to `$SYS` (`isReservedTopic`). Runs on the timer wheel, on
 * the broker's clock.
 */
export class SysTopics implements WheelEntry {
  wheelSlot = -1;
  private readonly intervalMs: number;
  private next = 0;
  private running = false;

  constructor(
    private readonly engine: Engine,
    private readonly rates: TenantRates,
    private readonly wheel: TimerWheel,
    intervalSeconds: number,
    private readonly startedAt: number,
  ) {
    this.intervalMs = intervalSeconds * 1000;
  }

  /** Start publishing (nothing when `sysInterval` is 0). */
  start(): void {
    if (this.running || this.intervalMs <= 0) return;
    this.running = true;
    this.next = this.wheel.clock() + this.intervalMs;
    this.wheel.schedule(this, this.next);
  }

  stop(): void {
    this.running = false;
    this.wheel.cancel(this);
  }

  onWheelTick(now: number): number {
    if (!this.running) return 0;
    if (now < this.next) return this.next;
    this.publishAll(now);
    this.next = now + this.intervalMs;
    return this.next;
  }

  /**
   * Publish to every tenant holding a route (only those can have a `$SYS` subscriber) the
   * topics someone subscribes to. The router's match is cached per topic, so a tenant without
   * such a subscriber costs a few lookups; its figures are read only when one exists.
   */
  publishAll(now: number): number {
    const router = this.engine.router;
    const uptime = Math.max(0, Math.floor((now - this.startedAt) / 1000));
    let published = 0;
    for (const tenantId of [...router.tenantIds()]) {
      let metrics: TenantMetrics | undefined;
      for (const t of SYS_TOPICS) {
        const match = router.match(tenantId, t.topic);
        if (match.direct.length === 0 && match.groups.length === 0) continue;
        metrics ??= this.engine.usage.metrics(tenantId);
        const payload = Buffer.from(t.value(metrics, this.rates, tenantId, uptime), 'utf8');
        this.engine.publish(tenantId, new Message(t.topic, payload, 0, false, undefined, now, 0, SYS_PUBLISHER));
        published++;
      }
    }
    return published;
  }
}
