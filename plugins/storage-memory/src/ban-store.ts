import type { BanKind, BanRecord, BanStore } from '@bifro/spi';

/** The map key of a ban: its (kind, tenantId, value), unambiguous whatever the strings hold. */
function keyOf(kind: BanKind, tenantId: string | undefined, value: string): string {
  return JSON.stringify([kind, tenantId ?? null, value]);
}

/** Bans in one map by (kind, tenantId, value). Records hold only strings and numbers: a shallow copy is a full copy. */
export class MemoryBanStore implements BanStore {
  private readonly bans = new Map<string, BanRecord>();

  async put(ban: BanRecord): Promise<void> {
    this.bans.set(keyOf(ban.kind, ban.tenantId, ban.value), { ...ban });
  }

  async delete(kind: BanKind, tenantId: string | undefined, value: string): Promise<boolean> {
    return this.bans.delete(keyOf(kind, tenantId, value));
  }

  async list(): Promise<BanRecord[]> {
    return [...this.bans.values()];
  }
}
