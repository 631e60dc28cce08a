import type { PageRequest, SessionRecord, SessionStore } from '@bifro/spi';
import { locked } from './group-commit';
import type { BatchOp } from './group-commit';
import { KEY_SPACE, encodeKeyString, concatKey, joinKey, prefixEnd, u64Key, withSeparator } from './key-codec';
import { iteratorLimit, prefixRange, type StoreContext } from './store-context';
import { decodeSession, encodeSession } from '@bifro/spi';

/**
 * Session records under `s!<tenant>\0<client>`. The key of a session is `s!` followed by the
 * encoded {@link sessionListKey}, so a list across tenants is one range read starting after
 * `s!<after>`, and a list within a tenant one range read over `s!<tenant>\0`.
 */
export class LevelSessionStore implements SessionStore {
  constructor(private readonly ctx: StoreContext) {}

  async get(tenantId: string, clientId: string): Promise<SessionRecord | undefined> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    let value: Buffer | undefined;
    try {
      value = await g.db.get(joinKey(KEY_SPACE.session, tenantId, clientId));
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
    return value === undefined ? undefined : decodeSession(value);
  }

  async put(record: SessionRecord): Promise<void> {
    const value = encodeSession(record);
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(record.tenantId, record.clientId);
    await locked(state.scope, () => ({
      value: undefined,
      written: g.group.write([{ type: 'put', key: state.sessionKey, value }], [state.scope]),
    }));
  }

  /**
   * Removes the record, the inbox (entries and meta), the outbound inflight records and the
   * inbound QoS 2 ids in one batch. Waits for the session's earlier writes to be on disk first,
   * then collects the keys to remove by range reads, so nothing written before is left behind.
   */
  async delete(tenantId: string, clientId: string): Promise<void> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const state = g.sessions.get(tenantId, clientId);
    await locked(state.scope, async () => {
      await state.scope.flushed();
      const db = g.db;
      const sessions = g.sessions;
      // Range reads only where records may be: the inbox entries are [first, next) once its meta is loaded.
      const inbox = state.inbox;
      const prefixes = [
        ...(inbox === undefined ? [state.inboxPrefix] : []),
        ...(sessions.withInflight.has(state.idKey) ? [state.inflightPrefix] : []),
        ...(sessions.withIncoming.has(state.idKey) ? [state.incomingPrefix] : []),
      ];
      this.ctx.counters.sessionRangeReads += prefixes.length;
      let records: (Buffer | undefined)[];
      let keyLists: Buffer[][];
      try {
        [records, ...keyLists] = await Promise.all([
          db.getMany([state.sessionKey, state.inboxMetaKey]),
          ...prefixes.map((p) => db.keys(prefixRange(p)).all()),
        ]);
      } catch (err) {
        throw this.ctx.readFailed(g, err);
      }
      const ops: BatchOp[] = [];
      if (records[0] !== undefined) ops.push({ type: 'del', key: state.sessionKey });
      if (records[1] !== undefined) ops.push({ type: 'del', key: state.inboxMetaKey });
      if (inbox !== undefined)
        for (let seq = inbox.first; seq < inbox.next; seq++) ops.push({ type: 'del', key: u64Key(state.inboxPrefix, seq) });
      for (const keys of keyLists) for (const key of keys) ops.push({ type: 'del', key });
      // What the database holds once this batch is written: nothing (seqs start again at 1).
      state.inbox = { first: 1, next: 1 };
      state.inflight = { byPacketId: new Map(), next: 1 };
      sessions.withInflight.delete(state.idKey);
      sessions.withIncoming.delete(state.idKey);
      // An unknown session costs no write (an empty batch resolves at once).
      return { value: undefined, written: g.group.write(ops, [state.scope]) };
    });
  }

  async list(page: PageRequest): Promise<SessionRecord[]> {
    const limit = iteratorLimit(page.limit);
    if (limit === 0) return [];
    let range: { gt?: Buffer; gte?: Buffer; lt?: Buffer };
    if (page.tenantId !== undefined) {
      const tenantPrefix = withSeparator(joinKey(KEY_SPACE.session, page.tenantId));
      range = {
        ...(page.after === undefined ? { gte: tenantPrefix } : { gt: concatKey(tenantPrefix, encodeKeyString(page.after)) }),
        lt: prefixEnd(tenantPrefix),
      };
    } else {
      range = {
        ...(page.after === undefined ? { gte: KEY_SPACE.session } : { gt: concatKey(KEY_SPACE.session, encodeKeyString(page.after)) }),
        lt: prefixEnd(KEY_SPACE.session),
      };
    }
    const g = this.ctx.gen ?? (await this.ctx.opened());
    try {
      const values = await g.db.values({ ...range, limit }).all();
      return values.map(decodeSession);
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
  }
}
