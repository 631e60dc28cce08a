import { createHash } from 'node:crypto';
import type { KV, KvEntry } from 'nats';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import type { FilterIndex, LocalRoutes } from './cluster-view';

/** The KV bucket of routes: one key per (node, tenant, filter) with local non-shared subscribers. */
export const ROUTES_BUCKET = 'bifro_routes';
/** Keys longer than this carry a hash of the tenant and filter instead (the value names them anyway). */
const MAX_KEY_CHARS = 240;
/** A failed put or delete is tried again after this long. */
const RETRY_MS = 1000;

/** What a key of the bucket stands for (its value, JSON). */
export interface RouteRecord {
  readonly node: string;
  readonly tenant: string;
  readonly filter: string;
}

/** A KV key token: base64url, `_` for the empty string (base64url never yields one character). */
function token(s: string): string {
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
  return typeof r === 'object' && r !== null && typeof r.node === 'string' && typeof r.tenant === 'string' && typeof r.filter === 'string';
}

/**
 * This node's routes in the bucket: a put when a (tenant, filter) gets its first local subscriber,
 * a delete when the last one goes. One write at a time, in order, so a put and the delete after
 * it never cross; a failed write is retried, whatever is wanted then.
 */
export class RouteWriter {
  /** key → route, as they should be in the bucket. */
  private readonly wanted = new Map<string, RouteRecord>();
  private readonly dirty = new Set<string>();
  private kv: KV | undefined;
  private writing = false;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly nodeId: string,
    routes: LocalRoutes,
    private readonly logger: Logger,
  ) {
    for (const [tenant, filter] of routes.current()) this.change(tenant, filter, true);
    routes.listen((tenant, filter, added) => this.change(tenant, filter, added));
  }

  private change(tenant: string, filter: string, added: boolean): void {
    const key = routeKey(this.nodeId, tenant, filter);
    if (added) this.wanted.set(key, { node: this.nodeId, tenant, filter });
    else this.wanted.delete(key);
    this.dirty.add(key);
    void this.pump();
  }

  /** The bucket is open: keys of this node left from a previous run go, then every route is written. */
  async attach(kv: KV): Promise<void> {
    const leftover: string[] = [];
    for await (const key of await kv.keys(`${nodeToken(this.nodeId)}.>`)) if (!this.wanted.has(key)) leftover.push(key);
    for (const key of leftover) await kv.delete(key);
    if (leftover.length > 0) this.logger.info({ keys: leftover.length }, `deleted ${leftover.length} routes of this node's previous run`);
    for (const key of this.wanted.keys()) this.dirty.add(key);
    this.kv = kv;
    await this.pump();
  }

  private async pump(): Promise<void> {
    const kv = this.kv;
    if (kv === undefined || this.writing || this.stopped) return;
    this.writing = true;
    try {
      for (const key of this.dirty) {
        this.dirty.delete(key);
        const route = this.wanted.get(key);
        try {
          if (route !== undefined) await kv.put(key, JSON.stringify(route));
          else await kv.delete(key);
        } catch (err) {
          if (this.stopped) return;
          this.dirty.add(key);
          this.logger.warn({ err: describeError(err), key }, `cannot write a route to ${ROUTES_BUCKET}; retrying`);
          this.retry ??= setTimeout(() => {
            this.retry = undefined;
            void this.pump();
          }, RETRY_MS);
          return;
        }
      }
    } finally {
      this.writing = false;
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.retry !== undefined) clearTimeout(this.retry);
  }
}

/**
 * Every node's routes, from a watch of the bucket: per tenant, filter → node ids. Which of those
 * nodes are alive is asked at match time (membership), so a dead node's keys cost nothing.
 */
export class RouteTable {
  private readonly byKey = new Map<string, RouteRecord>();
  private readonly tenants = new Map<string, { index: FilterIndex<string>; routes: number }>();
  private readonly seen = new Set<string>();

  constructor(
    private readonly selfId: string,
    private readonly newIndex: () => FilterIndex<string>,
    private readonly logger: Logger,
  ) {}

  /** Routes of other nodes, alive or not. */
  get size(): number {
    return this.byKey.size;
  }

  apply(e: KvEntry): void {
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
    if (record.node === this.selfId || this.byKey.has(e.key)) return;
    let t = this.tenants.get(record.tenant);
    if (t === undefined) this.tenants.set(record.tenant, (t = { index: this.newIndex(), routes: 0 }));
    try {
      t.index.add(record.filter, record.node);
    } catch {
      this.logger.debug({ key: e.key }, `ignoring a route with an invalid filter in ${ROUTES_BUCKET}`);
      if (t.routes === 0) this.tenants.delete(record.tenant);
      return;
    }
    t.routes++;
    this.byKey.set(e.key, record);
  }

  private remove(key: string): void {
    const record = this.byKey.get(key);
    if (record === undefined) return;
    this.byKey.delete(key);
    const t = this.tenants.get(record.tenant)!;
    t.index.remove(record.filter, record.node);
    if (--t.routes === 0) this.tenants.delete(record.tenant);
  }

  /** Forgets everything (a new watch replays the bucket). */
  clear(): void {
    this.byKey.clear();
    this.tenants.clear();
  }

  /** Whether any other node has a route in the tenant (the cheap check before a match). */
  has(tenantId: string): boolean {
    return this.tenants.has(tenantId);
  }

  /** Calls `visit` once per node whose routes match `topic` in the tenant (alive or not). */
  nodesFor(tenantId: string, topic: string, visit: (nodeId: string) => void): void {
    const t = this.tenants.get(tenantId);
    if (t === undefined) return;
    const seen = this.seen;
    seen.clear();
    t.index.match(topic, (node) => {
      if (seen.has(node)) return;
      seen.add(node);
      visit(node);
    });
  }
}
