import { KEY_SPACE, concatKey, joinKey, prefixEnd, withSeparator } from './key-codec';
import { Scope } from './group-commit';
import { prefixRange, type Db } from './store-context';
import type { InboxMeta } from './value-codec';

/** Where each outbound inflight record of a session sits in first-put order. */
export interface InflightOrder {
  /** packet id → ordering counter value (part of the record's key). */
  readonly byPacketId: Map<number, number>;
  /** The counter value the next new packet id gets. */
  next: number;
}

/**
 * What the storage keeps in memory about one session: the lock that orders its writes, the keys
 * of its records, and caches loaded from the database on first use (inbox meta, inflight order),
 * which writes keep up to date so that an append or a put needs no read before its write.
 */
export class SessionState {
  readonly scope = new Scope();
  /** Inbox meta; undefined until loaded. */
  inbox: InboxMeta | undefined = undefined;
  /** Inflight order; undefined until loaded. */
  inflight: InflightOrder | undefined = undefined;
  /** `<tenant>\0<client>\0` as a latin1 string: the session's entry in {@link SessionStates}' key sets. */
  readonly idKey: string;
  /** `s!<tenant>\0<client>` */
  readonly sessionKey: Buffer;
  /** `qm!<tenant>\0<client>` */
  readonly inboxMetaKey: Buffer;
  /** `q!<tenant>\0<client>\0` */
  readonly inboxPrefix: Buffer;
  /** `f!<tenant>\0<client>\0` */
  readonly inflightPrefix: Buffer;
  /** `i!<tenant>\0<client>\0` */
  readonly incomingPrefix: Buffer;

  constructor(tenantId: string, clientId: string) {
    const id = joinKey(Buffer.alloc(0), tenantId, clientId);
    const idSep = withSeparator(id);
    this.idKey = idSep.toString('latin1');
    this.sessionKey = concatKey(KEY_SPACE.session, id);
    this.inboxMetaKey = concatKey(KEY_SPACE.inboxMeta, id);
    this.inboxPrefix = concatKey(KEY_SPACE.inbox, idSep);
    this.inflightPrefix = concatKey(KEY_SPACE.inflight, idSep);
    this.incomingPrefix = concatKey(KEY_SPACE.incoming, idSep);
  }
}

/**
 * The {@link SessionState}s of sessions in use. Bounded: beyond `maxCached` states, idle ones
 * (no call running or waiting, no write on its way to disk) are forgotten, oldest first (by tenant), and
 * reloaded from the database when used again. A busy state is never forgotten, so a cache is
 * never reloaded while a write it made is not on disk yet.
 */
export class SessionStates {
  private readonly byTenant = new Map<string, Map<string, SessionState>>();
  private count = 0;
  /**
   * Sessions ({@link SessionState.idKey}) that have, or may have, outbound inflight records in
   * the database (after the writes handed over so far). Read from the keys at open, then kept by
   * the writes, so a session without any (most of them, and every session created since the open)
   * costs no range read to load its inflight order or to list its records.
   */
  readonly withInflight = new Set<string>();
  /** Likewise for inbound QoS 2 packet ids (kept on add and session delete, not on remove: a "may have"). */
  readonly withIncoming = new Set<string>();

  constructor(private readonly maxCached: number) {}

  /** The state of a session, created when absent. */
  get(tenantId: string, clientId: string): SessionState {
    // By tenant, then client: a lookup hashes the caller's own strings (hashes cached), no joined key to build.
    let state = this.byTenant.get(tenantId)?.get(clientId);
    if (state === undefined) {
      if (this.count >= this.maxCached) this.evict();
      let clients = this.byTenant.get(tenantId);
      if (clients === undefined) this.byTenant.set(tenantId, (clients = new Map()));
      state = new SessionState(tenantId, clientId);
      clients.set(clientId, state);
      this.count++;
    }
    return state;
  }

  /** Number of cached states. */
  get size(): number {
    return this.count;
  }

  /** Reads which sessions have inflight records and inbound QoS 2 ids (at open, before any call). */
  async load(db: Db): Promise<void> {
    this.clear();
    await sessionsWithKeys(db, KEY_SPACE.inflight, 10, this.withInflight);
    await sessionsWithKeys(db, KEY_SPACE.incoming, 2, this.withIncoming);
  }

  /** Forgets every state (after close). */
  clear(): void {
    this.byTenant.clear();
    this.count = 0;
    this.withInflight.clear();
    this.withIncoming.clear();
  }

  private evict(): void {
    let looked = 0;
    for (const [tenantId, clients] of this.byTenant) {
      for (const [clientId, state] of clients) {
        if (this.count < this.maxCached || looked++ >= 64) return;
        if (state.scope.busy) continue;
        clients.delete(clientId);
        this.count--;
      }
      if (clients.size === 0) this.byTenant.delete(tenantId);
    }
  }
}

/** Keys a scan reads at once. */
const SCAN_CHUNK = 1000;

/**
 * Adds to `into` the `<tenant>\0<client>\0` part of every key `space<tenant>\0<client>\0<suffix
 * bytes>`. A session with a full chunk of keys is skipped past with a seek, so the scan costs
 * about one read per session, not per record.
 */
async function sessionsWithKeys(db: Db, space: Buffer, suffix: number, into: Set<string>): Promise<void> {
  const it = db.keys(prefixRange(space));
  try {
    for (;;) {
      const keys = await it.nextv(SCAN_CHUNK);
      if (keys.length === 0) return;
      for (const key of keys) into.add(key.toString('latin1', space.length, key.length - suffix));
      const last = keys[keys.length - 1];
      const lastId = last.subarray(0, last.length - suffix);
      if (keys.length === SCAN_CHUNK && keys[0].subarray(0, keys[0].length - suffix).equals(lastId)) {
        const end = prefixEnd(lastId);
        if (end === undefined) return;
        it.seek(end);
      }
    }
  } finally {
    await it.close();
  }
}
