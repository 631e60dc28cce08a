import type { ClientInfo, SessionRecord, Storage, WillRecord } from '@bifro/spi';
import { sessionListKey } from '@bifro/spi';
import type {
  AdoptedSession,
  ClaimOutcome,
  OwnedState,
  OwnedWill,
  OwnerEntry,
  OwnershipHandlers,
  SessionOwnership,
} from '../cluster/cluster-view';
import { describeError } from '../base/errors';
import type { Logger } from '../base/logger';
import type { Session, SessionWill } from '../session/session';
import { toWillRecord, willFromRecord } from '../session/session-persistence';
import { offlineClient, type SessionObserver, type SessionRegistry } from '../session/session-registry';

/**
 * How long at most a handed-over session's routes stay on this node (QoS 1/2 to them refused):
 * they go as soon as the new owner's routes are seen here, usually within milliseconds.
 */
const HANDOVER_GRACE_MS = 5000;
/** How long a hand-over to this node is remembered (longer than a will is sent again: 60 s), and the count that triggers a first sweep. */
const HANDED_OVER_KEPT_MS = 120_000;
const ARRIVALS_SWEEP_AT = 1000;

/** How a session served here came from another node. */
interface Arrival {
  readonly node: string;
  readonly at: number;
  /** Handed over by `node`; else taken over without a hand-over (adopted, or claimed from a node that did not answer). */
  readonly handedOver: boolean;
}

/**
 * How long at most a session fenced here (this node's lease ran out) keeps its routes while no
 * node serves it: publishers to it are refused meanwhile rather than acknowledged for nobody.
 */
const FENCED_ROUTES_MS = 60_000;

/** "Serving without the registry" is logged at most this often while NATS is away. */
const UNREGISTERED_LOG_MS = 10_000;

/** A will as the registry entry keeps it (JSON: binary parts in base64). */
export function ownedWill(will: SessionWill): OwnedWill {
  const w = toWillRecord(will);
  const p = w.properties;
  return {
    topic: w.topic,
    payload: Buffer.from(w.payload).toString('base64'),
    qos: w.qos,
    retain: w.retain,
    delaySeconds: w.delaySeconds,
    ...(p === undefined
      ? {}
      : {
          properties: {
            payloadFormatIndicator: p.payloadFormatIndicator,
            messageExpiryInterval: p.messageExpiryInterval,
            contentType: p.contentType,
            responseTopic: p.responseTopic,
            correlationData: p.correlationData === undefined ? undefined : Buffer.from(p.correlationData).toString('base64'),
            userProperties: p.userProperties,
          },
        }),
  };
}

/** The entry's will back into a storage-shaped record. */
export function willOfEntry(w: OwnedWill): WillRecord {
  const p = w.properties;
  return {
    topic: w.topic,
    payload: Buffer.from(w.payload, 'base64'),
    qos: w.qos,
    retain: w.retain,
    delaySeconds: w.delaySeconds,
    properties:
      p === undefined
        ? undefined
        : {
            payloadFormatIndicator: p.payloadFormatIndicator,
            messageExpiryInterval: p.messageExpiryInterval,
            contentType: p.contentType,
            responseTopic: p.responseTopic,
            correlationData: p.correlationData === undefined ? undefined : Buffer.from(p.correlationData, 'base64'),
            userProperties: p.userProperties,
          },
  };
}

/**
 * The broker's side of the cluster-wide session registry (docs/cluster.md § Sessions). At
 * CONNECT the node claims the session (a live owner elsewhere hands it over first) and, with
 * storage every node shares, resumes what that owner wrote; afterwards the entry follows the
 * session (disconnect, delayed will, end). Sessions of a node that left are adopted here when
 * rendezvous hashing picks this node: persistent ones resumed from storage as offline sessions
 * (their expiry then runs here, once for the cluster), wills of the others published now.
 */
export class ClusterSessions implements OwnershipHandlers, SessionObserver {
  /** Sessions being handed to another node: their changes are no longer this node's to record. */
  private readonly leaving = new WeakSet<Session>();
  /** Sessions (by key) whose will this node published while its entry may still hold it ({@link willPublished}). */
  private readonly published = new Set<string>();
  /**
   * Sessions (by key) served here that came from another node: a will that node did not take is
   * delivered to them here (Forwarder's resend). Taken over without a hand-over: while served
   * here; handed over: {@link HANDED_OVER_KEPT_MS}, longer than a will is sent again.
   */
  private readonly arrivals = new Map<string, Arrival>();
  private arrivalsSweepAt = ARRIVALS_SWEEP_AT;
  private lastUnregisteredLog = 0;

  constructor(
    private readonly nodeId: string,
    private readonly owners: SessionOwnership,
    private readonly registry: SessionRegistry,
    private readonly storage: Storage,
    /** Storage every node reads and writes (the cluster's): a persistent session can move. */
    private readonly shared: boolean,
    private readonly logger: Logger,
    private readonly clock: () => number,
    /** Whether this node has seen a node's route of a (tenant, filter). */
    private readonly routes: (nodeId: string, tenantId: string, filter: string) => boolean,
    /** A session came here from another node (handed over, or adopted without a hand-over). */
    private readonly arrived: (key: string, from: string, handedOver: boolean) => void,
  ) {
    owners.serve(this);
    registry.observer = this;
  }

  /**
   * At CONNECT, before the local registry opens the session: claim it, and bring a persistent
   * session another node served into this one's registry. `clean` is the effective clean start.
   * Resolves false when the claim failed (the CONNECT is refused: Server unavailable).
   */
  async claim(client: ClientInfo, clean: boolean, persistent: boolean, will: SessionWill | undefined): Promise<boolean> {
    const arrived = this.clock();
    if (!this.owners.ready) {
      // NATS away: served here alone; registered when the registry is back.
      const now = this.clock();
      if (now - this.lastUnregisteredLog > UNREGISTERED_LOG_MS) {
        this.lastUnregisteredLog = now;
        this.logger.warn(
          { clientId: client.clientId },
          'the session registry is not reachable: sessions are served by this node alone until it is',
        );
      }
      return true;
    }
    let outcome: ClaimOutcome;
    try {
      outcome = await this.owners.claim(client.tenantId, client.clientId, {
        userId: client.userId,
        protocolVersion: client.protocolVersion,
        connected: true,
        persistent,
        will: will === undefined ? undefined : ownedWill(will),
      });
    } catch (err) {
      this.logger.warn(
        { tenantId: client.tenantId, clientId: client.clientId, err: describeError(err) },
        'cannot claim the session in the registry',
      );
      return false;
    }
    // Storage reads below may outlast the lease: the CONNECT is let in only while it is held.
    const granted = await this.openClaimed(client, clean, outcome, arrived);
    return granted && this.owners.holdsLease();
  }

  /** What a claim brings in: the previous owner's session resumed from storage, or its will published. */
  private async openClaimed(client: ClientInfo, clean: boolean, outcome: ClaimOutcome, arrived: number): Promise<boolean> {
    const previous = outcome.previous;
    const key = sessionListKey(client.tenantId, client.clientId);
    // This node's own entry: served here, unless this node let it go when its lease ran out (then resumed from storage below).
    if (previous === undefined || (previous.node === this.nodeId && this.registry.get(key) !== undefined)) return true;
    if (this.registry.get(key) === undefined && previous.persistent && this.shared) {
      if (clean) {
        // Clean start discards what the other node kept [MQTT-3.1.2-4].
        await this.storage.sessions.delete(client.tenantId, client.clientId);
      } else {
        const record = await this.storage.sessions.get(client.tenantId, client.clientId);
        if (record !== undefined && this.registry.get(key) === undefined) {
          // Its expiry is judged when the CONNECT arrived: the claim may have waited seconds for a silent owner.
          this.resume(record, previous, false, false, arrived);
          // Taken from a node that did not answer: what it was sent meanwhile may not have reached it.
          if (previous.node !== this.nodeId) this.cameHere(key, previous.node, outcome.handedOver);
        }
        return true;
      }
    }
    if (previous.connected && previous.will !== undefined && !outcome.handedOver) {
      // Its node died with the connection: the will is due, unless this connection resumes the session within the delay.
      const resumes = previous.persistent && this.shared && !clean && previous.will.delaySeconds > 0;
      if (!resumes) this.publishWill(client.tenantId, client.clientId, previous);
    }
    return true;
  }

  /** The connection closed while its session was claimed: the claim goes unless a session is served here. */
  abandoned(client: ClientInfo): void {
    if (this.registry.get(sessionListKey(client.tenantId, client.clientId)) === undefined)
      this.owners.release(client.tenantId, client.clientId);
  }

  /** The registry is reachable (again): sessions served without it meanwhile are registered. */
  attached(): void {
    for (const session of [...this.registry.all()]) {
      if (this.owners.owns(session.tenantId, session.clientId)) continue;
      void this.owners.claim(session.tenantId, session.clientId, this.state(session)).catch(() => undefined);
    }
  }

  private state(session: Session): OwnedState {
    return {
      userId: session.client.userId,
      protocolVersion: session.protocolVersion,
      connected: session.connected,
      persistent: session.expirySeconds > 0,
      will: session.will === undefined ? undefined : ownedWill(session.will),
      willAt: session.willAt === 0 ? undefined : session.willAt,
    };
  }

  // ---- SessionObserver: the entry follows the session ----

  disconnected(session: Session): void {
    if (!this.leaving.has(session))
      this.forgetPublished(session.key, this.owners.update(session.tenantId, session.clientId, this.state(session)));
  }

  /**
   * Until the entry says the will went out (the next update or the delete lands), this node
   * remembers it did publish it: taking its sessions back after a lapse of its lease, it does not
   * publish it again from an entry that still holds it.
   */
  willPublished(session: Session): void {
    this.published.add(session.key);
  }

  willFired(session: Session): void {
    if (!this.leaving.has(session))
      this.forgetPublished(session.key, this.owners.update(session.tenantId, session.clientId, this.state(session)));
  }

  /** A session came here from `node`: remembered, and the cluster told (recent wills it lacks). */
  private cameHere(key: string, node: string, handedOver: boolean): void {
    const now = this.clock();
    if (this.arrivals.size >= this.arrivalsSweepAt) {
      for (const [k, a] of this.arrivals) if (a.handedOver && now - a.at > HANDED_OVER_KEPT_MS) this.arrivals.delete(k);
      // Many recent ones: the next sweep waits until they doubled (a sweep per insert would be quadratic).
      this.arrivalsSweepAt = Math.max(ARRIVALS_SWEEP_AT, 2 * this.arrivals.size);
    }
    this.arrivals.set(key, { node, at: now, handedOver });
    this.arrived(key, node, handedOver);
  }

  /**
   * The node a session served here was taken over from without a hand-over, if it was; with
   * `handedOverSince`, else the node that handed it over since then.
   */
  cameFrom(key: string, handedOverSince: number | undefined): string | undefined {
    const a = this.arrivals.get(key);
    if (a === undefined || (a.handedOver && (handedOverSince === undefined || a.at < handedOverSince))) return undefined;
    return a.node;
  }

  ended(session: Session): void {
    this.arrivals.delete(session.key);
    if (!this.leaving.has(session)) this.forgetPublished(session.key, this.owners.release(session.tenantId, session.clientId));
  }

  // ---- OwnershipHandlers: the registry moves a session ----

  async handOver(tenantId: string, clientId: string, newOwner: string | undefined): Promise<void> {
    const session = this.letGo(tenantId, clientId, 'session taken over by another node');
    if (session === undefined) {
      this.replacedBy(tenantId, clientId, newOwner);
      return;
    }
    if (this.registry.get(session.key) !== session) return;
    if (session.stored && this.shared) {
      // What is in flight and the record reach storage before the new owner reads them.
      await session.persist();
      await this.registry.save(session, session.disconnectedAt);
    }
    // Its routes go once the new owner's are seen here for every filter it has (or after the grace).
    this.registry.forget(session, HANDOVER_GRACE_MS, this.ownerRoutesSeen(session, newOwner));
  }

  /** Whether `newOwner`'s routes for every filter of the session are seen here (undefined: no owner to wait for). */
  private ownerRoutesSeen(session: Session, newOwner: string | undefined): (() => boolean) | undefined {
    if (newOwner === undefined) return undefined;
    const filters = [...session.subscriptions.keys()];
    return () => filters.every((f) => this.routes(newOwner, session.tenantId, f));
  }

  lost(tenantId: string, clientId: string, newOwner?: string): void {
    const session = this.letGo(tenantId, clientId, 'session claimed by another node');
    if (session !== undefined) this.registry.forget(session, HANDOVER_GRACE_MS);
    else this.replacedBy(tenantId, clientId, newOwner);
  }

  /** A session fenced here (routes kept) has a new owner: its routes go once the owner's are seen, as after a hand-over. */
  private replacedBy(tenantId: string, clientId: string, newOwner: string | undefined): void {
    const moved = this.registry.movedSession(sessionListKey(tenantId, clientId));
    if (moved !== undefined) this.registry.awaitReplacement(moved, HANDOVER_GRACE_MS, this.ownerRoutesSeen(moved, newOwner));
  }

  fenced(tenantId: string, clientId: string): void {
    const session = this.registry.get(sessionListKey(tenantId, clientId));
    if (session === undefined) return;
    this.leaving.add(session);
    this.arrivals.delete(session.key);
    this.registry.cutOff(session, 'this node lost its lease in the cluster');
    // Its routes stay (QoS 1/2 to it refused, the publishers send again) until it is served again:
    // here once the lease is back, or by the node it is handed to (handOver, lost).
    this.registry.forget(session, FENCED_ROUTES_MS);
  }

  /** Whether this node holds its lease now (a lapse just seen fences its sessions first). */
  holdsLease(): boolean {
    return this.owners.holdsLease();
  }

  /** The session is no longer this node's to record; its connection is closed with 0x8E [MQTT-3.1.4-3]. */
  private letGo(tenantId: string, clientId: string, reason: string): Session | undefined {
    const session = this.registry.get(sessionListKey(tenantId, clientId));
    if (session === undefined) return undefined;
    this.arrivals.delete(session.key);
    this.leaving.add(session);
    if (session.connected) {
      this.registry.disconnectTaken(session, reason);
      this.registry.disconnected(session, true);
    }
    return session;
  }

  async adopt(adopted: AdoptedSession): Promise<void> {
    const { tenantId, clientId, entry } = adopted;
    const key = sessionListKey(tenantId, clientId);
    const local = this.registry.get(key);
    if (local !== undefined) {
      // Already here (restored from this node's own storage at boot).
      void this.owners.update(tenantId, clientId, this.state(local));
      return;
    }
    // Taken back by the node that published its will while the entry write saying so did not land.
    const willGone = entry.node === this.nodeId && this.published.has(key);
    if (entry.persistent && this.shared) {
      const record = await this.storage.sessions.get(tenantId, clientId);
      if (record !== undefined) {
        this.resume(record, entry, true, willGone);
        if (entry.node !== this.nodeId) this.cameHere(key, entry.node, false);
        return;
      }
    }
    // A transient session (or one whose state stayed on the node that left): its connection ended with its node [MQTT-3.1.2-8].
    if (entry.will !== undefined && !willGone) this.publishWill(tenantId, clientId, entry);
    this.forgetPublished(key, this.owners.release(tenantId, clientId));
  }

  /**
   * A persistent session another node served, resumed here from storage. A record written while
   * a client was connected counts as a disconnect now (its will due after its delay), unless this
   * node published that will already (`willGone`).
   */
  private resume(record: SessionRecord, entry: OwnerEntry, offline: boolean, willGone = false, at?: number): void {
    // The entry knows a will the record may lack (a transient session's, or set after the record was written).
    const will = willGone ? undefined : (record.will ?? (entry.will !== undefined ? willOfEntry(entry.will) : undefined));
    const session = this.registry.adopt({ ...record, will }, at);
    if (offline) this.forgetPublished(session.key, this.owners.update(record.tenantId, record.clientId, this.state(session)));
  }

  /** A write of the session's entry: once it landed, the entry no longer holds a will this node published. */
  private forgetPublished(key: string, landed: Promise<boolean>): void {
    if (!this.published.has(key)) return;
    void landed.then((ok) => {
      if (ok) this.published.delete(key);
    });
  }

  private publishWill(tenantId: string, clientId: string, entry: OwnerEntry): void {
    // Until the entry's delete or update lands (a lapse of the lease meanwhile must not publish it again).
    this.published.add(sessionListKey(tenantId, clientId));
    const client = offlineClient(tenantId, clientId, entry.userId, entry.protocolVersion);
    this.registry.publishWill(client, willFromRecord(willOfEntry(entry.will!), clientId, this.clock()));
  }
}
