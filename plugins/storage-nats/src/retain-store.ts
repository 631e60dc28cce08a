import type { PageRequest, RetainedTotals, RetainStore, StoredMessage } from '@bifro/spi';
import { WriteConflict } from './jetstream-link';
import { decodeTopic, encodeToken, encodeTopic, isHashed } from './key-codec';
import type { BucketEntry, KvBucket } from './kv-bucket';
import { asBuffer, type StoreContext } from './store-context';
import { decodeMessage, encodeMessage } from '@bifro/spi';

/** Compare-and-set attempts before a write gives up (only reached under heavy contention on one topic). */
const CAS_ATTEMPTS = 50;

/**
 * Retained messages in KV `<prefix>_ret_<p>`, p = hash(tenant): key `<enc tenant>.<enc level>…`,
 * one token per topic level, so a filter becomes a subject filter on one bucket (`+` → `*`,
 * `#` → `>` and the parent level itself) and a literal first level reads only its own subjects.
 * The tenant's totals are the key `<enc tenant>` alone (no topic has zero levels), updated with
 * compare-and-set after each put or delete, which is itself a compare-and-set on the topic's
 * revision, so concurrent writers on several nodes keep exact totals.
 */
export class NatsRetainStore implements RetainStore {
  constructor(private readonly ctx: StoreContext) {}

  private bucket(tenantId: string): KvBucket {
    return this.ctx.retained[this.ctx.layout.tenantPartition(tenantId)];
  }

  put(tenantId: string, message: StoredMessage): Promise<void> {
    const value = encodeMessage(message);
    const bytes = retainedBytes(message);
    return this.ctx.call(`retained put (${tenantId}, ${message.topic})`, async () => {
      const b = this.bucket(tenantId);
      const key = `${encodeToken(tenantId)}.${encodeTopic(message.topic)}`;
      for (let attempt = 1; ; attempt++) {
        const old = await b.get(key);
        try {
          await b.put(key, value, old?.revision ?? 0);
        } catch (err) {
          if (err instanceof WriteConflict && attempt < CAS_ATTEMPTS) continue;
          throw err;
        }
        await this.addTotals(b, tenantId, old === undefined ? 1 : 0, bytes - (old === undefined ? 0 : retainedBytes(decode(old))));
        return;
      }
    });
  }

  delete(tenantId: string, topic: string): Promise<boolean> {
    return this.ctx.call(`retained delete (${tenantId}, ${topic})`, async () => {
      const b = this.bucket(tenantId);
      const key = `${encodeToken(tenantId)}.${encodeTopic(topic)}`;
      for (let attempt = 1; ; attempt++) {
        const old = await b.get(key);
        if (old === undefined) return false;
        try {
          await b.removeAt(key, old.revision);
        } catch (err) {
          if (err instanceof WriteConflict && attempt < CAS_ATTEMPTS) continue;
          throw err;
        }
        await this.addTotals(b, tenantId, -1, -retainedBytes(decode(old)));
        return true;
      }
    });
  }

  get(tenantId: string, topic: string): Promise<StoredMessage | undefined> {
    return this.ctx.call(`retained get (${tenantId}, ${topic})`, async () => {
      const e = await this.bucket(tenantId).get(`${encodeToken(tenantId)}.${encodeTopic(topic)}`);
      return e === undefined ? undefined : decode(e);
    });
  }

  match(tenantId: string, filter: string, limit: number, now: number): Promise<StoredMessage[]> {
    return this.ctx.call(`retained match (${tenantId}, ${filter})`, async () => {
      const out: StoredMessage[] = [];
      if (limit <= 0) return out;
      const b = this.bucket(tenantId);
      const levels = filter.split('/');
      // [MQTT-4.7.2-1] a wildcard first level does not match topics starting with `$`.
      const skipDollar = levels[0] === '+' || levels[0] === '#';
      const tokens = levels.map((l) => (l === '+' ? '*' : l === '#' ? '>' : encodeToken(l)));
      const t = encodeToken(tenantId);
      const filters = [`${t}.${tokens.join('.')}`];
      // [MQTT-4.7.1-2] `a/#` also matches `a`.
      if (levels[levels.length - 1] === '#' && levels.length > 1) filters.push(`${t}.${tokens.slice(0, -1).join('.')}`);
      const take = (m: StoredMessage): boolean => {
        if ((m.expiresAt === undefined || m.expiresAt >= now) && !(skipDollar && m.topic.startsWith('$'))) out.push(m);
        return out.length < limit;
      };
      for (const f of filters) {
        if (out.length >= limit) break;
        if (f.includes('*') || f.endsWith('>')) await b.scan(f, (e) => take(decode(e)));
        else {
          const e = await b.get(f);
          if (e !== undefined) take(decode(e));
        }
      }
      return out;
    });
  }

  totals(tenantId: string): Promise<RetainedTotals> {
    return this.ctx.call(`retained totals (${tenantId})`, async () => {
      const e = await this.bucket(tenantId).get(encodeToken(tenantId));
      return e === undefined ? { topics: 0, bytes: 0 } : readTotals(e);
    });
  }

  list(page: PageRequest & { readonly tenantId: string }): Promise<StoredMessage[]> {
    return this.ctx.call(`retained list (${page.tenantId})`, async () => {
      if (page.limit <= 0) return [];
      const b = this.bucket(page.tenantId);
      const keys = await Promise.all(
        (await b.keys(`${encodeToken(page.tenantId)}.>`)).map(async (k) => {
          const tokens = k.split('.').slice(1);
          // A hashed level (a very long one) is read back from the message.
          if (!tokens.some(isHashed)) return { k, topic: decodeTopic(tokens) };
          const e = await b.get(k);
          return { k, topic: e === undefined ? '' : decode(e).topic };
        }),
      );
      const after = page.after;
      const chosen = keys
        .filter((k) => after === undefined || k.topic > after)
        .sort((x, y) => (x.topic < y.topic ? -1 : x.topic > y.topic ? 1 : 0))
        .slice(0, page.limit);
      const entries = await Promise.all(chosen.map((k) => b.get(k.k)));
      return entries.flatMap((e) => (e === undefined ? [] : [decode(e)]));
    });
  }

  private async addTotals(b: KvBucket, tenantId: string, topics: number, bytes: number): Promise<void> {
    if (topics === 0 && bytes === 0) return;
    const key = encodeToken(tenantId);
    for (let attempt = 1; ; attempt++) {
      const e = await b.get(key);
      const t = e === undefined ? { topics: 0, bytes: 0 } : readTotals(e);
      const out = Buffer.allocUnsafe(16);
      out.writeDoubleBE(Math.max(0, t.topics + topics), 0);
      out.writeDoubleBE(Math.max(0, t.bytes + bytes), 8);
      try {
        await b.put(key, out, e?.revision ?? 0);
        return;
      } catch (err) {
        if (err instanceof WriteConflict && attempt < CAS_ATTEMPTS) continue;
        throw err;
      }
    }
  }
}

/** What a retained message counts in the totals: topic and payload bytes. */
function retainedBytes(m: StoredMessage): number {
  return Buffer.byteLength(m.topic, 'utf8') + m.payload.byteLength;
}

function decode(e: BucketEntry): StoredMessage {
  return decodeMessage(asBuffer(e.value));
}

function readTotals(e: BucketEntry): RetainedTotals {
  const v = asBuffer(e.value);
  return { topics: v.readDoubleBE(0), bytes: v.readDoubleBE(8) };
}
