import type { Storage } from '@bifro/spi';
import { MemoryBanStore } from './ban-store';
import { MemoryInboxStore } from './inbox-store';
import { MemoryInflightStore } from './inflight-store';
import { MemoryRetainStore } from './retain-store';
import { MemorySessionStore } from './session-store';

/**
 * A {@link Storage} that keeps everything in the process's memory: fast, and gone at restart
 * (`durable` is false). For tests, development and brokers whose sessions need not survive.
 *
 * Copy-on-store: every write stores a deep copy of the caller's data (payloads, correlation
 * data, user properties, subscription lists), so a caller may reuse or mutate its buffers once
 * the write resolved without changing what is stored. Reads return the stored objects without
 * copying: treat them as read-only.
 *
 * Costs: inbox append/commit/count O(1) amortised, read O(log n + returned); retained match
 * walks a per-tenant topic-level trie (a literal level is one lookup); session and retained
 * paging sort a tenant's keys once after each key addition or removal.
 *
 * @example
 * ```ts
 * const storage = new MemoryStorage();
 * await storage.retained.put('t1', { topic: 'a/b', payload: Buffer.from('x'), qos: 0, retain: true, publishedAt: Date.now() });
 * await storage.retained.match('t1', 'a/+', 100, Date.now()); // [the message of a/b]
 * ```
 */
export class MemoryStorage implements Storage {
  readonly durable = false;
  readonly inbox = new MemoryInboxStore();
  readonly inflight = new MemoryInflightStore();
  readonly retained = new MemoryRetainStore();
  /** Bans (SPI 1.3.0); gone at restart like the rest. */
  readonly bans = new MemoryBanStore();
  readonly sessions = new MemorySessionStore((tenantId, clientId) => {
    this.inbox.erase(tenantId, clientId);
    this.inflight.erase(tenantId, clientId);
  });
}
