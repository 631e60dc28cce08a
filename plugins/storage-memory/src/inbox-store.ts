import type { InboxAppendResult, InboxEntry, InboxLimit, InboxMessage, InboxStore } from '@bifro/spi';
import { InboxQueue } from './inbox-queue';
import { SessionMap } from './session-map';

/** The inboxes of all sessions: one {@link InboxQueue} per (tenant, client id). Counts are O(1). */
export class MemoryInboxStore implements InboxStore {
  private readonly queues = new SessionMap<InboxQueue>();

  async append(tenantId: string, clientId: string, messages: readonly InboxMessage[], limit: InboxLimit): Promise<InboxAppendResult> {
    if (messages.length === 0) return { appended: 0, dropped: 0 };
    return this.queues.getOrCreate(tenantId, clientId, () => new InboxQueue()).append(messages, limit);
  }

  async read(tenantId: string, clientId: string, afterSeq: number, max: number): Promise<InboxEntry[]> {
    return this.queues.get(tenantId, clientId)?.read(afterSeq, max) ?? [];
  }

  async commit(tenantId: string, clientId: string, uptoSeq: number): Promise<void> {
    this.queues.get(tenantId, clientId)?.commit(uptoSeq);
  }

  async count(tenantId: string, clientId: string): Promise<number> {
    return this.queues.get(tenantId, clientId)?.size ?? 0;
  }

  /** Drops a session's inbox (its seqs start again at 1). */
  erase(tenantId: string, clientId: string): void {
    this.queues.delete(tenantId, clientId);
  }
}
