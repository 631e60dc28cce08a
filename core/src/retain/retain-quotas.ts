import type { ClientInfo } from '@bifro/spi';
import type { EmitEvent } from '../base/broker-events';
import { describeError } from '../base/errors';
import type { ThrottlerManager } from '../plugin-host/managers';
import type { Logger } from '../base/logger';
import type { Message } from '../session/message';
import type { TimerWheel } from '../session/timer-wheel';
import type { TenantLimits } from '../tenancy/tenant-limits';
import type { TenantUsage } from '../tenancy/tenant-usage';
import type { RetainService } from './retain-service';

/**
 * The tenant's retained quotas (docs/tenancy.md § Usage and quotas): over them the message is not
 * retained but still delivered. The rates are checked at once; when the topics or bytes gauge is
 * at its quota, replacing a topic that already has a retained message stays allowed for the
 * topics quota (a lookup decides), not for the bytes quota.
 */
export class RetainQuotas {
  /** Tenants whose retained totals were read from storage into their usage. */
  private readonly totalsLoaded = new Set<string>();
  /** Per tenant, the number of the latest totals read issued while one is running. */
  private readonly reads = new Map<string, number>();

  constructor(
    private readonly retain: RetainService,
    private readonly usage: TenantUsage,
    private readonly wheel: TimerWheel,
    private readonly limits: TenantLimits,
    private readonly throttler: ThrottlerManager,
    private readonly logger: Logger,
    private readonly emit: EmitEvent,
  ) {}

  /** Whether the message may be retained: at once, or after a lookup (the totals, or whether the topic is retained already). */
  allowed(client: ClientInfo, msg: Message): boolean | Promise<boolean> {
    const tenantId = client.tenantId;
    const now = this.wheel.now;
    this.usage.count(tenantId, 'TotalRetainMessagesPerSecond', 1, now);
    this.usage.count(tenantId, 'TotalRetainBytesPerSecond', msg.size, now);
    const limits = this.limits;
    if (!limits.hasResource(client, 'TotalRetainMessagesPerSecond') || !limits.hasResource(client, 'TotalRetainBytesPerSecond'))
      return false;
    if (!this.totalsLoaded.has(tenantId)) {
      return this.loadTotals(tenantId).then(() => this.gaugesAllow(client, msg));
    }
    return this.gaugesAllow(client, msg);
  }

  private gaugesAllow(client: ClientInfo, msg: Message): boolean | Promise<boolean> {
    if (!this.limits.hasResource(client, 'TotalRetainedBytes')) return false;
    if (this.throttler.hasResource(client.tenantId, 'TotalRetainTopics')) return true;
    return this.retain.has(client.tenantId, msg.topic).then((replacing) => {
      if (!replacing) this.emit('resourceExhausted', client, { resource: 'TotalRetainTopics' });
      return replacing;
    });
  }

  private loadTotals(tenantId: string): Promise<void> {
    // Reads of one tenant's totals can finish out of order: only the newest read's figures are kept.
    const read = (this.reads.get(tenantId) ?? 0) + 1;
    this.reads.set(tenantId, read);
    return this.retain.totals(tenantId).then(
      (t) => {
        if (this.reads.get(tenantId) !== read) return;
        this.reads.delete(tenantId);
        this.totalsLoaded.add(tenantId);
        this.usage.set(tenantId, 'TotalRetainTopics', t.topics);
        this.usage.set(tenantId, 'TotalRetainedBytes', t.bytes);
      },
      (err: unknown) => {
        if (this.reads.get(tenantId) === read) this.reads.delete(tenantId);
        this.logger.warn({ tenantId, err: describeError(err) }, 'retained totals not read');
      },
    );
  }

  /** A retained message was stored or cleared: read the tenant's totals again. */
  refresh(tenantId: string): void {
    void this.loadTotals(tenantId);
  }
}
