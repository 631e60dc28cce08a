import type { InflightRecord, InflightStore } from '@bifro/spi';
import { copyInflightRecord } from './message-copy';
import { SessionMap } from './session-map';

/** The QoS 1/2 state of one session. */
class SessionInflight {
  /** Outbound records by packet id; a Map keeps first-insertion order, and `set` on an existing key keeps its place. */
  readonly outbound = new Map<number, InflightRecord>();
  /** Inbound QoS 2 packet ids awaiting PUBREL. */
  readonly incoming = new Set<number>();
}

/** Outbound inflight records and inbound QoS 2 packet ids per session. */
export class MemoryInflightStore implements InflightStore {
  private readonly sessions = new SessionMap<SessionInflight>();

  async put(tenantId: string, clientId: string, records: readonly InflightRecord[]): Promise<void> {
    if (records.length === 0) return;
    const state = this.state(tenantId, clientId);
    for (const r of records) state.outbound.set(r.packetId, copyInflightRecord(r));
  }

  async remove(tenantId: string, clientId: string, packetIds: readonly number[]): Promise<void> {
    const state = this.sessions.get(tenantId, clientId);
    if (state === undefined) return;
    for (const id of packetIds) state.outbound.delete(id);
  }

  async list(tenantId: string, clientId: string): Promise<InflightRecord[]> {
    const state = this.sessions.get(tenantId, clientId);
    return state === undefined ? [] : [...state.outbound.values()];
  }

  async addIncoming(tenantId: string, clientId: string, packetId: number): Promise<void> {
    this.state(tenantId, clientId).incoming.add(packetId);
  }

  async removeIncoming(tenantId: string, clientId: string, packetId: number): Promise<void> {
    this.sessions.get(tenantId, clientId)?.incoming.delete(packetId);
  }

  async listIncoming(tenantId: string, clientId: string): Promise<number[]> {
    const state = this.sessions.get(tenantId, clientId);
    return state === undefined ? [] : [...state.incoming];
  }

  /** Drops all inflight state of a session. */
  erase(tenantId: string, clientId: string): void {
    this.sessions.delete(tenantId, clientId);
  }

  private state(tenantId: string, clientId: string): SessionInflight {
    return this.sessions.getOrCreate(tenantId, clientId, () => new SessionInflight());
  }
}
