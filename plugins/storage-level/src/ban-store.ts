import type { BanKind, BanRecord, BanStore } from '@bifro/spi';
import { Scope, locked, nothingToWrite } from './group-commit';
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
  private readonly scope = new Scope();

  constructor(private readonly ctx: StoreContext) {}

  async put(ban: BanRecord): Promise<void> {
    const key = banKey(ban.kind, ban.tenantId, ban.value);
    const value = encodeBan(ban);
    await locked(this.scope, () => ({
      value: undefined,
      written: this.ctx.commit().write([{ type: 'put', key, value }], [this.scope]),
    }));
  }

  async delete(kind: BanKind, tenantId: string | undefined, value: string): Promise<boolean> {
    const key = banKey(kind, tenantId, value);
    return locked(this.scope, async () => {
      await this.scope.flushed();
      if ((await this.ctx.db().get(key)) === undefined) return nothingToWrite(false);
      return { value: true, written: this.ctx.commit().write([{ type: 'del', key }], [this.scope]) };
    });
  }

  async list(): Promise<BanRecord[]> {
    await this.scope.flushed();
    const values = await this.ctx.db().values(prefixRange(KEY_SPACE.ban)).all();
    return values.map(decodeBan);
  }
}
