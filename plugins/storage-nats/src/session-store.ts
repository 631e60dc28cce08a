import type { PageRequest, SessionRecord, SessionStore } from '@bifro/spi';
import { SESSION_LIST_KEY_SEPARATOR } from '@bifro/spi';
import { decodeToken, encodeToken, isHashed } from './key-codec';
import type { KvBucket } from './kv-bucket';
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
  constructor(
    private readonly ctx: StoreContext,
    private readonly dependents: SessionDependents,
  ) {}

  private bucket(tenantId: string, clientId: string): KvBucket {
    return this.ctx.sessions[this.ctx.layout.sessionPartition(tenantId, clientId)];
  }

  get(tenantId: string, clientId: string): Promise<SessionRecord | undefined> {
    return this.ctx.call(`session get (${tenantId}/${clientId})`, async () => {
      const e = await this.bucket(tenantId, clientId).get(sessionKey(tenantId, clientId));
      return e === undefined ? undefined : decodeSession(asBuffer(e.value));
    });
  }

  put(record: SessionRecord): Promise<void> {
    const { tenantId, clientId } = record;
    return this.ctx.call(`session put (${tenantId}/${clientId})`, async () => {
      await this.bucket(tenantId, clientId).put(sessionKey(tenantId, clientId), encodeSession(record));
    });
  }

  delete(tenantId: string, clientId: string): Promise<void> {
    return this.ctx.call(`session delete (${tenantId}/${clientId})`, async () => {
      await Promise.all([
        this.bucket(tenantId, clientId).remove(sessionKey(tenantId, clientId)),
        this.dependents.clearInbox(tenantId, clientId),
        this.dependents.clearInflight(tenantId, clientId),
      ]);
    });
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
      return records.flatMap((e) => (e === undefined ? [] : [decodeSession(asBuffer(e.value))]));
    });
  }
}
