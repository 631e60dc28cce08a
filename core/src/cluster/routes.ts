import { createHash } from 'node:crypto';
import type { KV, KvEntry } from 'nats';
import type { Logger } from '../base/logger';
import { RepeatedWarning } from '../base/repeated-warning';
import { describeError } from '../base/errors';
import { parseSubscription, isSharedFilter } from '../routing/topic';
import { orderedKey, rendezvousScore, rendezvousWeight } from '../routing/shared-group';
import type { LocalRoutes } from '../routing/cluster-router';
import type { FilterIndex, GroupRef, LocalGroup } from './cluster-view';

/** The KV bucket of routes: one key per (node, tenant, filter) with local subscribers, shared groups included. */
export const ROUTES_BUCKET = 'bifro_routes';
/** Keys longer than this carry a hash of the tenant and filter instead (the value names them anyway). */
export const MAX_KEY_CHARS = 240;
/** A failed put or delete is tried again after this long. */
const RETRY_MS = 1000;
/** How often a node compares its keys in the bucket with the routes it serves, and mends the difference. */
export const RECONCILE_MS = 30_000;
/** How long a listing of this node's routes may take before it is given up (its consumer may have stopped delivering). */
const LIST_WAIT_MS = 5000;
/** Deletes of this node's keys seen within this long are mended together. */
const GATHER_MS = 100;

/**
 * A node's probe key in the bucket (`<node>.probe`, two tokens where a route key has three): the
 * node puts a fresh value there and waits for it to come back through its watch, which then has
 * delivered everything written before it (docs/cluster.md § Routes that heal).
 */
export function probeKey(nodeId: string): string {
  return `${nodeToken(nodeId)}.probe`;
}

/** Whether a key of the bucket is a node's probe key, not a route. */
export function isProbeKey(key: string): boolean {
  return key.endsWith('.probe') && key.indexOf('.') === key.length - '.probe'.length;
}

/** What a key of the bucket stands for (its value, JSON). */
export interface RouteRecord {
  readonly node: string;
  readonly tenant: string;
  /** As subscribed: `$share/<group>/<filter>` and `$oshare/<group>/<filter>` name a shared group. */
  readonly filter: string;
  /** A shared group's local members on the node (absent for a non-shared filter). */
  readonly members?: number;
}

/** Seeds the node weights of ordered picks apart from the member weights (the same key picks both). */
const NODE_SEED = 0x6b43a9b5;

/** A KV key token: base64url, `_` for the empty string (base64url never yields one character). */
export function token(s: string): string {
  return s === '' ? '_' : Buffer.from(s, 'utf8').toString('base64url');
}

/** The node part of its keys: the id itself when it fits a token, else `=` and its base64url (`=` is never in base64url). */
export function nodeToken(nodeId: string): string {
  return /^[-_a-zA-Z0-9]+$/.test(nodeId) ? nodeId : `=${token(nodeId)}`;
}

/** `<node>.<base64url(tenant)>.<base64url(filter)>`, or `<node>.h.<sha256>` when that is too long. */
export function routeKey(nodeId: string, tenantId: string, filter: string): string {
  const node = nodeToken(nodeId);
  const key = `${node}.${token(tenantId)}.${token(filter)}`;
  if (key.length <= MAX_KEY_CHARS) return key;
  const hash = createHash('sha256').update(tenantId).update('\0').update(filter).digest('base64url');
  return `${node}.h.${hash}`;
}

function isRouteRecord(v: unknown): v is RouteRecord {
  const r = v as Partial<RouteRecord> | null;
  if (typeof r !== 'object' || r === null || typeof r.node !== 'string' || typeof r.tenant !== 'string' || typeof r.filter !== 'string')
    return false;
  // A shared group's record counts its members; a plain route counts nothing.
  return isSharedFilter(r.filter) ? Number.isSafeInteger(r.members) && r.members! > 0 : r.members === undefined;
}

/**
 * This node's routes in the bucket: a put when a (tenant, filter) gets its first local subscriber,
 * a delete when the last one goes. One write at a time, in order, so a put and the delete after
 * it never cross; a failed write is retried, whatever is wanted then. The bucket is kept true to
 * what the node serves whatever others do to it: a key of this node deleted by someone else (a
 * node that took this one for departed) is written again as soon as the watch shows it, and
 * every 30 s the node lists its keys and mends any difference (a watch that missed something).
 */
export class RouteWriter {
  /** key → route, as they should be in the bucket. */
  private readonly wanted = new Map<string, RouteRecord>();
  private readonly dirty = new Set<string>();
  private kv: KV | undefined;
  private writing = false;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;
  /** One warn line per outage, not one per retry. */
  private readonly warnings: RepeatedWarning;
  private readonly prefix: string;
  private reconciler: NodeJS.Timeout | undefined;
  /** Keys of this node others deleted, written again together. */
  private readonly deleted = new Set<string>();
  private gather: NodeJS.Timeout | undefined;
  /** Routes written again because they were missing from the bucket, since the start. */
  mended = 0;
  /** Callers of {@link reconcile} waiting for the writes it started. */
  private writeWaiters: ((ok: boolean) => void)[] = [];

  constructor(
    private readonly nodeId: string,
    routes: LocalRoutes,
    private readonly logger: Logger,
    /**
     * Whether what this node serves is known: its own sessions are back after its start or a lapse
     * of its lease. Until then no key of this node is deleted as not served: a key of a previous
     * run may be a persistent session about to be taken back, and others route to it meanwhile.
     */
    private readonly known: () => boolean = () => true,
  ) {
    this.warnings = new RepeatedWarning(logger, () => `writing routes to ${ROUTES_BUCKET}`);
    this.prefix = `${nodeToken(nodeId)}.`;
    for (const [tenant, filter, members] of routes.current()) this.change(tenant, filter, members);
    routes.listen((tenant, filter, members) => this.change(tenant, filter, members));
  }

  private change(tenant: string, filter: string, members: number): void {
    const key = routeKey(this.nodeId, tenant, filter);
    if (members <= 0) this.wanted.delete(key);
    else if (isSharedFilter(filter)) this.wanted.set(key, { node: this.nodeId, tenant, filter, members });
    else this.wanted.set(key, { node: this.nodeId, tenant, filter });
    this.dirty.add(key);
    void this.pump();
  }

  /**
   * The bucket is open: every route is written. Keys of this node it does not serve (a previous
   * run's) go with the first {@link reconcile} once its own sessions are back.
   */
  async attach(kv: KV): Promise<void> {
    for (const key of this.wanted.keys()) this.dirty.add(key);
    this.kv = kv;
    this.reconciler ??= setInterval(() => void this.reconcile(), RECONCILE_MS).unref();
    await this.pump();
  }

  /**
   * An entry the watch of the bucket delivered: a route of this node deleted by someone else is
   * written again (the deletes of one purge gathered for 100 ms, so they make one log line).
   */
  observed(e: KvEntry): void {
    if (e.operation === 'PUT' || !e.key.startsWith(this.prefix) || !this.wanted.has(e.key) || this.dirty.has(e.key)) return;
    this.deleted.add(e.key);
    this.gather ??= setTimeout(() => {
      this.gather = undefined;
      const keys = [...this.deleted].filter((k) => this.wanted.has(k) && !this.dirty.has(k));
      this.deleted.clear();
      if (keys.length > 0 && !this.stopped) this.mend(keys, 'deleted by another node');
    }, GATHER_MS);
  }

  /**
   * Lists this node's keys in the bucket; writes the routes missing there, deletes the keys it no
   * longer serves. Resolves true once the bucket holds exactly what this node serves (as of the
   * listing), false when it could not list or write.
   */
  async reconcile(): Promise<boolean> {
    const kv = this.kv;
    if (kv === undefined || this.stopped || !this.known()) return false;
    const present = new Set<string>();
    try {
      const keys = await kv.keys(`${this.prefix}>`);
      // A listing whose consumer stops delivering (NATS just restarted) would wait for ever: given up, tried again.
      let late = false;
      const bound = setTimeout(() => {
        late = true;
        keys.stop();
      }, LIST_WAIT_MS);
      try {
        for await (const key of keys) if (!isProbeKey(key)) present.add(key);
      } finally {
        clearTimeout(bound);
      }
      if (late) throw new Error(`the listing did not end within ${LIST_WAIT_MS} ms`);
    } catch (err) {
      this.warnings.report(
        '',
        { err: describeError(err) },
        `cannot list this node's routes in ${ROUTES_BUCKET}; trying again in ${RECONCILE_MS / 1000} s`,
      );
      return false;
    }
    const missing = [...this.wanted.keys()].filter((k) => !present.has(k) && !this.dirty.has(k));
    const stale = [...present].filter((k) => !this.wanted.has(k) && !this.dirty.has(k));
    for (const key of stale) this.dirty.add(key);
    if (stale.length > 0)
      this.logger.info({ routes: stale.length }, `deleting ${stale.length} route(s) of this node it does not serve (a previous run's)`);
    if (missing.length > 0) this.mend(missing, 'missing from the bucket');
    else if (stale.length > 0) void this.pump();
    return this.written();
  }

  /** Resolves true when every pending write is done, false when one failed (it is retried) or the bucket is not open yet. */
  written(): Promise<boolean> {
    if (this.kv === undefined || this.stopped) return Promise.resolve(false);
    if (this.dirty.size === 0 && !this.writing) return Promise.resolve(true);
    return new Promise((resolve) => this.writeWaiters.push(resolve));
  }

  private settle(ok: boolean): void {
    if (ok && this.dirty.size > 0) return;
    const waiters = this.writeWaiters;
    this.writeWaiters = [];
    for (const w of waiters) w(ok);
  }

  private mend(keys: readonly string[], why: string): void {
    for (const key of keys) this.dirty.add(key);
    this.mended += keys.length;
    this.logger.warn(
      { routes: keys.length, first: this.wanted.get(keys[0]!)?.filter },
      `writing ${keys.length} route(s) of this node again: ${why}`,
    );
    void this.pump();
  }

  private async pump(): Promise<void> {
    const kv = this.kv;
    if (kv === undefined || this.writing || this.stopped) return;
    this.writing = true;
    let ok = true;
    try {
      for (const key of this.dirty) {
        this.dirty.delete(key);
        const route = this.wanted.get(key);
        try {
          if (route !== undefined) await kv.put(key, JSON.stringify(route));
          else await kv.delete(key);
        } catch (err) {
          ok = false;
          if (this.stopped) return;
          this.dirty.add(key);
          this.warnings.report('', { err: describeError(err), key }, `cannot write a route to ${ROUTES_BUCKET}; retrying`);
          this.retry ??= setTimeout(() => {
            this.retry = undefined;
            void this.pump();
          }, RETRY_MS);
          return;
        }
      }
    } finally {
      this.writing = false;
      this.settle(ok);
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.retry !== undefined) clearTimeout(this.retry);
    if (this.reconciler !== undefined) clearInterval(this.reconciler);
    if (this.gather !== undefined) clearTimeout(this.gather);
    this.warnings.stop();
    this.settle(false);
  }
}

/** Another node's part of a shared group: its members, and its fixed weight in ordered picks. */
interface GroupNode {
  members: number;
  readonly weight: number;
}

/** A node's id and ordered-pick weight. */
export interface PickSelf {
  readonly id: string;
  readonly weight: number;
}

/** The ordered-pick weight of a node. */
export function nodeWeight(nodeId: string): number {
  return rendezvousWeight(nodeId, NODE_SEED);
}

/**
 * A shared group with members on other nodes: which nodes, how many members each, and where
 * this node's `$share` round robin over them stands (docs/cluster.md § Shared subscriptions).
 */
export class RemoteGroup implements GroupRef {
  readonly nodes = new Map<string, GroupNode>();
  private cursor = 0;

  constructor(
    readonly shareKind: 'share' | 'oshare',
    readonly group: string,
    readonly topicFilter: string,
  ) {}

  /**
   * The node that serves this group for one message published here: one of the live nodes with
   * members, this one included when `local` (its members of the group) has any; undefined when none.
   * - `$share`: weighted round robin by member count; this node stands aside while none of its
   *   members is connected and another node has members (the others' connections are not known here).
   * - `$oshare`: rendezvous hashing of (publisher, topic) over the node ids, so one publisher's
   *   messages on a topic keep going to one node, and its ordered member pick, while the set of
   *   nodes with members is unchanged; a node leaving moves only its own keys.
   */
  pick(
    self: PickSelf,
    local: LocalGroup | undefined,
    alive: (nodeId: string) => boolean,
    publisherClientId: string,
    topic: string,
  ): string | undefined {
    const mine = local === undefined ? 0 : local.members.length;
    if (this.shareKind === 'oshare') {
      const key = orderedKey(publisherClientId, topic);
      let best = mine > 0 ? self.id : undefined;
      let bestScore = mine > 0 ? rendezvousScore(key, self.weight) : -1;
      for (const [node, n] of this.nodes) {
        if (!alive(node)) continue;
        const score = rendezvousScore(key, n.weight);
        if (score > bestScore || (score === bestScore && node < best!)) {
          best = node;
          bestScore = score;
        }
      }
      return best;
    }
    let total = 0;
    for (const [node, n] of this.nodes) if (alive(node)) total += n.members;
    const weight = mine > 0 && (total === 0 || local!.members.some((m) => m.subscriber.connected)) ? mine : 0;
    total += weight;
    if (total === 0) return undefined;
    let at = this.cursor++ % total;
    if (at < weight) return self.id;
    at -= weight;
    for (const [node, n] of this.nodes) {
      if (!alive(node)) continue;
      if (at < n.members) return node;
      at -= n.members;
    }
    return undefined;
  }
}

/** One tenant's routes of other nodes: filter → node ids, and shared groups by filter as sent. */
interface TenantRoutes {
  readonly index: FilterIndex<string>;
  /** Non-shared routes in `index`. */
  routes: number;
  /** Topic filter → ids (filter as sent) of `groups`, created with the first group. */
  groupIndex: FilterIndex<string> | undefined;
  readonly groups: Map<string, RemoteGroup>;
}

/**
 * Every node's routes, from a watch of the bucket: per tenant, filter → node ids, and the shared
 * groups with members on other nodes. Which of those nodes are alive is asked at match time
 * (membership), so a dead node's keys cost nothing.
 */
export class RouteTable {
  private readonly byKey = new Map<string, RouteRecord>();
  private readonly tenants = new Map<string, TenantRoutes>();
  private readonly seen = new Set<string>();

  constructor(
    private readonly selfId: string,
    private readonly newIndex: () => FilterIndex<string>,
    private readonly logger: Logger,
  ) {}

  /** Routes of other nodes, alive or not, shared groups' records included. */
  get size(): number {
    return this.byKey.size;
  }

  apply(e: Pick<KvEntry, 'key' | 'operation' | 'json'>): void {
    if (isProbeKey(e.key)) return;
    if (e.operation !== 'PUT') {
      this.remove(e.key);
      return;
    }
    let record: unknown;
    try {
      record = e.json();
    } catch {
      record = undefined;
    }
    if (!isRouteRecord(record) || routeKey(record.node, record.tenant, record.filter) !== e.key) {
      this.logger.debug({ key: e.key }, `ignoring a malformed route in ${ROUTES_BUCKET}`);
      return;
    }
    if (record.node === this.selfId) return;
    const known = this.byKey.get(e.key);
    if (known !== undefined) {
      // A shared group's member count changed; a plain route is put once.
      if (known.members !== undefined && known.filter === record.filter) {
        this.byKey.set(e.key, record);
        this.tenants.get(record.tenant)!.groups.get(record.filter)!.nodes.get(record.node)!.members = record.members!;
      }
      return;
    }
    let t = this.tenants.get(record.tenant);
    if (t === undefined)
      this.tenants.set(record.tenant, (t = { index: this.newIndex(), routes: 0, groupIndex: undefined, groups: new Map() }));
    if (!(record.members === undefined ? this.addRoute(t, record) : this.addGroup(t, record))) {
      this.logger.debug({ key: e.key }, `ignoring a route with an invalid filter in ${ROUTES_BUCKET}`);
      if (t.routes === 0 && t.groups.size === 0) this.tenants.delete(record.tenant);
      return;
    }
    this.byKey.set(e.key, record);
  }

  private addRoute(t: TenantRoutes, record: RouteRecord): boolean {
    try {
      t.index.add(record.filter, record.node);
    } catch {
      return false;
    }
    t.routes++;
    return true;
  }

  private addGroup(t: TenantRoutes, record: RouteRecord): boolean {
    let g = t.groups.get(record.filter);
    if (g === undefined) {
      const parsed = parseSubscription(record.filter);
      if (parsed.shareKind !== 'share' && parsed.shareKind !== 'oshare') return false;
      t.groupIndex ??= this.newIndex();
      try {
        t.groupIndex.add(parsed.topicFilter, record.filter);
      } catch {
        return false;
      }
      t.groups.set(record.filter, (g = new RemoteGroup(parsed.shareKind, parsed.group, parsed.topicFilter)));
    }
    g.nodes.set(record.node, { members: record.members!, weight: nodeWeight(record.node) });
    return true;
  }

  private remove(key: string): void {
    const record = this.byKey.get(key);
    if (record === undefined) return;
    this.byKey.delete(key);
    const t = this.tenants.get(record.tenant)!;
    if (record.members === undefined) {
      t.index.remove(record.filter, record.node);
      t.routes--;
    } else {
      const g = t.groups.get(record.filter)!;
      g.nodes.delete(record.node);
      if (g.nodes.size === 0) {
        t.groups.delete(record.filter);
        t.groupIndex!.remove(g.topicFilter, record.filter);
      }
    }
    if (t.routes === 0 && t.groups.size === 0) this.tenants.delete(record.tenant);
  }

  /** Forgets everything (a new watch replays the bucket). */
  clear(): void {
    this.byKey.clear();
    this.tenants.clear();
  }

  /** Whether `nodeId` (a live node or not) has a route of this exact (tenant, filter). */
  hasRoute(nodeId: string, tenantId: string, filter: string): boolean {
    return this.byKey.has(routeKey(nodeId, tenantId, filter));
  }

  /** Whether `nodeId` has any route left in the table (a walk over every route: for rare callers). */
  hasNode(nodeId: string): boolean {
    for (const r of this.byKey.values()) if (r.node === nodeId) return true;
    return false;
  }

  /** Whether any other node has a route in the tenant (the cheap check before a match). */
  has(tenantId: string): boolean {
    return this.tenants.has(tenantId);
  }

  /** Whether any other node has members of a shared group in the tenant. */
  hasGroups(tenantId: string): boolean {
    const t = this.tenants.get(tenantId);
    return t !== undefined && t.groups.size > 0;
  }

  /** Calls `visit` once per node whose non-shared routes match `topic` in the tenant (alive or not). */
  nodesFor(tenantId: string, topic: string, visit: (nodeId: string) => void): void {
    const t = this.tenants.get(tenantId);
    if (t === undefined || t.routes === 0) return;
    const seen = this.seen;
    seen.clear();
    t.index.match(topic, (node) => {
      if (seen.has(node)) return;
      seen.add(node);
      visit(node);
    });
  }

  /** Calls `visit` once per shared group of other nodes whose topic filter matches `topic` in the tenant. */
  groupsFor(tenantId: string, topic: string, visit: (group: RemoteGroup) => void): void {
    const t = this.tenants.get(tenantId);
    if (t?.groupIndex === undefined) return;
    const groups = t.groups;
    t.groupIndex.match(topic, (id) => visit(groups.get(id)!));
  }
}
