import type { InflightRecord, InflightStore } from '@bifro/spi';
import { locked, nothingToWrite, type BatchOp } from './group-commit';
import { KEY_SPACE, joinKey, readU64, u16Key, withSeparator, writeU64 } from './key-codec';
import type { InflightOrder, SessionState } from './session-states';
import { prefixRange, type Generation, type StoreContext } from './store-context';
import { decodeInflight, encodeInflight } from '@bifro/spi';

/** The {@link SessionState.idKey} in a range prefix `<space><tenant>\0<client>\0`. */
function idKeyOf(prefix: Buffer, space: Buffer): string {
  return prefix.toString('latin1', space.length);
}

/** `prefix` + order (8 bytes big-endian) + packet id (2 bytes big-endian). */
function inflightKey(prefix: Buffer, order: number, packetId: number): Buffer {
  const key = Buffer.allocUnsafe(prefix.length + 10);
  prefix.copy(key, 0);
  writeU64(key, order, prefix.length);
  key.writeUInt16BE(packetId, prefix.length + 8);
  return key;
}

/**
 * Outbound inflight records under `f!<tenant>\0<client>\0<order><packetId>`: the order counter
 * in the key makes a range read return them in first-put order. A session's packet id → order
 * map is loaded once from the keys (no values) and kept in memory, so a replace keeps its key
 * (and its place) and a packet id put again after its removal gets a new, higher order. The
 * next order after a restart is one above the highest stored one, which keeps that rule.
 * Inbound QoS 2 packet ids are keys `i!<tenant>\0<client>\0<packetId>` without a value.
 */
export class LevelInflightStore implements InflightStore {
  constructor(private readonly ctx: StoreContext) {}

  async put(tenantId: string, clientId: string, records: readonly InflightRecord[]): Promise<void> {
    if (records.length === 0) return;
    const values = records.map(encodeInflight);
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    await locked(state.scope, async () => {
      const order = state.inflight ?? (await this.loadOrder(g, state));
      const ops: BatchOp[] = records.map((r, i) => {
        let o = order.byPacketId.get(r.packetId);
        if (o === undefined) {
          o = order.next++;
          order.byPacketId.set(r.packetId, o);
        }
        return { type: 'put', key: inflightKey(state.inflightPrefix, o, r.packetId), value: values[i] };
      });
      g.sessions.withInflight.add(state.idKey);
      return { value: undefined, written: g.group.write(ops, [state.scope]) };
    });
  }

  async remove(tenantId: string, clientId: string, packetIds: readonly number[]): Promise<void> {
    if (packetIds.length === 0) return;
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    await locked(state.scope, async () => {
      const order = state.inflight ?? (await this.loadOrder(g, state));
      const ops: BatchOp[] = [];
      for (const id of packetIds) {
        const o = order.byPacketId.get(id);
        if (o === undefined) continue;
        order.byPacketId.delete(id);
        ops.push({ type: 'del', key: inflightKey(state.inflightPrefix, o, id) });
      }
      // Once these deletes are written the session has no record left: loading its order again needs no read.
      if (order.byPacketId.size === 0) g.sessions.withInflight.delete(state.idKey);
      return ops.length === 0 ? nothingToWrite(undefined) : { value: undefined, written: g.group.write(ops, [state.scope]) };
    });
  }

  async list(tenantId: string, clientId: string): Promise<InflightRecord[]> {
    const prefix = withSeparator(joinKey(KEY_SPACE.inflight, tenantId, clientId));
    const g = this.ctx.gen ?? (await this.ctx.opened());
    if (!g.sessions.withInflight.has(idKeyOf(prefix, KEY_SPACE.inflight))) return [];
    this.ctx.counters.sessionRangeReads++;
    try {
      const values = await g.db.values(prefixRange(prefix)).all();
      return values.map(decodeInflight);
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
  }

  async addIncoming(tenantId: string, clientId: string, packetId: number): Promise<void> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    const key = u16Key(state.incomingPrefix, packetId);
    g.sessions.withIncoming.add(state.idKey);
    await locked(state.scope, () => ({
      value: undefined,
      written: g.group.write([{ type: 'put', key, value: Buffer.alloc(0) }], [state.scope]),
    }));
  }

  async removeIncoming(tenantId: string, clientId: string, packetId: number): Promise<void> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    const key = u16Key(state.incomingPrefix, packetId);
    await locked(state.scope, () => ({ value: undefined, written: g.group.write([{ type: 'del', key }], [state.scope]) }));
  }

  async listIncoming(tenantId: string, clientId: string): Promise<number[]> {
    const prefix = withSeparator(joinKey(KEY_SPACE.incoming, tenantId, clientId));
    const g = this.ctx.gen ?? (await this.ctx.opened());
    if (!g.sessions.withIncoming.has(idKeyOf(prefix, KEY_SPACE.incoming))) return [];
    this.ctx.counters.sessionRangeReads++;
    try {
      const keys = await g.db.keys(prefixRange(prefix)).all();
      return keys.map((k) => k.readUInt16BE(prefix.length));
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
  }

  /** Loads a session's packet id → order map from its keys. Call under the session's lock. */
  private async loadOrder(g: Generation, state: SessionState): Promise<InflightOrder> {
    if (!g.sessions.withInflight.has(state.idKey)) return (state.inflight = { byPacketId: new Map(), next: 1 });
    this.ctx.counters.sessionRangeReads++;
    let keys: Buffer[];
    try {
      keys = await g.db.keys(prefixRange(state.inflightPrefix)).all();
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
    const order: InflightOrder = { byPacketId: new Map(), next: 1 };
    const at = state.inflightPrefix.length;
    for (const key of keys) {
      const o = readU64(key, at);
      order.byPacketId.set(key.readUInt16BE(at + 8), o);
      order.next = Math.max(order.next, o + 1);
    }
    state.inflight = order;
    return order;
  }
}
