import type { Storage } from '@bifro/spi';
import { inject, injectable } from 'tsyringe';
import type { Clock } from '../base/clock';
import { RUNTIME_TOKENS } from '../base/tokens';
import { PLUGIN_TOKENS } from '../plugin-host/tokens';
import type { Message } from '../session/message';
import { fromStored, toStored } from '../session/stored-message';

/**
 * Retained messages over the storage SPI: one per (tenant, topic). A PUBLISH with RETAIN and an
 * empty payload clears the topic [MQTT-3.3.1-10], [MQTT-3.3.1-11]; any other replaces it
 * [MQTT-3.3.1-5].
 */
@injectable()
export class RetainService {
  /** Per tenant, a promise that settles once every retained write issued so far has: a match waits for it. */
  private readonly lastWrite = new Map<string, Promise<unknown>>();

  constructor(
    @inject(PLUGIN_TOKENS.Storage) private readonly storage: Storage,
    /** The broker's clock: what has expired is decided against it. */
    @inject(RUNTIME_TOKENS.Clock) private readonly clock: Clock,
  ) {}

  /** Store or clear; resolves with what happened. */
  apply(tenantId: string, msg: Message): Promise<'retained' | 'cleared'> {
    const write: Promise<'retained' | 'cleared'> =
      msg.payload.length === 0
        ? this.storage.retained.delete(tenantId, msg.topic).then(() => 'cleared' as const)
        : this.storage.retained.put(tenantId, toStored(msg)).then(() => 'retained' as const);
    this.track(tenantId, write);
    return write;
  }

  /**
   * Make matches of the tenant wait for `work` too (a retained write, or one still being decided).
   * A match waits for every write issued before it, not only the last one: a write whose quota
   * lookup is still running lands after writes issued later.
   */
  track(tenantId: string, work: Promise<unknown>): void {
    const before = this.lastWrite.get(tenantId);
    const all = before === undefined ? work : Promise.allSettled([before, work]);
    this.lastWrite.set(tenantId, all);
    const forget = (): void => {
      if (this.lastWrite.get(tenantId) === all) this.lastWrite.delete(tenantId);
    };
    all.then(forget, forget);
  }

  /** Whether a topic has a retained message. */
  async has(tenantId: string, topic: string): Promise<boolean> {
    return (await this.storage.retained.get(tenantId, topic)) !== undefined;
  }

  /** The tenant's retained topics and bytes, as the store counts them. */
  totals(tenantId: string): Promise<{ topics: number; bytes: number }> {
    return this.storage.retained.totals(tenantId);
  }

  /** Retained messages matching a filter, expired ones left out, at most `limit`. */
  async match(tenantId: string, filter: string, limit: number): Promise<Message[]> {
    if (limit <= 0) return [];
    const pending = this.lastWrite.get(tenantId);
    if (pending !== undefined) await pending.catch(() => undefined);
    const now = this.clock();
    const found = await this.storage.retained.match(tenantId, filter, limit, now);
    return found.map((s) => fromStored(s));
  }
}
