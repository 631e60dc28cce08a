/**
 * Per-session values keyed by (tenantId, clientId) in nested maps, dropping a tenant's map when
 * its last session goes.
 */
export class SessionMap<V> {
  private readonly tenants = new Map<string, Map<string, V>>();

  /** The value of a session, if any. */
  get(tenantId: string, clientId: string): V | undefined {
    return this.tenants.get(tenantId)?.get(clientId);
  }

  /** The value of a session, created with `create` when absent. */
  getOrCreate(tenantId: string, clientId: string, create: () => V): V {
    let sessions = this.tenants.get(tenantId);
    if (sessions === undefined) {
      sessions = new Map();
      this.tenants.set(tenantId, sessions);
    }
    let value = sessions.get(clientId);
    if (value === undefined) {
      value = create();
      sessions.set(clientId, value);
    }
    return value;
  }

  /** Forgets a session's value. */
  delete(tenantId: string, clientId: string): void {
    const sessions = this.tenants.get(tenantId);
    if (sessions === undefined) return;
    sessions.delete(clientId);
    if (sessions.size === 0) this.tenants.delete(tenantId);
  }
}
