import type { InflightRecord, InflightStore } from '@bifro/spi';
import type { BucketEntry, KvBucket } from './kv-bucket';
import { sessionKey } from './layout';
import { asBuffer, type StoreContext } from './store-context';
import { decodeInflight, encodeInflight } from '@bifro/spi';

/**
 * Inflight state in KV `<prefix>_infl_<p>`: one key per outbound packet id
 * (`<session>.o.<packetId>`) and per incoming QoS 2 id (`<session>.i.<packetId>`), so an ack
 * rewrites one small value, never the whole window. An outbound value starts with its place in
 * first-put order: 0 on the first put, meaning the key's own revision (the stream sequence,
 * which grows in publish order), and on a replace the place of the record it replaces, read
 * first, so a replaced record keeps its place.
 */
export class NatsInflightStore implements InflightStore {
  /** Per session: the writes that add records, still under way ({@link clear} waits for them). */
  private readonly adding = new Map<string, Set<Promise<void>>>();

  constructor(private readonly ctx: StoreContext) {}

  /** `write` counted among the session's adding writes until it settles. */
  private adds(tenantId: string, clientId: string, write: Promise<void>): Promise<void> {
    const key = sessionKey(tenantId, clientId);
    let pending = this.adding.get(key);
    if (pending === undefined) this.adding.set(key, (pending = new Set()));
    pending.add(write);
    const settled = (): void => {
      pending.delete(write);
      if (pending.size === 0 && this.adding.get(key) === pending) this.adding.delete(key);
    };
    write.then(settled, settled);
    return write;
  }

  private bucket(tenantId: string, clientId: string): KvBucket {
    return this.ctx.inflight[this.ctx.layout.sessionPartition(tenantId, clientId)];
  }

  put(tenantId: string, clientId: string, records: readonly InflightRecord[]): Promise<void> {
    const values = records.map((r) => encodeInflight(r));
    return this.adds(
      tenantId,
      clientId,
      this.ctx.call(`inflight put (${tenantId}/${clientId})`, async () => {
        const b = this.bucket(tenantId, clientId);
        const keys = records.map((r) => `${sessionKey(tenantId, clientId)}.o.${r.packetId}`);
        const existing = await Promise.all(keys.map((k) => b.get(k)));
        await Promise.all(
          keys.map((k, i) => {
            const old = existing[i];
            const out = Buffer.allocUnsafe(8 + values[i].byteLength);
            out.writeDoubleBE(old === undefined ? 0 : placeOf(old), 0);
            out.set(values[i], 8);
            return b.put(k, out);
          }),
        );
      }),
    );
  }

  remove(tenantId: string, clientId: string, packetIds: readonly number[]): Promise<void> {
    return this.ctx.call(`inflight remove (${tenantId}/${clientId})`, async () => {
      const b = this.bucket(tenantId, clientId);
      await Promise.all(packetIds.map((id) => b.remove(`${sessionKey(tenantId, clientId)}.o.${id}`)));
    });
  }

  list(tenantId: string, clientId: string): Promise<InflightRecord[]> {
    return this.ctx.call(`inflight list (${tenantId}/${clientId})`, async () => {
      const found: Array<{ place: number; record: InflightRecord }> = [];
      await this.bucket(tenantId, clientId).scan(`${sessionKey(tenantId, clientId)}.o.*`, (e) => {
        found.push({ place: placeOf(e), record: decodeInflight(asBuffer(e.value).subarray(8)) });
        return true;
      });
      return found.sort((a, b) => a.place - b.place).map((f) => f.record);
    });
  }

  addIncoming(tenantId: string, clientId: string, packetId: number): Promise<void> {
    return this.adds(
      tenantId,
      clientId,
      this.ctx.call(`inflight addIncoming (${tenantId}/${clientId})`, async () => {
        await this.bucket(tenantId, clientId).put(`${sessionKey(tenantId, clientId)}.i.${packetId}`, new Uint8Array(0));
      }),
    );
  }

  removeIncoming(tenantId: string, clientId: string, packetId: number): Promise<void> {
    return this.ctx.call(`inflight removeIncoming (${tenantId}/${clientId})`, () =>
      this.bucket(tenantId, clientId).remove(`${sessionKey(tenantId, clientId)}.i.${packetId}`),
    );
  }

  listIncoming(tenantId: string, clientId: string): Promise<number[]> {
    return this.ctx.call(`inflight listIncoming (${tenantId}/${clientId})`, async () => {
      const keys = await this.bucket(tenantId, clientId).keys(`${sessionKey(tenantId, clientId)}.i.*`);
      return keys.map((k) => Number(k.slice(k.lastIndexOf('.') + 1)));
    });
  }

  /**
   * Removes a session's inflight state (session delete), once the writes adding records that the
   * ended session issued have settled: one landing after the removal would give the next session
   * with this client id a stale record (a message it never had, a QoS 2 packet id it would drop).
   */
  async clear(tenantId: string, clientId: string): Promise<void> {
    const pending = this.adding.get(sessionKey(tenantId, clientId));
    if (pending !== undefined) await Promise.allSettled([...pending]);
    await this.bucket(tenantId, clientId).remove(`${sessionKey(tenantId, clientId)}.>`);
  }
}

/** The first-put place of a stored outbound record. */
function placeOf(e: BucketEntry): number {
  const stored = asBuffer(e.value).readDoubleBE(0);
  return stored === 0 ? e.revision : stored;
}
