import type { PageRequest, RetainedTotals, RetainStore, StoredMessage } from '@bifro/spi';
import { Scope, locked, nothingToWrite, type BatchOp } from './group-commit';
import { KEY_SPACE, concatKey, decodeKeyString, encodeKeyString, joinKey, prefixEnd, u16Key, withSeparator } from './key-codec';
import { iteratorLimit, prefixRange, type Generation, type StoreContext } from './store-context';
import { levelCount, parseFilter, topicMatches, type ParsedFilter } from './topic-filter';
import { decodeMessage, encodeMessage } from '@bifro/spi';
import {
  decodeRetainedIndexValue,
  decodeRetainedMeta,
  encodeRetainedIndexValue,
  encodeRetainedMeta,
  type RetainedMeta,
} from './value-codec';

/** Bytes a retained message counts for in the totals: UTF-8 topic bytes plus payload bytes. */
export function retainedBytes(message: StoredMessage): number {
  return Buffer.byteLength(message.topic, 'utf8') + message.payload.byteLength;
}

/** Entries read from the index per step, and topics fetched per multi-get. */
const INDEX_CHUNK = 256;

/** A retained write handed over and not yet on disk: the bytes it leaves for its topic (null: deleted). */
interface PendingTopic {
  readonly bytes: number | null;
}

/** What the store keeps per tenant: the write lock, the totals (loaded once) and the key prefixes. */
export class RetainedTenant {
  readonly scope = new Scope();
  meta: RetainedMeta | undefined = undefined;
  /** Topics with a write on its way to disk, so a put or delete right after sees it without a read. */
  readonly pending = new Map<string, PendingTopic>();
  /** `r!<tenant>\0` */
  readonly messagePrefix: Buffer;
  /** `ri!<tenant>\0` */
  readonly indexPrefix: Buffer;
  /** `rm!<tenant>` */
  readonly metaKey: Buffer;

  constructor(tenantId: string) {
    this.messagePrefix = withSeparator(joinKey(KEY_SPACE.retained, tenantId));
    this.indexPrefix = withSeparator(joinKey(KEY_SPACE.retainedIndex, tenantId));
    this.metaKey = joinKey(KEY_SPACE.retainedMeta, tenantId);
  }

  messageKey(topic: string): Buffer {
    return concatKey(this.messagePrefix, encodeKeyString(topic));
  }

  /** `ri!<tenant>\0<level count u16><topic>` */
  indexKey(topic: string): Buffer {
    return concatKey(u16Key(this.indexPrefix, levelCount(topic)), encodeKeyString(topic));
  }
}

/**
 * Retained messages under `r!<tenant>\0<topic>` (get, and list in topic order), a level index
 * `ri!<tenant>\0<level count><topic>` whose value holds the message's byte count and expiry,
 * and per-tenant totals `rm!<tenant>` (topics, bytes, topics per level count), all three
 * written in one batch by every put and delete.
 *
 * `match` reads only index ranges that can hold matching topics: for each level count the
 * filter can match (exactly its own for a filter without `#`; every used count from the `#`
 * position up for one with `#`), one range read over the keys starting with the count and the
 * filter's literal leading levels (`a/b/` for `a/b/+/d`). A filter with a literal first level
 * therefore never reads topics under another first level, and a filter without `#` never reads
 * topics of another depth. Candidates are checked against the whole filter and their expiry
 * (from the index value) before their messages are fetched with one multi-get per chunk.
 */
export class LevelRetainStore implements RetainStore {
  constructor(private readonly ctx: StoreContext) {}

  async put(tenantId: string, message: StoredMessage): Promise<void> {
    const topic = message.topic;
    const value = encodeMessage(message);
    const bytes = retainedBytes(message);
    const indexValue = encodeRetainedIndexValue(message.expiresAt === undefined ? { bytes } : { bytes, expiresAt: message.expiresAt });
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const tenant = tenantOf(g, tenantId);
    await locked(tenant.scope, async () => {
      const meta = tenant.meta ?? (await this.loadMeta(g, tenant));
      const previous = await this.previousBytes(g, tenant, topic);
      if (previous === null) {
        meta.topics++;
        const levels = levelCount(topic);
        meta.levels.set(levels, (meta.levels.get(levels) ?? 0) + 1);
      } else meta.bytes -= previous;
      meta.bytes += bytes;
      const ops: BatchOp[] = [
        { type: 'put', key: tenant.messageKey(topic), value },
        { type: 'put', key: tenant.indexKey(topic), value: indexValue },
        { type: 'put', key: tenant.metaKey, value: encodeRetainedMeta(meta) },
      ];
      return { value: undefined, written: handOver(g, tenant, topic, { bytes }, ops) };
    });
  }

  async delete(tenantId: string, topic: string): Promise<boolean> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const tenant = tenantOf(g, tenantId);
    return locked(tenant.scope, async () => {
      const meta = tenant.meta ?? (await this.loadMeta(g, tenant));
      const previous = await this.previousBytes(g, tenant, topic);
      if (previous === null) return nothingToWrite(false);
      meta.topics--;
      meta.bytes -= previous;
      const levels = levelCount(topic);
      const left = (meta.levels.get(levels) ?? 1) - 1;
      if (left > 0) meta.levels.set(levels, left);
      else meta.levels.delete(levels);
      const ops: BatchOp[] = [
        { type: 'del', key: tenant.messageKey(topic) },
        { type: 'del', key: tenant.indexKey(topic) },
        { type: 'put', key: tenant.metaKey, value: encodeRetainedMeta(meta) },
      ];
      return { value: true, written: handOver(g, tenant, topic, { bytes: null }, ops) };
    });
  }

  async get(tenantId: string, topic: string): Promise<StoredMessage | undefined> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    return this.getIn(g, tenantId, topic);
  }

  private async getIn(g: Generation, tenantId: string, topic: string): Promise<StoredMessage | undefined> {
    let value: Buffer | undefined;
    try {
      value = await g.db.get(concatKey(withSeparator(joinKey(KEY_SPACE.retained, tenantId)), encodeKeyString(topic)));
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
    return value === undefined ? undefined : decodeMessage(value);
  }

  async match(tenantId: string, filter: string, limit: number, now: number): Promise<StoredMessage[]> {
    const max = iteratorLimit(limit);
    if (max === 0) return [];
    const parsed = parseFilter(filter);
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const tenant = tenantOf(g, tenantId);
    if (parsed.exact) {
      // The tenant's totals count topics by level count: none of this one's, nothing to read.
      const meta = tenant.meta ?? (await tenant.scope.run(() => tenant.meta ?? this.loadMeta(g, tenant)));
      if (!meta.levels.has(parsed.levels.length)) return [];
      const m = await this.getIn(g, tenantId, filter);
      return m === undefined || isExpired(m.expiresAt, now) ? [] : [m];
    }
    let levelCounts: number[];
    if (parsed.hashAt < 0) levelCounts = [parsed.levels.length];
    else {
      const meta = tenant.meta ?? (await tenant.scope.run(() => tenant.meta ?? this.loadMeta(g, tenant)));
      const from = Math.max(1, parsed.hashAt);
      levelCounts = [...meta.levels.keys()].filter((n) => n >= from).sort((a, b) => a - b);
    }
    const out: StoredMessage[] = [];
    const wanted = max < 0 ? Infinity : max;
    for (const levels of levelCounts) {
      if (out.length >= wanted) break;
      await this.matchLevelCount(g, tenant, parsed, levels, now, wanted, out);
    }
    return out;
  }

  async totals(tenantId: string): Promise<RetainedTotals> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    const tenant = tenantOf(g, tenantId);
    const meta = tenant.meta ?? (await tenant.scope.run(() => tenant.meta ?? this.loadMeta(g, tenant)));
    return { topics: meta.topics, bytes: meta.bytes };
  }

  async list(page: PageRequest & { readonly tenantId: string }): Promise<StoredMessage[]> {
    const limit = iteratorLimit(page.limit);
    if (limit === 0) return [];
    const prefix = withSeparator(joinKey(KEY_SPACE.retained, page.tenantId));
    const g = this.ctx.gen ?? (await this.ctx.opened());
    try {
      const values = await g.db
        .values({
          ...(page.after === undefined ? { gte: prefix } : { gt: concatKey(prefix, encodeKeyString(page.after)) }),
          lt: prefixEnd(prefix),
          limit,
        })
        .all();
      return values.map(decodeMessage);
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
  }

  /** Reads the index range of one level count and appends matching, unexpired messages to `out` up to `wanted`. */
  private async matchLevelCount(
    g: Generation,
    tenant: RetainedTenant,
    filter: ParsedFilter,
    levels: number,
    now: number,
    wanted: number,
    out: StoredMessage[],
  ): Promise<void> {
    const countPrefix = u16Key(tenant.indexPrefix, levels);
    const topicAt = countPrefix.length;
    const literal = filter.levels.slice(0, Math.min(filter.literalLevels, levels));
    let range: { gte: Buffer; lt?: Buffer; lte?: Buffer };
    if (literal.length === levels) {
      // `a/#` at level count 1: only the topic `a` itself.
      const key = concatKey(countPrefix, encodeKeyString(literal.join('/')));
      range = { gte: key, lte: key };
    } else {
      range = prefixRange(literal.length === 0 ? countPrefix : concatKey(countPrefix, encodeKeyString(literal.join('/') + '/')));
    }
    const iterator = g.db.iterator(range);
    try {
      for (;;) {
        const entries = await iterator.nextv(INDEX_CHUNK);
        if (entries.length === 0) return;
        const candidates: string[] = [];
        for (const [key, value] of entries) {
          this.ctx.counters.retainedIndexKeysScanned++;
          const topic = decodeKeyString(key, topicAt);
          if (!topicMatches(filter, topic) || isExpired(decodeRetainedIndexValue(value).expiresAt, now)) continue;
          candidates.push(topic);
        }
        for (let i = 0; i < candidates.length && out.length < wanted; i += INDEX_CHUNK) {
          const chunk = candidates.slice(i, Math.min(candidates.length, i + INDEX_CHUNK, i + (wanted - out.length)));
          const values = await g.db.getMany(chunk.map((t) => tenant.messageKey(t)));
          for (const v of values) {
            if (v === undefined) continue; // deleted since the index was read
            const m = decodeMessage(v);
            if (!isExpired(m.expiresAt, now)) out.push(m);
          }
        }
        if (out.length >= wanted) return;
      }
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    } finally {
      await iterator.close();
    }
  }

  /** Loads a tenant's totals. Call under the tenant's lock. */
  private async loadMeta(g: Generation, tenant: RetainedTenant): Promise<RetainedMeta> {
    let value: Buffer | undefined;
    try {
      value = await g.db.get(tenant.metaKey);
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
    const meta = value === undefined ? { topics: 0, bytes: 0, levels: new Map<number, number>() } : decodeRetainedMeta(value);
    tenant.meta = meta;
    return meta;
  }

  /** The bytes the topic's current message counts for, or null when it has none. Call under the tenant's lock. */
  private async previousBytes(g: Generation, tenant: RetainedTenant, topic: string): Promise<number | null> {
    const pending = tenant.pending.get(topic);
    if (pending !== undefined) return pending.bytes;
    let value: Buffer | undefined;
    try {
      value = await g.db.get(tenant.indexKey(topic));
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
    return value === undefined ? null : decodeRetainedIndexValue(value).bytes;
  }
}

/** The state of a tenant's retained messages in a generation, created on first use. */
function tenantOf(g: Generation, tenantId: string): RetainedTenant {
  let tenant = g.retained.get(tenantId);
  if (tenant === undefined) {
    tenant = new RetainedTenant(tenantId);
    g.retained.set(tenantId, tenant);
  }
  return tenant;
}

/** Hands a write over and remembers its effect on the topic until it is on disk. */
function handOver(g: Generation, tenant: RetainedTenant, topic: string, effect: PendingTopic, ops: BatchOp[]): Promise<void> {
  tenant.pending.set(topic, effect);
  const written = g.group.write(ops, [tenant.scope]);
  const forget = (): void => {
    if (tenant.pending.get(topic) === effect) tenant.pending.delete(topic);
  };
  written.then(forget, forget);
  return written;
}

/** An expiry before `now` (messages expiring exactly at `now` are still delivered). */
function isExpired(expiresAt: number | undefined, now: number): boolean {
  return expiresAt !== undefined && expiresAt < now;
}
