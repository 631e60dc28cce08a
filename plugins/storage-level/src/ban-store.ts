import type { BanKind, BanRecord, BanStore } from '@bifro/spi';
import { locked, nothingToWrite } from './group-commit';
import { KEY_SPACE, joinKey } from './key-codec';
import { prefixRange, type StoreContext } from './store-context';
import { decodeBan, encodeBan } from '@bifro/spi';

/** The scope component of a ban key: U+0001 for every tenant, U+0002 and the tenant for one (tenant ids hold no U+0000). */
function scopeOf(tenantId: string | undefined): string {
  return tenantId === undefined ? '\u0001' : `\u0002${tenantId}`;
}

/** `b!<kind>\0<scope>\0<value>` */
function banKey(kind: BanKind, tenantId: string | undefined, value: string): Buffer {
  return joinKey(KEY_SPACE.ban, kind, scopeOf(tenantId), value);
}

/**
 * Bans under `b!<kind>\0<scope>\0<value>`, one key per (kind, tenantId, value). Few records,
 * written when an operator bans or lifts and read once at boot, so each call is its own batch
 * through the group commit (fsync'ed like every other write). One lock orders the calls: a delete
 * waits for the writes before it to be on disk, then reads whether the ban is there.
 */
export class LevelBanStore implements BanStore {
  constructor(private readonly ctx: StoreContext) {}

  async put(ban: BanRecord): Promise<void> {
    const key = banKey(ban.kind, ban.tenantId, ban.value);
    const value = encodeBan(ban);
    const g = this.ctx.gen ?? (await this.ctx.opened());
    await locked(g.bans, () => ({ value: undefined, written: g.group.write([{ type: 'put', key, value }], [g.bans]) }));
  }

  async delete(kind: BanKind, tenantId: string | undefined, value: string): Promise<boolean> {
    const key = banKey(kind, tenantId, value);
    const g = this.ctx.gen ?? (await this.ctx.opened());
    return locked(g.bans, async () => {
      await g.bans.flushed();
      let found: Buffer | undefined;
      try {
        found = await g.db.get(key);
      } catch (err) {
        throw this.ctx.readFailed(g, err);
      }
      if (found === undefined) return nothingToWrite(false);
      return { value: true, written: g.group.write([{ type: 'del', key }], [g.bans]) };
    });
  }

  async list(): Promise<BanRecord[]> {
    const g = this.ctx.gen ?? (await this.ctx.opened());
    await g.bans.flushed();
    try {
      const values = await g.db.values(prefixRange(KEY_SPACE.ban)).all();
      return values.map(decodeBan);
    } catch (err) {
      throw this.ctx.readFailed(g, err);
    }
  }
}
