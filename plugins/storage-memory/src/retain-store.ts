import type { PageRequest, RetainedTotals, RetainStore, StoredMessage } from '@bifro/spi';
import { copyMessage } from './message-copy';
import { RetainedIndex } from './retained-index';
import { SortedKeys } from './sorted-keys';

/** Bytes a retained message counts for in the totals: UTF-8 topic bytes plus payload bytes. */
export function retainedBytes(message: StoredMessage): number {
  return Buffer.byteLength(message.topic, 'utf8') + message.payload.byteLength;
}

/** The retained messages of one tenant: by topic for get/list, in a level index for match, with running totals. */
class TenantRetained {
  readonly byTopic = new Map<string, StoredMessage>();
  readonly index = new RetainedIndex();
  readonly order = new SortedKeys(() => this.byTopic.keys());
  bytes = 0;
}

/** Retained messages per tenant. Totals are kept up to date on every write (O(1) to read). */
export class MemoryRetainStore implements RetainStore {
  private readonly tenants = new Map<string, TenantRetained>();

  async put(tenantId: string, message: StoredMessage): Promise<void> {
    let tenant = this.tenants.get(tenantId);
    if (tenant === undefined) {
      tenant = new TenantRetained();
      this.tenants.set(tenantId, tenant);
    }
    const stored = copyMessage(message);
    const previous = tenant.byTopic.get(stored.topic);
    if (previous === undefined) tenant.order.invalidate();
    else tenant.bytes -= retainedBytes(previous);
    tenant.byTopic.set(stored.topic, stored);
    tenant.index.set(stored.topic, stored);
    tenant.bytes += retainedBytes(stored);
  }

  async delete(tenantId: string, topic: string): Promise<boolean> {
    const tenant = this.tenants.get(tenantId);
    const previous = tenant?.byTopic.get(topic);
    if (tenant === undefined || previous === undefined) return false;
    tenant.byTopic.delete(topic);
    tenant.index.delete(topic);
    tenant.order.invalidate();
    tenant.bytes -= retainedBytes(previous);
    if (tenant.byTopic.size === 0) this.tenants.delete(tenantId);
    return true;
  }

  async get(tenantId: string, topic: string): Promise<StoredMessage | undefined> {
    return this.tenants.get(tenantId)?.byTopic.get(topic);
  }

  async match(tenantId: string, filter: string, limit: number, now: number): Promise<StoredMessage[]> {
    return this.tenants.get(tenantId)?.index.match(filter, limit, now) ?? [];
  }

  async totals(tenantId: string): Promise<RetainedTotals> {
    const tenant = this.tenants.get(tenantId);
    return { topics: tenant?.byTopic.size ?? 0, bytes: tenant?.bytes ?? 0 };
  }

  async list(page: PageRequest & { readonly tenantId: string }): Promise<StoredMessage[]> {
    const tenant = this.tenants.get(page.tenantId);
    if (tenant === undefined) return [];
    return tenant.order.page(page.after, page.limit).map((topic) => tenant.byTopic.get(topic) as StoredMessage);
  }
}
