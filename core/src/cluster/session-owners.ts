import { createHash } from 'node:crypto';
import { KvWatchInclude, type KV, type KvEntry, type Msg, type NatsConnection, type Subscription } from 'nats';
import type { Logger } from '../base/logger';
import { RepeatedWarning } from '../base/repeated-warning';
import { describeError } from '../base/errors';
import type { ClaimOutcome, OwnedState, OwnerEntry, OwnershipHandlers, SessionOwnership } from './cluster-view';
import { LEASE_SILENCE_MS } from './membership';
import { MAX_KEY_CHARS, nodeToken, token } from './routes';

/** Session key → owner entry (compare-and-set: the authority on who serves a session). */
export const SESSIONS_BUCKET = 'bifro_sessions';
/** `<node>.<session key>` → {tenant, client}: the sessions of one node, listed by prefix when it leaves. */
export const OWNED_BUCKET = 'bifro_owned';
/** An owner that does not hand a session over in this time is passed by (its own writes then fail). */
export const HANDOVER_TIMEOUT_MS = 3000;
/** A CONNECT waits this long at most for this node to hold its lease (just started, or NATS just back). */
/** A takeback of this node's own sessions that did not go through is tried again after this long. */
const TAKE_BACK_RETRY_MS = 1000;
const LEASE_WAIT_MS = 3000;
/** Claims lost to a concurrent claim, tried again this many times before the CONNECT is refused. */
const CLAIM_ATTEMPTS = 4;
/** How often, and how long, the node that cleans up after a departed node waits for its sessions to be adopted. */
const CLEARED_POLL_MS = 1000;
const CLEARED_WAIT_MS = 60_000;
/** Then this long before its routes go, so the routes of the sessions' new owners are seen everywhere first. */
const ROUTES_GRACE_MS = 2000;

/** The subject a node answers registry requests on (hand-overs). */
export function controlSubject(nodeId: string): string {
  return `bifro.ctl.${nodeToken(nodeId)}`;
}

/** `<base64url(tenant)>.<base64url(client)>`, or `h.<sha256>` when that is too long for a key. */
export function sessionKey(tenantId: string, clientId: string): string {
  const key = `${token(tenantId)}.${token(clientId)}`;
  if (key.length <= MAX_KEY_CHARS - 80) return key;
  return `h.${createHash('sha256').update(tenantId).update('\0').update(clientId).digest('base64url')}`;
}

/**
 * Rendezvous (highest random weight) hashing: the node among `nodes` that takes `key`. Every node
 * computes the same answer from the same list, and a node leaving moves only its own keys.
 */
export function rendezvous(nodes: readonly string[], key: string): string | undefined {
  let best: string | undefined;
  let bestWeight = -1;
  for (const node of nodes) {
    const weight = createHash('sha256').update(node).update('\0').update(key).digest().readUInt32BE(0);
    if (weight > bestWeight || (weight === bestWeight && best !== undefined && node < best)) {
      best = node;
      bestWeight = weight;
    }
  }
  return best;
}

function isEntry(v: unknown): v is OwnerEntry {
  const e = v as Partial<OwnerEntry> | null;
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.node === 'string' &&
    typeof e.epoch === 'number' &&
    typeof e.userId === 'string' &&
    (e.protocolVersion === 3 || e.protocolVersion === 4 || e.protocolVersion === 5) &&
    typeof e.connected === 'boolean' &&
    typeof e.persistent === 'boolean'
  );
}

function entryOf(e: KvEntry | null): OwnerEntry | undefined {
  if (e === null || e.operation !== 'PUT') return undefined;
  try {
    const v: unknown = e.json();
    return isEntry(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

interface IndexValue {
  readonly tenant: string;
  readonly client: string;
}

/** A session this node owns: the revision of its entry, and the chain its writes go through one at a time. */
interface Owned {
  readonly tenantId: string;
  readonly clientId: string;
  revision: number;
  epoch: number;
  chain: Promise<void>;
  /** Set once it is no longer this node's: later writes are dropped. */
  gone: boolean;
}

export interface SessionOwnersOptions {
  readonly nodeId: string;
  /** Replicas of the two buckets (already capped to the servers NATS knows). */
  replicas(nc: NatsConnection): number;
  /** Live node ids, this one included. */
  liveNodes(): string[];
  alive(nodeId: string): boolean;
  /** This node holds its lease (membership): it may serve, claim and adopt sessions. */
  holdsLease(): boolean;
  /** This node hears the other nodes' heartbeats now. */
  observing(): boolean;
  /** Monotonic ms this node has not heard a node's heartbeat while it could (Infinity: not in the live list). */
  silentFor(nodeId: string): number;
  /** A departed node's sessions have all been adopted (or waited for long enough): its routes may go. */
  nodeCleared(nodeId: string): void;
  /** This node's own sessions are back (taken back after its start or a lapse of its lease). */
  sessionsBack?(): void;
  readonly logger: Logger;
}

/**
 * The cluster-wide session registry (docs/cluster.md § Sessions): one entry per session in
 * `bifro_sessions` naming the node that serves it and an epoch, written with compare-and-set so
 * two nodes never both own a session; the sessions of each node in `bifro_owned`, so the ones of
 * a node that left are found by prefix and adopted by the survivor rendezvous hashing picks.
 */
export class SessionOwners implements SessionOwnership {
  private nc: NatsConnection | undefined;
  private sessions: KV | undefined;
  private owned: KV | undefined;
  private sub: Subscription | undefined;
  private handlers: OwnershipHandlers | undefined;
  private readonly mine = new Map<string, Owned>();
  /** A takeback of this node's own sessions went through since its start or the last lapse of its lease. */
  private ownBack = false;
  /** A takeback loop runs. */
  private taking = false;
  private stopped = false;
  private readonly selfToken: string;
  private ownedWatch = 0;
  /** One warn line per outage of the registry, not one per session update. */
  private readonly updateWarnings: RepeatedWarning;

  constructor(private readonly opts: SessionOwnersOptions) {
    this.selfToken = nodeToken(opts.nodeId);
    this.updateWarnings = new RepeatedWarning(opts.logger, () => `updating sessions in ${SESSIONS_BUCKET}`);
  }

  serve(handlers: OwnershipHandlers): void {
    this.handlers = handlers;
  }

  /** Opens the buckets and answers hand-over requests; then takes back what this node's previous run owned. */
  async attach(nc: NatsConnection): Promise<void> {
    const replicas = this.opts.replicas(nc);
    const js = nc.jetstream();
    const [sessions, owned] = await Promise.all([
      js.views.kv(SESSIONS_BUCKET, { history: 1, replicas }),
      js.views.kv(OWNED_BUCKET, { history: 1, replicas }),
    ]);
    if (this.stopped) return;
    this.nc = nc;
    this.sessions = sessions;
    this.owned = owned;
    this.sub?.unsubscribe();
    this.sub = nc.subscribe(controlSubject(this.opts.nodeId), { callback: (err, m) => (err === null ? void this.control(m) : undefined) });
    await this.watchOwned(owned);
    // A restart within the dead-node window: its sessions are still registered to it.
    await this.takeBack();
    this.handlers?.attached();
  }

  /** Whether this node's own sessions are back (see {@link SessionOwnersOptions.sessionsBack}). */
  get sessionsBack(): boolean {
    return this.ownBack;
  }

  private backNow(): void {
    if (this.ownBack || !this.opts.holdsLease()) return;
    this.ownBack = true;
    this.opts.sessionsBack?.();
  }

  owns(tenantId: string, clientId: string): boolean {
    return this.mine.has(sessionKey(tenantId, clientId));
  }

  holdsLease(): boolean {
    return this.opts.holdsLease();
  }

  get ready(): boolean {
    return this.sessions !== undefined && this.nc !== undefined && !this.nc.isClosed();
  }

  async claim(tenantId: string, clientId: string, state: OwnedState): Promise<ClaimOutcome> {
    const kv = this.sessions;
    const index = this.owned;
    if (kv === undefined || index === undefined) throw new Error('the session registry (NATS) is not reachable');
    // Without its lease a node must not take what another may own meanwhile; deaf, it cannot tell
    // who is alive. A node just started (or back from a blip) gets there within a heartbeat or two.
    for (const until = Date.now() + LEASE_WAIT_MS; !this.opts.holdsLease() || !this.opts.observing();) {
      if (Date.now() >= until || this.stopped)
        throw new Error('this node holds no lease in the cluster now (NATS has not accepted its heartbeats lately)');
      await new Promise((r) => setTimeout(r, 50));
    }
    const key = sessionKey(tenantId, clientId);
    const own = this.mine.get(key);
    if (own !== undefined && !own.gone) {
      // Already this node's (a reconnect here): the local registry did the takeover.
      void this.update(tenantId, clientId, state);
      await own.chain;
      // The write may have waited out the lease (NATS unreachable): then the CONNECT is refused.
      if (!this.opts.holdsLease()) throw new Error('this node lost its lease in the cluster while claiming the session');
      return { previous: { node: this.opts.nodeId, epoch: own.epoch, ...state }, handedOver: false };
    }
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      let current = await kv.get(key);
      let previous = entryOf(current);
      let handedOver = false;
      if (previous !== undefined && previous.node !== this.opts.nodeId && this.opts.alive(previous.node)) {
        handedOver = await this.requestHandOver(previous.node, tenantId, clientId);
        // Not handed over: its owner may still serve it until its lease runs out.
        if (!handedOver) await this.outlast(previous.node, clientId);
        current = await kv.get(key);
        previous = entryOf(current);
      }
      const epoch = (previous?.epoch ?? 0) + 1;
      const value = JSON.stringify({ node: this.opts.nodeId, epoch, ...state } satisfies OwnerEntry);
      const indexed = index.put(`${this.selfToken}.${key}`, JSON.stringify({ tenant: tenantId, client: clientId } satisfies IndexValue));
      // Awaited below, after the entry write: a failure meanwhile (a NATS timeout) must not be an
      // unhandled rejection, which ends the process (a node exited so in a checker run).
      indexed.catch(() => undefined);
      let revision: number;
      try {
        revision =
          current !== null && current.operation === 'PUT' ? await kv.update(key, value, current.revision) : await kv.create(key, value);
      } catch (err) {
        await indexed.catch(() => undefined);
        if (isConflict(err)) continue;
        throw err;
      }
      await indexed;
      // The lease ran out while the claim was under way: the entry is taken back with the others when it is held again.
      if (!this.opts.holdsLease()) throw new Error('this node lost its lease in the cluster while claiming the session');
      this.mine.set(key, { tenantId, clientId, revision, epoch, chain: Promise.resolve(), gone: false });
      return { previous, handedOver };
    }
    throw new Error(`session ${clientId} is being claimed by another node at the same time`);
  }

  /** Writes the session's state in its entry; resolves whether the write landed. */
  update(tenantId: string, clientId: string, state: OwnedState): Promise<boolean> {
    const key = sessionKey(tenantId, clientId);
    const own = this.mine.get(key);
    const kv = this.sessions;
    if (own === undefined || own.gone || kv === undefined) return Promise.resolve(false);
    const value = JSON.stringify({ node: this.opts.nodeId, epoch: own.epoch, ...state } satisfies OwnerEntry);
    const landed = own.chain.then(async () => {
      if (own.gone) return false;
      try {
        own.revision = await kv.update(key, value, own.revision);
        return true;
      } catch (err) {
        if (!isConflict(err)) {
          this.updateWarnings.report('', { err: describeError(err), clientId }, `cannot update a session in ${SESSIONS_BUCKET}`);
          return false;
        }
        // A newer epoch: another node claimed it (this node missed, or was too slow for, the hand-over).
        this.drop(key);
        this.opts.logger.warn({ tenantId, clientId }, 'a session of this node was claimed by another node; no longer serving it');
        this.handlers?.lost(tenantId, clientId);
        return false;
      }
    });
    own.chain = landed.then(() => undefined);
    return landed;
  }

  /** Deletes the session's entry (it ended); resolves whether the delete landed. */
  release(tenantId: string, clientId: string): Promise<boolean> {
    const key = sessionKey(tenantId, clientId);
    const own = this.mine.get(key);
    const kv = this.sessions;
    if (own === undefined || own.gone || kv === undefined) return Promise.resolve(false);
    const landed = own.chain.then(async () => {
      if (own.gone) return false;
      this.drop(key);
      return kv.delete(key, { previousSeq: own.revision }).then(
        () => true,
        () => false,
      );
    });
    own.chain = landed.then(() => undefined);
    return landed;
  }

  /**
   * Waits until this node has not heard `node` for LEASE_SILENCE_MS: its lease has run out by
   * then, so it serves the session no more. Rejects as soon as `node` is heard again (alive,
   * and it did not hand the session over).
   */
  private async outlast(node: string, clientId: string): Promise<void> {
    let last = this.opts.silentFor(node);
    while (last < LEASE_SILENCE_MS) {
      await new Promise((r) => setTimeout(r, Math.min(500, LEASE_SILENCE_MS - last)));
      const silent = this.opts.silentFor(node);
      if (silent < last || this.stopped) throw new Error(`node ${node} is alive, serves session ${clientId} and did not hand it over`);
      last = silent;
    }
  }

  /**
   * This node's lease ran out (membership): every session it owned may be adopted by another node
   * once the others drop it, so it stops serving them all now, before it serves anything else.
   * Their entries and index keys stay: whoever adopts them (this node, once it holds its lease
   * again and nobody did) sees to the wills and the clients' return.
   */
  fence(): void {
    this.ownBack = false;
    const fenced = [...this.mine.values()];
    this.mine.clear();
    for (const own of fenced) own.gone = true;
    if (fenced.length > 0)
      this.opts.logger.warn(
        { sessions: fenced.length },
        `stopped serving ${fenced.length} sessions without a lease; their clients are disconnected (0x89 Server busy)`,
      );
    for (const own of fenced) this.handlers?.fenced(own.tenantId, own.clientId);
  }

  /** The lease is held (first time or again): the sessions still registered to this node are taken back. */
  leaseTaken(): void {
    void this.takeBack();
  }

  /**
   * Takes back the sessions still registered to this node, until a takeback goes through: its
   * routes are confirmed (and QoS 1/2 accepted) only then. Tried again every second while this
   * node holds its lease (NATS just back can fail the first listing).
   */
  private async takeBack(): Promise<void> {
    if (this.taking) return;
    this.taking = true;
    try {
      while (!this.stopped && !this.ownBack && this.opts.holdsLease()) {
        try {
          if (await this.adoptFrom(this.opts.nodeId, true)) {
            this.backNow();
            return;
          }
        } catch (err) {
          this.opts.logger.warn({ err: describeError(err) }, "cannot take back this node's sessions; trying again");
        }
        await new Promise((r) => setTimeout(r, TAKE_BACK_RETRY_MS));
      }
    } finally {
      this.taking = false;
    }
  }

  /** No longer this node's: later writes are dropped, the index key goes. */
  private drop(key: string): void {
    const own = this.mine.get(key);
    if (own === undefined) return;
    own.gone = true;
    this.mine.delete(key);
    void this.owned?.delete(`${this.selfToken}.${key}`).catch(() => undefined);
  }

  /** Asks the owner to hand a session over; true once it confirmed. */
  private async requestHandOver(node: string, tenantId: string, clientId: string): Promise<boolean> {
    try {
      const reply = await this.nc!.request(
        controlSubject(node),
        JSON.stringify({ op: 'handover', tenant: tenantId, client: clientId, node: this.opts.nodeId }),
        {
          timeout: HANDOVER_TIMEOUT_MS,
        },
      );
      const body = reply.json<{ ok: boolean; error?: string }>();
      if (!body.ok) this.opts.logger.warn({ node, clientId, error: body.error }, `node ${node} could not hand over session ${clientId}`);
      return body.ok;
    } catch (err) {
      // Claimed all the same: the old owner's next registry write fails and it stops serving the session.
      this.opts.logger.warn({ node, clientId, err: describeError(err) }, `node ${node} did not hand over session ${clientId} in time`);
      return false;
    }
  }

  /**
   * Watches this node's keys in the index: a node that took this one for departed adopts its
   * sessions and deletes their index keys. A session still served here whose entry now names
   * another owner (or a later epoch) is let go at once, its client disconnected with 0x8E,
   * rather than at its next registry write, which may never come while the client stays.
   */
  private async watchOwned(owned: KV): Promise<void> {
    const generation = ++this.ownedWatch;
    const entries = await owned.watch({ key: `${this.selfToken}.>`, include: KvWatchInclude.UpdatesOnly });
    void (async () => {
      try {
        for await (const e of entries) {
          if (this.stopped || generation !== this.ownedWatch) break;
          if (e.operation !== 'PUT') await this.checkStillMine(e.key.slice(this.selfToken.length + 1));
        }
      } catch (err) {
        if (this.stopped || generation !== this.ownedWatch) return;
        this.opts.logger.warn({ err: describeError(err) }, `the watch of ${OWNED_BUCKET} ended; watching again`);
        this.rewatchOwned(owned);
      }
    })();
  }

  /** Watches again a second later, and again after each failed attempt (NATS still away). */
  private rewatchOwned(owned: KV): void {
    setTimeout(() => {
      if (this.stopped) return;
      this.watchOwned(owned).catch(() => this.rewatchOwned(owned));
    }, 1000).unref();
  }

  /** After this node's index key of a session went: if another node owns the session now, this one stops serving it. */
  private async checkStillMine(key: string): Promise<void> {
    const own = this.mine.get(key);
    const kv = this.sessions;
    if (own === undefined || own.gone || kv === undefined) return;
    let entry: OwnerEntry | undefined;
    try {
      entry = entryOf(await kv.get(key));
    } catch (err) {
      this.opts.logger.warn({ err: describeError(err), clientId: own.clientId }, `cannot read a session's entry in ${SESSIONS_BUCKET}`);
      return;
    }
    if (entry !== undefined && entry.node === this.opts.nodeId && entry.epoch === own.epoch) return;
    if (this.mine.get(key) !== own || own.gone) return;
    this.drop(key);
    this.opts.logger.warn(
      { tenantId: own.tenantId, clientId: own.clientId, owner: entry?.node },
      `a session of this node was adopted by ${entry?.node ?? 'another node'}; no longer serving it`,
    );
    this.handlers?.lost(own.tenantId, own.clientId);
  }

  /** A hand-over request from a node claiming a session of this one. */
  private async control(m: Msg): Promise<void> {
    let tenant: unknown;
    let client: unknown;
    let node: unknown;
    try {
      ({ tenant, client, node } = m.json<{ tenant: unknown; client: unknown; node: unknown }>());
    } catch {
      tenant = undefined;
    }
    if (typeof tenant !== 'string' || typeof client !== 'string') {
      m.respond(JSON.stringify({ ok: false, error: 'malformed request' }));
      return;
    }
    const key = sessionKey(tenant, client);
    const own = this.mine.get(key);
    try {
      if (own !== undefined) {
        // Nothing this node writes after the state it hands over: its pending writes first, then no more.
        await own.chain;
        this.drop(key);
      }
      await this.handlers?.handOver(tenant, client, typeof node === 'string' ? node : undefined);
      m.respond(JSON.stringify({ ok: true }));
    } catch (err) {
      m.respond(JSON.stringify({ ok: false, error: describeError(err) }));
    }
  }

  /**
   * A node left the live list: adopt the sessions of it that rendezvous hashing gives this node.
   * `self`: this node's own entries from its previous run, all taken back.
   */
  async nodeLeft(nodeId: string): Promise<void> {
    await this.adoptFrom(nodeId, false);
    const live = this.opts.liveNodes();
    if (rendezvous(live, `node:${nodeId}`) !== this.opts.nodeId) {
      // Should the node picked to clean up leave too, the others do it later (deleting twice is harmless).
      setTimeout(() => {
        if (!this.stopped && !this.opts.alive(nodeId)) this.opts.nodeCleared(nodeId);
      }, 2 * CLEARED_WAIT_MS).unref();
      return;
    }
    // This node cleans up after it: once every session of it has a new owner, its routes can go.
    const index = this.owned;
    if (index === undefined) return;
    const prefix = `${nodeToken(nodeId)}.>`;
    for (let waited = 0; waited < CLEARED_WAIT_MS && !this.stopped && !this.opts.alive(nodeId); waited += CLEARED_POLL_MS) {
      let left = 0;
      for await (const k of await index.keys(prefix)) if (k !== undefined) left++;
      if (left === 0) break;
      await new Promise((r) => setTimeout(r, CLEARED_POLL_MS));
    }
    // The new owners' routes are written as they resume the sessions: give every node time to see them first.
    await new Promise((r) => setTimeout(r, ROUTES_GRACE_MS));
    if (!this.stopped && !this.opts.alive(nodeId)) this.opts.nodeCleared(nodeId);
  }

  /** Resolves whether it went through the node's whole list (not cut short: no lease, stopped, NATS away). */
  private async adoptFrom(nodeId: string, self: boolean): Promise<boolean> {
    const kv = this.sessions;
    const index = this.owned;
    if (kv === undefined || index === undefined || this.stopped || !this.opts.holdsLease()) return false;
    const prefix = `${nodeToken(nodeId)}.`;
    const keys: string[] = [];
    for await (const k of await index.keys(`${prefix}>`)) keys.push(k);
    let adopted = 0;
    for (const indexKey of keys) {
      if (this.stopped) return false;
      const key = indexKey.slice(prefix.length);
      if (this.mine.get(key)?.gone === false) continue;
      try {
        const current = await kv.get(key);
        const entry = entryOf(current);
        if (entry === undefined || entry.node !== nodeId) {
          // Claimed elsewhere already, or ended: the index key is stale. This node's own session,
          // fenced here meanwhile, keeps its routes until the new owner's are seen.
          if (self) {
            const ids = (await index.get(indexKey))?.json<IndexValue>();
            if (ids !== undefined && typeof ids.tenant === 'string' && typeof ids.client === 'string')
              this.handlers?.lost(ids.tenant, ids.client, entry?.node);
          }
          if (!this.opts.alive(nodeId) || self) await index.delete(indexKey);
          continue;
        }
        if (!self && rendezvous(this.opts.liveNodes(), key) !== this.opts.nodeId) continue;
        const ids = (await index.get(indexKey))?.json<IndexValue>();
        if (ids === undefined || typeof ids.tenant !== 'string' || typeof ids.client !== 'string') continue;
        const epoch = entry.epoch + 1;
        if (!this.opts.holdsLease()) return false;
        const revision = await kv.update(key, JSON.stringify({ ...entry, node: this.opts.nodeId, epoch }), current!.revision);
        if (!self) {
          await index.put(`${this.selfToken}.${key}`, JSON.stringify(ids));
          await index.delete(indexKey);
        }
        this.mine.set(key, { tenantId: ids.tenant, clientId: ids.client, revision, epoch, chain: Promise.resolve(), gone: false });
        await this.handlers?.adopt({ tenantId: ids.tenant, clientId: ids.client, entry });
        adopted++;
      } catch (err) {
        if (isConflict(err)) continue;
        this.opts.logger.warn({ err: describeError(err), node: nodeId }, `cannot adopt a session of node ${nodeId}`);
      }
    }
    if (adopted > 0)
      this.opts.logger.info(
        { node: nodeId, sessions: adopted },
        self ? `took back ${adopted} sessions of this node's previous run` : `adopted ${adopted} sessions of node ${nodeId}`,
      );
    return true;
  }

  /** Waits (at most `ms`) for the registry writes under way, then stops answering. */
  async stop(ms: number): Promise<void> {
    const pending = Promise.all([...this.mine.values()].map((o) => o.chain));
    await Promise.race([pending, new Promise((r) => setTimeout(r, ms).unref())]);
    this.stopped = true;
    this.ownedWatch++;
    this.sub?.unsubscribe();
    this.updateWarnings.stop();
  }
}

/** A compare-and-set that lost: someone wrote the key since (nats-server: "wrong last sequence"). */
function isConflict(err: unknown): boolean {
  const text = err instanceof Error ? err.message : String(err);
  return /wrong last sequence|key exists/i.test(text);
}
