import type { BanKind, BanRecord, BanStore } from '@bifro/spi';
import { encodeToken } from './key-codec';
import type { KvBucket } from './kv-bucket';
import { asBuffer, type StoreContext } from './store-context';
import { decodeBan, encodeBan } from '@bifro/spi';

/** `=` never comes out of encodeToken: the tenant token of a ban for every tenant. */
const NO_TENANT = '=';

/** Bans in KV `<prefix>_bans`, key `<kind>.<enc tenant or =>.<enc value>`: few records, read at boot. */
export class NatsBanStore implements BanStore {
  constructor(private readonly ctx: StoreContext) {}

  private get bucket(): KvBucket {
    return this.ctx.bans as KvBucket;
  }

  put(ban: BanRecord): Promise<void> {
    const value = encodeBan(ban);
    return this.ctx.call(`ban put (${ban.kind} ${ban.value})`, async () => {
      await this.bucket.put(banKey(ban.kind, ban.tenantId, ban.value), value);
    });
  }

  delete(kind: BanKind, tenantId: string | undefined, value: string): Promise<boolean> {
    return this.ctx.call(`ban delete (${kind} ${value})`, async () => {
      const key = banKey(kind, tenantId, value);
      const e = await this.bucket.get(key);
      if (e === undefined) return false;
      await this.bucket.remove(key);
      return true;
    });
  }

  list(): Promise<BanRecord[]> {
    return this.ctx.call('ban list', async () => {
      const out: BanRecord[] = [];
      await this.bucket.scan('>', (e) => (out.push(decodeBan(asBuffer(e.value))), true));
      return out;
    });
  }
}

function banKey(kind: BanKind, tenantId: string | undefined, value: string): string {
  return `${kind}.${tenantId === undefined ? NO_TENANT : encodeToken(tenantId)}.${encodeToken(value)}`;
}
