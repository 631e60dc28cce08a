import { SESSION_LIST_KEY_SEPARATOR, type PageRequest, type SessionRecord, type SessionStore } from '@bifro/spi';
import { copySessionRecord } from './message-copy';
import { SortedKeys } from './sorted-keys';

/** The sessions of one tenant, with their client ids sorted lazily for paging. */
class TenantSessions {
  readonly byClient = new Map<string, SessionRecord>();
  readonly order = new SortedKeys(() => this.byClient.keys());
}

/** What deleting a session must also clear (its inbox and inflight state). */
export type SessionStateEraser = (tenantId: string, clientId: string) => void;

/**
 * Session records in nested maps (tenant → client id → record). `list` pages over lazily
 * sorted keys: within a tenant by client id, across tenants by tenant then client id with
 * `after` being a `sessionListKey`.
 */
export class MemorySessionStore implements SessionStore {
  private readonly tenants = new Map<string, TenantSessions>();
  private readonly tenantOrder = new SortedKeys(() => this.tenants.keys());

  /** @param eraseState called on delete to drop the session's inbox and inflight state. */
  constructor(private readonly eraseState: SessionStateEraser) {}

  async get(tenantId: string, clientId: string): Promise<SessionRecord | undefined> {
    return this.tenants.get(tenantId)?.byClient.get(clientId);
  }

  async put(record: SessionRecord): Promise<void> {
    let tenant = this.tenants.get(record.tenantId);
    if (tenant === undefined) {
      tenant = new TenantSessions();
      this.tenants.set(record.tenantId, tenant);
      this.tenantOrder.invalidate();
    }
    const isNew = !tenant.byClient.has(record.clientId);
    tenant.byClient.set(record.clientId, copySessionRecord(record));
    if (isNew) tenant.order.invalidate();
  }

  async delete(tenantId: string, clientId: string): Promise<void> {
    this.eraseState(tenantId, clientId);
    const tenant = this.tenants.get(tenantId);
    if (tenant === undefined || !tenant.byClient.delete(clientId)) return;
    tenant.order.invalidate();
    if (tenant.byClient.size === 0) {
      this.tenants.delete(tenantId);
      this.tenantOrder.invalidate();
    }
  }

  async list(page: PageRequest): Promise<SessionRecord[]> {
    if (page.tenantId !== undefined) return this.listTenant(page.tenantId, page.after, page.limit);
    const out: SessionRecord[] = [];
    let afterTenant: string | undefined;
    let afterClient: string | undefined;
    if (page.after !== undefined) {
      const cut = page.after.indexOf(SESSION_LIST_KEY_SEPARATOR);
      afterTenant = cut < 0 ? page.after : page.after.slice(0, cut);
      afterClient = cut < 0 ? undefined : page.after.slice(cut + 1);
    }
    // Tenants before `afterTenant` are skipped; `afterTenant` itself resumes after `afterClient`
    // (from its start when the key named only a tenant, which sorts before all its sessions).
    for (const tenantId of this.tenantOrder.all()) {
      if (out.length >= page.limit) break;
      if (afterTenant !== undefined && tenantId < afterTenant) continue;
      const resumeAfter = tenantId === afterTenant ? afterClient : undefined;
      out.push(...this.listTenant(tenantId, resumeAfter, page.limit - out.length));
    }
    return out;
  }

  private listTenant(tenantId: string, after: string | undefined, limit: number): SessionRecord[] {
    const tenant = this.tenants.get(tenantId);
    if (tenant === undefined) return [];
    return tenant.order.page(after, limit).map((clientId) => tenant.byClient.get(clientId) as SessionRecord);
  }
}
