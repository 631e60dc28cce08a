import { createHash } from 'node:crypto';
import type { KV, KvEntry, NatsConnection } from 'nats';
import { RESOURCE_TYPES } from '@bifro/spi';
import type { Logger } from '../base/logger';
import { describeError } from '../base/errors';
import { knownServers } from './membership';
import { MAX_KEY_CHARS, nodeToken, token } from './routes';

/** The KV bucket of per-tenant usage: one key per (node, tenant) with non-zero usage on that node. */
export const USAGE_BUCKET = 'bifro_usage';
/** How often a node looks for tenants whose usage changed and writes them. */
export const PUBLISH_MS = 2000;
/** Most writes per tick: with more changed tenants the rest waits for the next ticks, oldest change first. */
export const MAX_WRITES_PER_TICK = 4000;
/** A value longer than this is not read (a tenant id plus 17 numbers fits in well under 1 KB). */
const MAX_VALUE_BYTES = 4096;
/** A bucket that could not be opened, or whose watch ended, is tried again after this long. */
const REOPEN_MS = 1000;

const R = RESOURCE_TYPES.length;
const INDEX = new Map<string, number>(RESOURCE_TYPES.map((r, i) => [r, i]));
const IS_RATE = Uint8Array.from(RESOURCE_TYPES, (r) => (r.endsWith('PerSecond') ? 1 : 0));

/** What the publisher reads of a tenant's usage (the tenancy's TenantState, structurally). */
export interface UsageState {
  /** Gauges and current one-second rate windows, indexed like RESOURCE_TYPES. */
  readonly values: Float64Array;
  /** Everything the rate at `index` ever counted. */
  counted(index: number): number;
  /** Set by every change of a value; the publisher clears it when it has looked. */
  changed: boolean;
}

/** This node's usage, and where the quota checks read the other nodes' (the tenancy's TenantUsage, structurally). */
export interface UsageSource {
  states(): IterableIterator<[string, UsageState]>;
  addRemote(sums: ReadonlyMap<string, Float64Array>): void;
  /** A tenant's array in the sums appeared or went. */
  remoteChanged(tenantId: string, sums: Float64Array | undefined): void;
}

/** What a key of the bucket holds (JSON): the non-zero resources only; rates are per second over the node's last period. */
export interface UsageRecord {
  readonly node: string;
  readonly tenant: string;
  readonly usage: Readonly<Record<string, number>>;
}

/** `<node>.<base64url(tenant)>`, or `<node>.h.<sha256(tenant)>` when that is too long (the value names the tenant anyway). */
export function usageKey(nodeId: string, tenantId: string): string {
  const node = nodeToken(nodeId);
  const key = `${node}.${token(tenantId)}`;
  return key.length <= MAX_KEY_CHARS ? key : `${node}.h.${createHash('sha256').update(tenantId).digest('base64url')}`;
}

/**
 * A bucket value as this node trusts it, or undefined: another node's bytes are hostile input. The
 * key must be the one its node and tenant give (no value speaks for another key); resources this
 * version does not know are skipped (a newer node), a value that is no finite non-negative number
 * rejects the record.
 */
export function parseUsage(key: string, bytes: Uint8Array): { node: string; tenant: string; values: Float64Array } | undefined {
  if (bytes.length > MAX_VALUE_BYTES) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return undefined;
  }
  const r = v as Partial<UsageRecord> | null;
  if (typeof r !== 'object' || r === null || typeof r.node !== 'string' || typeof r.tenant !== 'string') return undefined;
  if (typeof r.usage !== 'object' || r.usage === null || Array.isArray(r.usage)) return undefined;
  if (usageKey(r.node, r.tenant) !== key) return undefined;
  const values = new Float64Array(R);
  for (const [name, value] of Object.entries(r.usage)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return undefined;
    const i = INDEX.get(name);
    if (i !== undefined) values[i] = value;
  }
  return { node: r.node, tenant: r.tenant, values };
}

interface Entry {
  readonly node: string;
  readonly tenant: string;
  values: Float64Array;
}

/**
 * The other nodes' usage as read from the bucket, and its sum per tenant over the live nodes,
 * worked out when an update arrives or a node leaves or comes back: a quota check adds one array
 * read, never a sum. Entries of nodes out of the live list are kept but not counted.
 */
export class UsageTable {
  /** Tenant → the other live nodes' usage summed, indexed like RESOURCE_TYPES; only tenants with some. */
  readonly sums = new Map<string, Float64Array>();
  private readonly entries = new Map<string, Entry>();
  /** Node → tenant → entry. */
  private readonly byNode = new Map<string, Map<string, Entry>>();
  /** Nodes whose entries are in {@link sums}. */
  private readonly counted = new Set<string>();
  ignored = 0;

  constructor(
    private readonly nodeId: string,
    private readonly alive: (nodeId: string) => boolean,
    /** A tenant's array in {@link sums} appeared or went (its values change in place in between). */
    private readonly linked: (tenant: string, sums: Float64Array | undefined) => void = () => undefined,
  ) {}

  /** A watched entry: a put replaces what the key said, a delete or purge removes it. */
  apply(e: Pick<KvEntry, 'key' | 'operation' | 'value'>): void {
    if (e.operation !== 'PUT') {
      const old = this.entries.get(e.key);
      if (old === undefined) return;
      this.entries.delete(e.key);
      this.byNode.get(old.node)?.delete(old.tenant);
      if (this.counted.has(old.node)) this.recompute(old.tenant);
      return;
    }
    const parsed = parseUsage(e.key, e.value);
    if (parsed === undefined) {
      this.ignored++;
      return;
    }
    // Its own keys are this node's last run's, which its publisher rewrites or deletes.
    if (parsed.node === this.nodeId) return;
    const old = this.entries.get(e.key);
    if (old !== undefined) old.values = parsed.values;
    else {
      const entry: Entry = parsed;
      this.entries.set(e.key, entry);
      let tenants = this.byNode.get(entry.node);
      if (tenants === undefined) this.byNode.set(entry.node, (tenants = new Map()));
      tenants.set(entry.tenant, entry);
    }
    if (this.counted.has(parsed.node)) this.recompute(parsed.tenant);
    else if (this.alive(parsed.node)) this.count(parsed.node);
  }

  /** A node left the live list: its usage stops counting now. */
  nodeLeft(nodeId: string): void {
    if (!this.counted.delete(nodeId)) return;
    for (const tenant of this.byNode.get(nodeId)?.keys() ?? []) this.recompute(tenant);
  }

  /** Nodes that joined (or came back) since: their entries count from now on; ones gone are dropped. */
  checkAlive(): void {
    for (const node of this.byNode.keys()) {
      const alive = this.alive(node);
      if (alive && !this.counted.has(node)) this.count(node);
      else if (!alive && this.counted.has(node)) this.nodeLeft(node);
    }
  }

  /** The watch starts over: it delivers every key again. */
  clear(): void {
    this.entries.clear();
    this.byNode.clear();
    this.counted.clear();
    for (const tenant of this.sums.keys()) this.linked(tenant, undefined);
    this.sums.clear();
  }

  /** Keys of other nodes held (for tests and logs). */
  get size(): number {
    return this.entries.size;
  }

  private count(nodeId: string): void {
    this.counted.add(nodeId);
    for (const tenant of this.byNode.get(nodeId)?.keys() ?? []) this.recompute(tenant);
  }

  /** Sum the tenant's usage over the counted nodes afresh: exact, with no drift from adding and subtracting rates. */
  private recompute(tenant: string): void {
    const old = this.sums.get(tenant);
    let sum = old;
    sum?.fill(0);
    for (const node of this.counted) {
      const entry = this.byNode.get(node)?.get(tenant);
      if (entry === undefined) continue;
      sum ??= new Float64Array(R);
      for (let i = 0; i < R; i++) sum[i]! += entry.values[i]!;
    }
    if (sum !== undefined && sum !== old) {
      this.sums.set(tenant, sum);
      this.linked(tenant, sum);
    } else if (old !== undefined && !this.has(tenant)) {
      this.sums.delete(tenant);
      this.linked(tenant, undefined);
    }
  }

  /** Whether a counted node has an entry for the tenant. */
  private has(tenant: string): boolean {
    for (const node of this.counted) if (this.byNode.get(node)?.has(tenant) === true) return true;
    return false;
  }
}

/** Per tenant: [0, R) the values now, [R, 2R) the values last written, [2R, 3R) each rate's count at the last scan. */
const SENT = R;
const PREV = 2 * R;

/**
 * This node's usage in the bucket: every {@link PUBLISH_MS} the tenants are scanned, and those
 * whose values changed since they were last written are queued; at most
 * {@link MAX_WRITES_PER_TICK} are written per tick, oldest change first. Gauges are written as
 * they are; a rate as its average per second since the last scan. A tenant whose usage is all
 * zero has its key deleted. Resources in `skip` are never written (the retained totals, when the
 * store that counts them is shared and so cluster-wide already).
 */
export class UsagePublisher {
  private readonly tenants = new Map<string, Float64Array>();
  private readonly pending = new Set<string>();
  /** Tenants with a rate not 0 at the last scan: looked at again even unchanged, to bring it back to 0. */
  private readonly ratesOn = new Map<string, UsageState>();
  /** 1 for each resource never written. */
  private readonly skip = new Uint8Array(R);
  private kv: KV | undefined;
  private lastScan: number;
  private writing = false;
  private failures = 0;

  constructor(
    private readonly nodeId: string,
    private readonly source: UsageSource,
    skip: ReadonlySet<number>,
    private readonly logger: Logger,
    private readonly clock: () => number,
  ) {
    for (const i of skip) this.skip[i] = 1;
    this.lastScan = clock();
    // What the rates counted before this start is not a rate of the first period.
    for (const [tenant, state] of source.states()) {
      const pub = this.slotsOf(tenant);
      for (let i = 0; i < R; i++) if (IS_RATE[i]) pub[PREV + i] = state.counted(i);
      state.changed = true;
    }
  }

  /** The bucket is open: this node's keys of a previous run (or connection) that nothing wants are deleted, the rest written again. */
  async attach(kv: KV): Promise<void> {
    this.kv = undefined;
    const wanted = new Set<string>();
    for (const [tenant, pub] of this.tenants) {
      pub.fill(0, SENT, SENT + R);
      if (nonZero(pub)) {
        wanted.add(usageKey(this.nodeId, tenant));
        this.pending.add(tenant);
      }
    }
    // Listed first: a keys() iteration with awaited calls inside ends after the first key (nats.js 2.29).
    const leftover: string[] = [];
    for await (const key of await kv.keys(`${nodeToken(this.nodeId)}.>`)) if (!wanted.has(key)) leftover.push(key);
    for (const key of leftover) await kv.delete(key);
    this.kv = kv;
  }

  detach(): void {
    this.kv = undefined;
  }

  /** Scan the tenants, then write what changed (the timer calls it; tests may too). */
  tick(): Promise<void> {
    this.scan();
    return this.flush();
  }

  private scan(): void {
    const now = this.clock();
    const dt = (now - this.lastScan) / 1000;
    if (dt <= 0) return;
    this.lastScan = now;
    // Tenants whose rates were on and who counted nothing since: their rates are 0 now.
    for (const [tenant, state] of this.ratesOn) if (!state.changed) this.look(tenant, state, dt);
    for (const [tenant, state] of this.source.states()) if (state.changed) this.look(tenant, state, dt);
  }

  private look(tenant: string, state: UsageState, dt: number): void {
    state.changed = false;
    let pub = this.tenants.get(tenant);
    if (pub === undefined) {
      if (!hasUsage(state)) return;
      pub = this.slotsOf(tenant);
    }
    const values = state.values;
    let rates = 0;
    const skip = this.skip;
    let changed = false;
    for (let i = 0; i < R; i++) {
      let v = 0;
      if (skip[i] === 1) v = 0;
      else if (IS_RATE[i]) {
        const c = state.counted(i);
        v = Math.round(((c - pub[PREV + i]!) / dt) * 10) / 10;
        pub[PREV + i] = c;
        if (v !== 0) rates = 1;
      } else v = values[i]!;
      pub[i] = v;
      if (v !== pub[SENT + i]) changed = true;
    }
    if (rates === 1) this.ratesOn.set(tenant, state);
    else this.ratesOn.delete(tenant);
    if (changed) this.pending.add(tenant);
  }

  private async flush(): Promise<void> {
    const kv = this.kv;
    if (kv === undefined || this.writing || this.pending.size === 0) return;
    this.writing = true;
    const batch: string[] = [];
    for (const tenant of this.pending) {
      batch.push(tenant);
      this.pending.delete(tenant);
      if (batch.length === MAX_WRITES_PER_TICK) break;
    }
    try {
      const failed = (await Promise.all(batch.map((t) => this.write(kv, t)))).filter((ok) => !ok).length;
      if (failed > 0 && this.failures === 0)
        this.logger.warn({ failed }, `cannot write the usage of ${failed} tenant(s) in ${USAGE_BUCKET}; retrying`);
      this.failures = failed;
    } finally {
      this.writing = false;
    }
  }

  private async write(kv: KV, tenant: string): Promise<boolean> {
    const pub = this.tenants.get(tenant)!;
    const values = pub.slice(0, R);
    const usage: Record<string, number> = {};
    let any = false;
    for (let i = 0; i < R; i++)
      if (values[i] !== 0) {
        usage[RESOURCE_TYPES[i]!] = values[i]!;
        any = true;
      }
    try {
      const key = usageKey(this.nodeId, tenant);
      if (any) await kv.put(key, JSON.stringify({ node: this.nodeId, tenant, usage } satisfies UsageRecord));
      else if (nonZero(pub, SENT)) await kv.delete(key);
      pub.set(values, SENT);
      return true;
    } catch {
      // Queued again (behind the others): an unchanged tenant is not looked at by the next scan.
      this.pending.add(tenant);
      return false;
    }
  }

  private slotsOf(tenant: string): Float64Array {
    let pub = this.tenants.get(tenant);
    if (pub === undefined) this.tenants.set(tenant, (pub = new Float64Array(3 * R)));
    return pub;
  }
}

function nonZero(pub: Float64Array, from = 0): boolean {
  for (let i = from; i < from + R; i++) if (pub[i] !== 0) return true;
  return false;
}

function hasUsage(state: UsageState): boolean {
  for (let i = 0; i < R; i++) if (state.values[i] !== 0 || (IS_RATE[i] && state.counted(i) !== 0)) return true;
  return false;
}

export interface ClusterUsageOptions {
  readonly nodeId: string;
  readonly source: UsageSource;
  /** The store counting retained messages is shared by the nodes: its totals are cluster-wide already. */
  readonly sharedRetained: boolean;
  readonly replicas: number;
  alive(nodeId: string): boolean;
  readonly logger: Logger;
  readonly clock: () => number;
}

/**
 * Tenant quotas across nodes (docs/cluster.md § Quotas across nodes): this node's usage written to
 * {@link USAGE_BUCKET}, the other live nodes' read from it and added to what the quota checks see.
 */
export class ClusterUsage {
  readonly table: UsageTable;
  private readonly publisher: UsagePublisher;
  private readonly timer: NodeJS.Timeout;
  private generation = 0;
  private stopped = false;

  constructor(private readonly opts: ClusterUsageOptions) {
    this.table = new UsageTable(opts.nodeId, opts.alive, (tenant, sums) => opts.source.remoteChanged(tenant, sums));
    const skip = new Set<number>();
    if (opts.sharedRetained) for (const r of ['TotalRetainTopics', 'TotalRetainedBytes']) skip.add(INDEX.get(r)!);
    this.publisher = new UsagePublisher(opts.nodeId, opts.source, skip, opts.logger, opts.clock);
    opts.source.addRemote(this.table.sums);
    this.timer = setInterval(() => {
      this.table.checkAlive();
      void this.publisher.tick();
    }, PUBLISH_MS).unref();
  }

  /** A new NATS connection: open the bucket, watch it, write this node's usage. */
  async attach(nc: NatsConnection): Promise<void> {
    if (this.stopped || nc.isClosed()) return;
    const mine = ++this.generation;
    const logger = this.opts.logger;
    this.publisher.detach();
    try {
      const replicas = Math.min(this.opts.replicas, knownServers(nc));
      const kv = await nc.jetstream().views.kv(USAGE_BUCKET, { history: 1, replicas });
      const entries = await kv.watch();
      this.table.clear();
      void (async () => {
        try {
          for await (const e of entries) {
            if (this.stopped || mine !== this.generation) break;
            this.table.apply(e);
          }
        } catch (err) {
          if (this.stopped || mine !== this.generation) return;
          logger.warn({ err: describeError(err) }, `the watch of ${USAGE_BUCKET} ended; watching again`);
          setTimeout(() => void this.attach(nc), REOPEN_MS);
        }
      })();
      await this.publisher.attach(kv);
    } catch (err) {
      if (this.stopped || mine !== this.generation) return;
      logger.warn({ err: describeError(err) }, `cannot open the NATS KV bucket ${USAGE_BUCKET}; retrying`);
      setTimeout(() => void this.attach(nc), REOPEN_MS);
    }
  }

  nodeLeft(nodeId: string): void {
    this.table.nodeLeft(nodeId);
  }

  stop(): void {
    this.stopped = true;
    this.publisher.detach();
    clearInterval(this.timer);
  }
}
