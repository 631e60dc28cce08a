import { performance } from 'node:perf_hooks';
import type { KV, KvEntry, NatsConnection } from 'nats';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import type { ClusterNode, NodeLoad, NodeRecord } from './cluster-view';

/** The KV bucket of heartbeats, one key per node id. */
export const NODES_BUCKET = 'bifro_nodes';
/** Every node puts its record this often. */
export const HEARTBEAT_MS = 2000;
/** A node not heard from for this long is gone (also the bucket's max_age, so its key expires). */
export const DEAD_AFTER_MS = 10_000;
/**
 * A node serves its sessions only while it holds its lease: until this long after it sent the
 * last heartbeat NATS accepted (monotonic). The others take it for gone only after
 * DEAD_AFTER_MS without hearing a heartbeat, and hear each one after it was sent, so the lease
 * has run out, by the node's own clock, 3 s before anyone may adopt (docs/cluster.md § Leases).
 */
export const LEASE_MS = 7000;
/** A node claiming a session whose owner did not hand it over waits until it has not heard that owner for this long. */
export const LEASE_SILENCE_MS = LEASE_MS + 1000;
/** How often the list is swept for nodes past {@link DEAD_AFTER_MS}: nats-server 2.9 tells watchers nothing when a key ages out. */
const SWEEP_MS = 1000;
/** Heartbeats failed in a row before it is logged. */
const PUT_FAILURES_LOGGED = 2;
/** This node hears the bucket while its own heartbeats come back through its watch, at most this far apart. */
const ECHO_STALE_MS = 2 * HEARTBEAT_MS + 1000;
/** Sweeps this far apart (monotonic) mean this process did not run meanwhile: paused, stalled. */
const PAUSE_GAP_MS = 3 * SWEEP_MS;

/** Monotonic milliseconds: liveness never reads the wall clock, which a paused process sees jump and NTP may step. */
const monotonic = (): number => performance.now();

export interface MembershipOptions {
  readonly nodeId: string;
  readonly version: string;
  readonly startedAt: number;
  /** `host:port` of each MQTT listener. */
  readonly listeners: readonly string[];
  /** Configured replicas of the bucket (capped to the NATS servers the connection learns of). */
  readonly replicas: number;
  /** This node's load now (read at every heartbeat). */
  load(): NodeLoad;
  readonly logger: Logger;
  /** ms since the epoch. */
  readonly clock?: () => number;
  /** A node left the live list (stopped, or no heartbeat). */
  readonly left?: (nodeId: string) => void;
  /** This node's lease ran out (called once per lapse, synchronously, before anything else is served). */
  readonly leaseLost?: () => void;
  /** This node holds its lease: the first time, and again after each lapse. */
  readonly leaseTaken?: () => void;
  /** This node is draining (read at every heartbeat). */
  readonly draining?: () => boolean;
}

/** The NATS servers the client knows of (itself included when clustered): R3 on one server cannot be created. */
export function knownServers(nc: NatsConnection): number {
  return Math.max(1, nc.info?.connect_urls?.length ?? 1);
}

function isRecord(v: unknown): v is NodeRecord {
  const r = v as Partial<NodeRecord> | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof r.nodeId === 'string' &&
    typeof r.startedAt === 'number' &&
    typeof r.version === 'string' &&
    Array.isArray(r.listeners) &&
    typeof r.connections === 'number' &&
    typeof r.sessions === 'number' &&
    typeof r.msgInPerSec === 'number' &&
    typeof r.msgOutPerSec === 'number'
  );
}

/**
 * Membership: this node's heartbeat in the `bifro_nodes` bucket every 2 s, and a watch of the
 * bucket keeping the live node list. A node is gone when its key is deleted (a clean stop) or
 * when it has not been heard from for 10 s (killed, cut off: the key ages out of the bucket).
 *
 * Silence only counts while this node could have heard: while its own heartbeats come back
 * through its watch (at most 5 s apart), counted from the first one after it started, after an
 * outage or a watch that stalled, and from the end of a pause of this process (sweeps far apart
 * on the monotonic clock). A NATS restart therefore makes no node declare the others dead: every
 * node was deaf for the same outage, and each gives the others 10 s from its own recovery to be
 * heard again (docs/cluster.md § Membership).
 */
export class Membership {
  /** lastSeen: wall clock, for the node list; heardAt: monotonic, for liveness. */
  private readonly others = new Map<string, { record: NodeRecord; lastSeen: number; heardAt: number }>();
  /** Monotonic time since when this node could hear the others; undefined while it cannot (its own heartbeats not coming back through the watch, or failing). */
  private observingSince: number | undefined;
  /** Monotonic time this node's own heartbeat last came back through the watch. */
  private echoAt = -Infinity;
  /** Monotonic time of the last heartbeat NATS accepted, and of the last (re)start of the watch. */
  private putAt = -Infinity;
  private watchedAt = -Infinity;
  private watching: { stop(): void } | undefined;
  private lastSweep = monotonic();
  private readonly clock: () => number;
  private kv: KV | undefined;
  private opening = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private sweep: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Heartbeats failed in a row (a NATS server just restarted times a few out while JetStream recovers). */
  private putFailures = 0;
  private beating = false;
  private watchGeneration = 0;
  private nc: NatsConnection | undefined;
  /** Monotonic time the lease runs out; 'none' until the first heartbeat NATS accepts. */
  private leaseUntil = -Infinity;
  private lease: 'none' | 'held' | 'lost' = 'none';

  constructor(private readonly opts: MembershipOptions) {
    this.clock = opts.clock ?? Date.now;
  }

  /** Starts (or resumes after a new connection) heartbeats and the watch. */
  attach(nc: NatsConnection): void {
    this.nc = nc;
    this.heartbeat ??= setInterval(() => void this.beat(nc), HEARTBEAT_MS);
    this.sweep ??= setInterval(() => this.sweepDead(), SWEEP_MS);
    void this.beat(nc);
  }

  /** Puts this node's record now (when connected), not at the next heartbeat. */
  announce(): void {
    if (this.nc !== undefined) void this.beat(this.nc);
  }

  /**
   * Whether this node holds its lease now. A lease that ran out since the last look is lost
   * here and then (`leaseLost`), so a caller that is about to serve a session learns it first,
   * also in the first callbacks after this process resumed from a pause.
   */
  holdsLease(): boolean {
    if (this.lease !== 'held') return false;
    const now = monotonic();
    if (now < this.leaseUntil) return true;
    this.lease = 'lost';
    // Since the last accepted heartbeat was sent.
    const silentMs = Math.round(now - this.leaseUntil + LEASE_MS);
    this.opts.logger.warn(
      { silentMs },
      `this node's lease ran out: NATS accepted no heartbeat of it for ${silentMs} ms; it stops serving its sessions until it does`,
    );
    this.opts.leaseLost?.();
    return false;
  }

  /**
   * Monotonic ms this node has not heard `nodeId` while it could have (since it hears the bucket):
   * 0 while it cannot hear, Infinity for a node not in the live list (unheard for 10 s).
   */
  silentFor(nodeId: string): number {
    const n = this.others.get(nodeId);
    if (n === undefined) return Infinity;
    const since = this.observingSince;
    return since === undefined ? 0 : monotonic() - Math.max(n.heardAt, since);
  }

  /** This node hears the bucket now (its own heartbeats come back): who is alive is known. */
  get observing(): boolean {
    return this.observingSince !== undefined;
  }

  /** Whether another node is in the live list now. */
  isAlive(nodeId: string): boolean {
    return this.others.has(nodeId);
  }

  /** This node's record as it would put it now. */
  record(): NodeRecord {
    const o = this.opts;
    return {
      nodeId: o.nodeId,
      startedAt: o.startedAt,
      version: o.version,
      listeners: o.listeners,
      draining: o.draining?.() === true,
      ...o.load(),
    };
  }

  /** Every live node, this one first, then by node id. */
  nodes(): ClusterNode[] {
    const others = [...this.others.values()]
      .sort((a, b) => (a.record.nodeId < b.record.nodeId ? -1 : 1))
      .map((n) => ({ record: n.record, lastSeen: n.lastSeen, self: false }));
    return [{ record: this.record(), lastSeen: this.clock(), self: true }, ...others];
  }

  /** Opens the bucket (once), then puts this node's record. */
  private async beat(nc: NatsConnection): Promise<void> {
    // A put waits up to the JetStream timeout (5 s): the next beat does not pile up behind it.
    if (this.stopped || nc.isClosed() || this.beating) return;
    this.beating = true;
    try {
      await this.putRecord(nc);
    } finally {
      this.beating = false;
    }
  }

  private async putRecord(nc: NatsConnection): Promise<void> {
    const kv = this.kv ?? (await this.open(nc));
    if (kv === undefined) return;
    const sentAt = monotonic();
    try {
      await kv.put(this.opts.nodeId, JSON.stringify(this.record()));
      this.renewLease(sentAt);
      if (this.putFailures >= PUT_FAILURES_LOGGED) this.opts.logger.info({ node: this.opts.nodeId }, 'heartbeats to NATS resumed');
      this.putFailures = 0;
      this.putAt = monotonic();
    } catch (err) {
      if (this.stopped) return;
      // Cut off from NATS, this node cannot tell a silent node from its own deafness.
      this.observingSince = undefined;
      // Once per outage, and not for a lone timeout: a disconnect is logged by the connection itself.
      if (++this.putFailures === PUT_FAILURES_LOGGED)
        this.opts.logger.warn(
          { err: describeError(err), failures: this.putFailures },
          `cannot put the heartbeat in ${NODES_BUCKET}; the other nodes drop this one after ${DEAD_AFTER_MS / 1000} s without it`,
        );
    }
  }

  /** A heartbeat sent at `sentAt` was accepted: the others hear it no earlier than that. */
  private renewLease(sentAt: number): void {
    // A lapse not yet seen is seen first: the sessions go before the lease is taken again.
    if (this.lease === 'held') this.holdsLease();
    this.leaseUntil = Math.max(this.leaseUntil, sentAt + LEASE_MS);
    if (this.lease === 'held' || monotonic() >= this.leaseUntil) return;
    if (this.lease === 'lost') this.opts.logger.info('this node holds its lease again: it serves sessions again');
    this.lease = 'held';
    this.opts.leaseTaken?.();
  }

  private async open(nc: NatsConnection): Promise<KV | undefined> {
    if (this.opening) return undefined;
    this.opening = true;
    try {
      const known = knownServers(nc);
      const replicas = Math.min(this.opts.replicas, known);
      if (replicas < this.opts.replicas)
        this.opts.logger.warn(
          { configured: this.opts.replicas, replicas, servers: known },
          `cluster.replicas is ${this.opts.replicas} but NATS reports ${known} server(s): ${NODES_BUCKET} gets ${replicas} replica(s)`,
        );
      const kv = await nc.jetstream().views.kv(NODES_BUCKET, { history: 1, ttl: DEAD_AFTER_MS, replicas });
      if (this.stopped) return undefined;
      this.kv = kv;
      await this.watch(kv);
      return kv;
    } catch (err) {
      if (!this.stopped)
        this.opts.logger.warn(
          { err: describeError(err) },
          `cannot open the NATS KV bucket ${NODES_BUCKET} (is JetStream enabled?); retrying`,
        );
      return undefined;
    } finally {
      this.opening = false;
    }
  }

  private async watch(kv: KV): Promise<void> {
    const generation = ++this.watchGeneration;
    this.watching?.stop();
    const entries = await kv.watch();
    this.watching = entries;
    this.watchedAt = monotonic();
    void (async () => {
      try {
        for await (const e of entries) {
          if (this.stopped || generation !== this.watchGeneration) break;
          this.apply(e);
        }
      } catch (err) {
        if (this.stopped) return;
        this.opts.logger.warn({ err: describeError(err) }, `the watch of ${NODES_BUCKET} ended; watching again`);
        this.kv = undefined;
      }
    })();
  }

  private apply(e: KvEntry): void {
    if (e.key === this.opts.nodeId) {
      // Its own heartbeat came back through the watch: this node hears the bucket.
      if (e.operation === 'PUT') {
        this.echoAt = monotonic();
        this.observingSince ??= this.echoAt;
      }
      return;
    }
    const now = this.clock();
    if (e.operation !== 'PUT') {
      this.leave(e.key, 'stopped');
      return;
    }
    // A record that aged past the window before the watch delivered it (a node that died before this one started).
    if (now - e.created.getTime() > DEAD_AFTER_MS) return;
    let record: unknown;
    try {
      record = e.json();
    } catch {
      record = undefined;
    }
    if (!isRecord(record) || record.nodeId !== e.key) {
      this.opts.logger.debug({ key: e.key }, `ignoring a malformed record in ${NODES_BUCKET}`);
      return;
    }
    const known = this.others.get(e.key);
    // Seen by this node's clock: the nodes' clocks need not agree.
    this.others.set(e.key, { record, lastSeen: now, heardAt: monotonic() });
    if (known === undefined || known.record.startedAt !== record.startedAt)
      this.opts.logger.info(
        { node: record.nodeId, listeners: record.listeners, version: record.version, nodes: this.others.size + 1 },
        `node joined: ${record.nodeId} (${record.listeners.join(', ') || 'no listeners'})`,
      );
  }

  private sweepDead(): void {
    this.holdsLease();
    const now = monotonic();
    const gap = now - this.lastSweep;
    this.lastSweep = now;
    if (gap > PAUSE_GAP_MS) {
      // This process did not run: the others' silence meanwhile says nothing about them.
      this.opts.logger.warn({ pausedMs: Math.round(gap) }, `this node did not run for ${Math.round(gap)} ms (paused or stalled)`);
      if (this.observingSince !== undefined) this.observingSince = now;
      return;
    }
    // Its own heartbeats stopped coming back through the watch (NATS away, a watch that stalled): deaf until they do.
    if (now - this.echoAt > ECHO_STALE_MS) {
      this.observingSince = undefined;
      // NATS takes its heartbeats but the watch delivers nothing (its consumer did not survive a NATS restart): watch again.
      const kv = this.kv;
      if (kv !== undefined && this.putAt > this.echoAt && now - this.watchedAt > ECHO_STALE_MS) {
        this.opts.logger.info(`the watch of ${NODES_BUCKET} delivers nothing, not even this node's own heartbeats; watching again`);
        this.watchedAt = now;
        this.watch(kv).catch((err: unknown) => {
          if (!this.stopped) this.opts.logger.warn({ err: describeError(err) }, `cannot watch ${NODES_BUCKET}; retrying`);
          this.kv = undefined;
        });
      }
    }
    const since = this.observingSince;
    if (since === undefined) return;
    for (const [id, n] of this.others) if (now - Math.max(n.heardAt, since) > DEAD_AFTER_MS) this.leave(id, 'no heartbeat');
  }

  private leave(nodeId: string, why: 'stopped' | 'no heartbeat'): void {
    const known = this.others.get(nodeId);
    if (known === undefined) return;
    this.others.delete(nodeId);
    this.opts.logger[why === 'stopped' ? 'info' : 'warn'](
      { node: nodeId, reason: why, lastSeen: new Date(known.lastSeen).toISOString(), nodes: this.others.size + 1 },
      `node left: ${nodeId} (${why === 'stopped' ? 'stopped' : `no heartbeat for ${DEAD_AFTER_MS / 1000} s`})`,
    );
    this.opts.left?.(nodeId);
  }

  /**
   * Stops heartbeats and, when `deleteKey` (connected to NATS), deletes this node's key so the
   * others drop it at once; otherwise the key ages out.
   */
  async stop(deleteKey: boolean): Promise<void> {
    this.stopped = true;
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    if (this.sweep !== undefined) clearInterval(this.sweep);
    this.watching?.stop();
    const kv = this.kv;
    if (kv === undefined || !deleteKey) return;
    await kv
      .delete(this.opts.nodeId)
      .catch((err: unknown) =>
        this.opts.logger.warn(
          { err: describeError(err) },
          `cannot delete this node's key from ${NODES_BUCKET}; it ages out in ${DEAD_AFTER_MS / 1000} s`,
        ),
      );
  }
}
