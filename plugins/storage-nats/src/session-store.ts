import type { PageRequest, SessionRecord, SessionStore } from '@bifro/spi';
import { SESSION_LIST_KEY_SEPARATOR, STORAGE_FENCED } from '@bifro/spi';
import { NatsStorageError } from './errors';
import { headersOf, WriteConflict } from './jetstream-link';
import { decodeToken, encodeToken, isHashed } from './key-codec';
import type { BucketEntry, KvBucket } from './kv-bucket';
import { sessionKey } from './layout';
import { asBuffer, type StoreContext } from './store-context';
import { decodeSession, encodeSession } from '@bifro/spi';

/** What deleting a session also clears: its inbox and inflight state. */
export interface SessionDependents {
  clearInbox(tenantId: string, clientId: string): Promise<void>;
  clearInflight(tenantId: string, clientId: string): Promise<void>;
}

/**
 * Session records in KV `<prefix>_sess_<p>`, key `<enc tenant>.<enc client>`. A list reads the
 * keys of every partition (headers only), sorts them and fetches the values of one page: it costs
 * in proportion to the sessions of the tenant (all sessions for a list across tenants), which is
 * fine for the admin API that calls it, not for a hot path.
 */
export class NatsSessionStore implements SessionStore {
  /** Per session key: the revision and epoch this instance last read or wrote (bounded, oldest forgotten first). */
  private readonly seen = new Map<string, { readonly revision: number; readonly epoch: number }>();

  constructor(
    private readonly ctx: StoreContext,
    private readonly dependents: SessionDependents,
  ) {}

  private bucket(tenantId: string, clientId: string): KvBucket {
    return this.ctx.sessions[this.ctx.layout.sessionPartition(tenantId, clientId)];
  }

  get(tenantId: string, clientId: string): Promise<SessionRecord | undefined> {
    return this.ctx.call(`session get (${tenantId}/${clientId})`, async () => {
      const key = sessionKey(tenantId, clientId);
      const e = await this.bucket(tenantId, clientId).get(key);
      this.saw(key, e);
      return e === undefined ? undefined : recordOf(e);
    });
  }

  put(record: SessionRecord): Promise<void> {
    const { tenantId, clientId, epoch } = record;
    return this.ctx.call(`session put (${tenantId}/${clientId})`, async () => {
      const key = sessionKey(tenantId, clientId);
      const b = this.bucket(tenantId, clientId);
      if (epoch === undefined) {
        await b.put(key, encodeSession(record));
        return;
      }
      const value = encodeSession({ ...record, epoch: undefined });
      const headers = headersOf({ [H_EPOCH]: String(epoch) });
      await this.fenced(b, key, epoch, `session put (${tenantId}/${clientId})`, async (revision) => {
        this.seen.set(key, { revision: await b.put(key, value, revision, headers), epoch });
      });
    });
  }

  delete(tenantId: string, clientId: string, epoch?: number): Promise<void> {
    return this.ctx.call(`session delete (${tenantId}/${clientId})`, async () => {
      const key = sessionKey(tenantId, clientId);
      const b = this.bucket(tenantId, clientId);
      if (epoch === undefined) {
        await Promise.all([
          b.remove(key),
          this.dependents.clearInbox(tenantId, clientId),
          this.dependents.clearInflight(tenantId, clientId),
        ]);
        return;
      }
      // The record first: a refused removal leaves the inbox and inflight state to the newer owner.
      await this.fenced(b, key, epoch, `session delete (${tenantId}/${clientId})`, async (revision) => {
        if (revision > 0) await b.removeAt(key, revision);
        this.seen.set(key, { revision: 0, epoch });
      });
      await Promise.all([this.dependents.clearInbox(tenantId, clientId), this.dependents.clearInflight(tenantId, clientId)]);
    });
  }

  /**
   * Runs `write` with the revision it must replace (0: the key must be absent), as known from
   * this instance's last read or write of the key, or read now. A write that meets another
   * writer's (WriteConflict) reads the key again: a newer epoch there, or the record removed by
   * someone else, refuses the write (BIFRO_STORAGE_FENCED); an older or equal epoch is replaced.
   */
  private async fenced(b: KvBucket, key: string, epoch: number, what: string, write: (revision: number) => Promise<void>): Promise<void> {
    let known = this.seen.get(key);
    for (let attempt = 1; ; attempt++) {
      if (known === undefined) {
        const e = await b.get(key);
        known = { revision: e?.revision ?? 0, epoch: epochOf(e) };
      }
      if (known.epoch > epoch) throw fencedError(what, known.epoch, epoch);
      try {
        await write(known.revision);
        return;
      } catch (err) {
        this.seen.delete(key);
        if (!(err instanceof WriteConflict) || attempt >= CAS_ATTEMPTS) throw err;
      }
      const e = await b.get(key);
      if (e === undefined && known.revision > 0) throw fencedError(what, undefined, epoch);
      known = { revision: e?.revision ?? 0, epoch: epochOf(e) };
    }
  }

  /** What a read found, as the starting point of this instance's next fenced write of the key. */
  private saw(key: string, e: BucketEntry | undefined): void {
    this.seen.delete(key);
    this.seen.set(key, { revision: e?.revision ?? 0, epoch: epochOf(e) });
    if (this.seen.size > REMEMBERED_SESSIONS) this.seen.delete(this.seen.keys().next().value as string);
  }

  private async idsOf(p: number, key: string): Promise<{ tenantId: string; clientId: string }> {
    const e = await this.ctx.sessions[p].get(key);
    return e === undefined ? { tenantId: '', clientId: '' } : decodeSession(asBuffer(e.value));
  }

  list(page: PageRequest): Promise<SessionRecord[]> {
    return this.ctx.call('session list', async () => {
      if (page.limit <= 0) return [];
      const filter = page.tenantId === undefined ? '>' : `${encodeToken(page.tenantId)}.>`;
      const keys = await Promise.all(
        (await Promise.all(this.ctx.sessions.map((b) => b.keys(filter)))).flatMap((ks, p) =>
          ks.map(async (k) => {
            const [t, c] = k.split('.');
            // A hashed token (a very long id) is read back from the record.
            const ids = isHashed(t) || isHashed(c) ? await this.idsOf(p, k) : { tenantId: decodeToken(t), clientId: decodeToken(c) };
            const order = page.tenantId === undefined ? ids.tenantId + SESSION_LIST_KEY_SEPARATOR + ids.clientId : ids.clientId;
            return { p, k, order };
          }),
        ),
      );
      const after = page.after;
      const chosen = keys
        .filter((k) => after === undefined || k.order > after)
        .sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0))
        .slice(0, page.limit);
      const records = await Promise.all(chosen.map((k) => this.ctx.sessions[k.p].get(k.k)));
      return records.flatMap((e) => (e === undefined ? [] : [recordOf(e)]));
    });
  }
}

/** Header of a session record's message: the owner epoch that wrote it (SPI 1.7.0 fencing). */
const H_EPOCH = 'Bifro-Epoch';
/** Session keys whose last revision and epoch are remembered for fenced writes. */
const REMEMBERED_SESSIONS = 65_536;
/** Fenced writes that meet another writer's this many times in a row give up. */
const CAS_ATTEMPTS = 8;

/** The epoch a record was written with; -1 for none (absent, or written without one). */
function epochOf(e: BucketEntry | undefined): number {
  // A header that is not there reads as ''.
  const text = e?.headers?.get(H_EPOCH) ?? '';
  const n = text === '' ? NaN : Number(text);
  return Number.isSafeInteger(n) ? n : -1;
}

function recordOf(e: BucketEntry): SessionRecord {
  const record = decodeSession(asBuffer(e.value));
  const epoch = epochOf(e);
  return epoch < 0 ? record : { ...record, epoch };
}

function fencedError(what: string, stored: number | undefined, epoch: number): NatsStorageError {
  const why = stored === undefined ? 'its record was removed by another owner' : `its record holds owner epoch ${stored}`;
  return new NatsStorageError(STORAGE_FENCED, `${what}: refused at owner epoch ${epoch}: ${why} (the session moved to another node)`);
}
