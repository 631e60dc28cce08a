import { SESSION_LIST_KEY_SEPARATOR } from '@bifro/spi';
import { KEY_SPACE, concatKey, joinKey, withSeparator } from './key-codec';
import { Scope } from './group-commit';
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
    this.sessionKey = concatKey(KEY_SPACE.session, id);
    this.inboxMetaKey = concatKey(KEY_SPACE.inboxMeta, id);
    this.inboxPrefix = concatKey(KEY_SPACE.inbox, idSep);
    this.inflightPrefix = concatKey(KEY_SPACE.inflight, idSep);
    this.incomingPrefix = concatKey(KEY_SPACE.incoming, idSep);
  }
}

/**
 * The {@link SessionState}s of sessions in use. Bounded: beyond `maxCached` states, idle ones
 * (no call running or waiting, no write on its way to disk) are forgotten, oldest first, and
 * reloaded from the database when used again. A busy state is never forgotten, so a cache is
 * never reloaded while a write it made is not on disk yet.
 */
export class SessionStates {
  private readonly states = new Map<string, SessionState>();

  constructor(private readonly maxCached: number) {}

  /** The state of a session, created when absent. */
  get(tenantId: string, clientId: string): SessionState {
    const id = tenantId + SESSION_LIST_KEY_SEPARATOR + clientId;
    let state = this.states.get(id);
    if (state === undefined) {
      if (this.states.size >= this.maxCached) this.evict();
      state = new SessionState(tenantId, clientId);
      this.states.set(id, state);
    }
    return state;
  }

  /** Number of cached states. */
  get size(): number {
    return this.states.size;
  }

  /** Forgets every state (after close). */
  clear(): void {
    this.states.clear();
  }

  private evict(): void {
    let looked = 0;
    for (const [id, state] of this.states) {
      if (this.states.size < this.maxCached || looked++ >= 64) return;
      if (!state.scope.busy) this.states.delete(id);
    }
  }
}
