import { BlockList, isIP } from 'node:net';
import type { BanKind, BanRecord, BanStore } from '@bifro/spi';
import type { EmitEvent } from '../base/broker-events';
import type { Clock } from '../base/clock';
import { describeError } from '../base/errors';
import type { Logger } from '../base/logger';

/**
 * Bans set by an operator (docs/api.md § Bans): client ids, users, whole tenants and remote
 * addresses or CIDR blocks, each for a time or until lifted. The broker keeps them all in memory,
 * read from `storage.bans` at boot and written through on every change, so the check at CONNECT is
 * a few map lookups and, for addresses, one `net.BlockList` check per scope.
 */

/** Who a CONNECT is from, as far as bans go. */
export interface BanClient {
  readonly tenantId: string;
  readonly clientId: string;
  readonly userId?: string;
  readonly remoteAddress: string;
}

/** An address or CIDR block of an `address` ban. */
export interface AddressBlock {
  readonly type: 'ipv4' | 'ipv6';
  readonly address: string;
  /** Prefix length: 32 (IPv4) or 128 (IPv6) for a single address. */
  readonly prefix: number;
}

/** An IPv4/IPv6 address or CIDR block (`10.0.0.0/8`, `2001:db8::/32`); undefined when it is not one. */
export function parseAddressBlock(value: string): AddressBlock | undefined {
  const slash = value.indexOf('/');
  const address = slash < 0 ? value : value.slice(0, slash);
  const family = isIP(address);
  // A zone index (fe80::1%eth0) names an interface, not an address a remote client connects from.
  if (family === 0 || address.includes('%')) return undefined;
  const max = family === 4 ? 32 : 128;
  if (slash < 0) return { type: family === 4 ? 'ipv4' : 'ipv6', address, prefix: max };
  const prefix = value.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return undefined;
  return { type: family === 4 ? 'ipv4' : 'ipv6', address, prefix: Number(prefix) };
}

/**
 * What is wrong with a ban, naming the field (`tenant`, `value`), or undefined when it is well
 * formed: a non-empty value, a tenant for client id and user bans, the tenant itself as the value of
 * a tenant ban, an address or CIDR block for an address ban.
 */
export function banProblem(ban: Pick<BanRecord, 'kind' | 'tenantId' | 'value'>): string | undefined {
  if (ban.value === '') return 'value: must not be empty';
  if (ban.tenantId === '') return 'tenant: must not be empty';
  switch (ban.kind) {
    case 'clientId':
    case 'user':
      return ban.tenantId === undefined ? `tenant: a ${ban.kind} ban needs the tenant it is about` : undefined;
    case 'tenant':
      return ban.tenantId !== undefined && ban.tenantId !== ban.value
        ? `tenant: a tenant ban names its tenant in value ("${ban.value}"), tenant "${ban.tenantId}" differs`
        : undefined;
    case 'address':
      return parseAddressBlock(ban.value) === undefined ? `value: "${ban.value}" is not an IPv4/IPv6 address or CIDR block` : undefined;
  }
}

/** The identity of a ban, (kind, tenantId, value), as one string: the key lists are ordered and paged by. */
export function banKey(kind: BanKind, tenantId: string | undefined, value: string): string {
  return JSON.stringify([kind, tenantId ?? null, value]);
}

/** A ban as the broker stores it: a tenant ban's tenantId is its value. */
function normalise(ban: BanRecord): BanRecord {
  return ban.kind === 'tenant' && ban.tenantId === undefined ? { ...ban, tenantId: ban.value } : ban;
}

/** Whether `ban` applies to `client` (the matcher for live connections when a ban is set). */
export function banMatcher(ban: BanRecord): (client: BanClient) => boolean {
  switch (ban.kind) {
    case 'clientId':
      return (c) => c.tenantId === ban.tenantId && c.clientId === ban.value;
    case 'user':
      return (c) => c.tenantId === ban.tenantId && c.userId === ban.value;
    case 'tenant':
      return (c) => c.tenantId === ban.value;
    case 'address': {
      const list = blockListOf([ban]);
      return (c) => (ban.tenantId === undefined || c.tenantId === ban.tenantId) && checkAddress(list, c.remoteAddress);
    }
  }
}

function blockListOf(bans: readonly BanRecord[]): BlockList {
  const list = new BlockList();
  for (const ban of bans) {
    const block = parseAddressBlock(ban.value);
    if (block !== undefined) list.addSubnet(block.address, block.prefix, block.type);
  }
  return list;
}

/** A remote address against a block list; IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) match IPv4 blocks. */
function checkAddress(list: BlockList, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** The address bans of one scope (a tenant, or every tenant): one list for the quick answer, the bans to find which. */
interface AddressScope {
  readonly any: BlockList;
  readonly bans: ReadonlyArray<{ readonly ban: BanRecord; readonly list: BlockList }>;
}

/**
 * The broker's bans. `refusing` is what CONNECT asks: with no ban at all it is one size check.
 * Ended bans (`until` passed on the broker's clock) are dropped when a lookup or a list meets them,
 * and deleted from storage then.
 */
export class BanList {
  /** CONNECTs refused by a ban since start. */
  refused = 0;
  private readonly byKey = new Map<string, BanRecord>();
  /** `tenant\0clientId` → ban. */
  private readonly clientIds = new Map<string, BanRecord>();
  /** `tenant\0userId` → ban. */
  private readonly users = new Map<string, BanRecord>();
  private readonly tenants = new Map<string, BanRecord>();
  private readonly tenantAddresses = new Map<string, AddressScope>();
  private allAddresses: AddressScope | undefined;
  private volatileWarned = false;
  /** Deletes of ended bans not waited for where they were met (at CONNECT); the broker waits for them before storage closes. */
  private readonly deleting = new Set<Promise<void>>();

  constructor(
    /** `storage.bans`; without it bans hold until the broker stops. */
    private readonly store: BanStore | undefined,
    private readonly logger: Logger,
    private readonly emit: EmitEvent,
    private readonly clock: Clock = Date.now,
  ) {}

  /** Bans held now (ended ones not yet met included). */
  get size(): number {
    return this.byKey.size;
  }

  /** Whether bans survive a restart (the storage has a ban store). */
  get durable(): boolean {
    return this.store !== undefined;
  }

  /** Resolves once the deletes of ended bans issued so far are done (at shutdown, before storage closes). */
  async settled(): Promise<void> {
    await Promise.all([...this.deleting]);
  }

  /** Reads the stored bans (at boot, before the listeners bind); ended ones are deleted. Resolves how many hold. */
  async load(): Promise<number> {
    if (this.store === undefined) return 0;
    const now = this.clock();
    const ended: BanRecord[] = [];
    for (const stored of await this.store.list()) {
      const ban = normalise(stored);
      const problem = banProblem(ban);
      if (problem !== undefined) {
        this.logger.warn(
          { kind: ban.kind, tenantId: ban.tenantId, value: ban.value, problem },
          'stored ban ignored: it is not well formed',
        );
        continue;
      }
      if (hasEnded(ban, now)) ended.push(ban);
      else this.add(ban);
    }
    this.rebuildAddresses();
    await Promise.all(ended.map((ban) => this.deleteStored(ban)));
    if (this.byKey.size > 0) this.logger.info({ bans: this.byKey.size }, `loaded ${this.byKey.size} bans`);
    return this.byKey.size;
  }

  /**
   * Sets (or replaces) a ban: written to storage first, then in force. Throws a RangeError naming
   * the field when it is not well formed ({@link banProblem}); rejects when the storage write fails.
   */
  async set(input: BanRecord): Promise<BanRecord> {
    const ban = normalise(input);
    const problem = banProblem(ban);
    if (problem !== undefined) throw new RangeError(problem);
    if (this.store !== undefined) await this.store.put(ban);
    else this.warnVolatile();
    const key = banKey(ban.kind, ban.tenantId, ban.value);
    const previous = this.byKey.get(key);
    if (previous !== undefined) this.remove(previous);
    this.add(ban);
    if (ban.kind === 'address') this.rebuildAddresses();
    this.logger.info(
      { kind: ban.kind, tenantId: ban.tenantId, value: ban.value, until: ban.until, by: ban.by, reason: ban.reason },
      `ban set: ${ban.kind} "${ban.value}"${ban.tenantId !== undefined && ban.kind !== 'tenant' ? ` of tenant "${ban.tenantId}"` : ''}${ban.until === undefined ? ' until lifted' : ` until ${new Date(ban.until).toISOString()}`}`,
    );
    return ban;
  }

  /** Lifts a ban; resolves the lifted one, or undefined when there was none in force. */
  async lift(kind: BanKind, tenantId: string | undefined, value: string): Promise<BanRecord | undefined> {
    const ban = this.byKey.get(banKey(kind, kind === 'tenant' ? (tenantId ?? value) : tenantId, value));
    if (ban === undefined) return undefined;
    const live = !hasEnded(ban, this.clock());
    this.remove(ban);
    if (ban.kind === 'address') this.rebuildAddresses();
    await this.deleteStored(ban);
    if (!live) return undefined;
    this.logger.info({ kind: ban.kind, tenantId: ban.tenantId, value: ban.value }, `ban lifted: ${ban.kind} "${ban.value}"`);
    return ban;
  }

  /** Every ban in force, ordered by {@link banKey}; ended ones are dropped on the way. */
  list(): BanRecord[] {
    const now = this.clock();
    const out: Array<{ key: string; ban: BanRecord }> = [];
    for (const [key, ban] of this.byKey) {
      if (hasEnded(ban, now)) this.expire(ban);
      else out.push({ key, ban });
    }
    out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return out.map((e) => e.ban);
  }

  /** The ban in force that refuses `client`, if any: by client id, user, tenant, then address. */
  match(client: BanClient): BanRecord | undefined {
    if (this.byKey.size === 0) return undefined;
    const now = this.clock();
    const tenantId = client.tenantId;
    const byClient = this.clientIds.get(tenantId + '\0' + client.clientId);
    if (byClient !== undefined && this.inForce(byClient, now)) return byClient;
    if (client.userId !== undefined) {
      const byUser = this.users.get(tenantId + '\0' + client.userId);
      if (byUser !== undefined && this.inForce(byUser, now)) return byUser;
    }
    const byTenant = this.tenants.get(tenantId);
    if (byTenant !== undefined && this.inForce(byTenant, now)) return byTenant;
    return (
      this.matchAddress(this.tenantAddresses.get(tenantId), client.remoteAddress, now) ??
      this.matchAddress(this.allAddresses, client.remoteAddress, now)
    );
  }

  /**
   * At CONNECT, once the tenant is known: the ban refusing the client, counted, logged at debug
   * and reported (`banned`, reason `ban`); undefined when none applies.
   */
  refusing(client: BanClient): BanRecord | undefined {
    const ban = this.match(client);
    if (ban === undefined) return undefined;
    this.refused++;
    const remainingSeconds = ban.until === undefined ? undefined : Math.max(1, Math.ceil((ban.until - this.clock()) / 1000));
    this.logger.debug(
      {
        tenantId: client.tenantId,
        clientId: client.clientId,
        remote: client.remoteAddress,
        kind: ban.kind,
        value: ban.value,
        remainingSeconds,
      },
      'banned client refused',
    );
    this.emit('banned', client, { remoteAddress: client.remoteAddress, reason: 'ban', kind: ban.kind, remainingSeconds });
    return ban;
  }

  private matchAddress(scope: AddressScope | undefined, address: string, now: number): BanRecord | undefined {
    if (scope === undefined || !checkAddress(scope.any, address)) return undefined;
    let found: BanRecord | undefined;
    let ended = false;
    for (const { ban, list } of scope.bans) {
      if (!checkAddress(list, address)) continue;
      if (hasEnded(ban, now)) {
        this.remove(ban);
        ended = true;
        this.ended(ban);
      } else found ??= ban;
    }
    if (ended) this.rebuildAddresses();
    return found;
  }

  /** Whether a ban found by a lookup still holds; an ended one is dropped. */
  private inForce(ban: BanRecord, now: number): boolean {
    if (!hasEnded(ban, now)) return true;
    this.expire(ban);
    return false;
  }

  private expire(ban: BanRecord): void {
    this.remove(ban);
    if (ban.kind === 'address') this.rebuildAddresses();
    this.ended(ban);
  }

  /** A ban met after its end: said once, and deleted from storage (not waited for: see {@link settled}). */
  private ended(ban: BanRecord): void {
    this.logger.info({ kind: ban.kind, tenantId: ban.tenantId, value: ban.value }, 'ban ended');
    const deleted = this.deleteStored(ban);
    this.deleting.add(deleted);
    void deleted.finally(() => this.deleting.delete(deleted));
  }

  private add(ban: BanRecord): void {
    this.byKey.set(banKey(ban.kind, ban.tenantId, ban.value), ban);
    if (ban.kind === 'clientId') this.clientIds.set(ban.tenantId + '\0' + ban.value, ban);
    else if (ban.kind === 'user') this.users.set(ban.tenantId + '\0' + ban.value, ban);
    else if (ban.kind === 'tenant') this.tenants.set(ban.value, ban);
  }

  /** Forgets a ban in memory; address scopes are rebuilt by the caller (once for several). */
  private remove(ban: BanRecord): void {
    this.byKey.delete(banKey(ban.kind, ban.tenantId, ban.value));
    if (ban.kind === 'clientId') this.clientIds.delete(ban.tenantId + '\0' + ban.value);
    else if (ban.kind === 'user') this.users.delete(ban.tenantId + '\0' + ban.value);
    else if (ban.kind === 'tenant') this.tenants.delete(ban.value);
  }

  /** `net.BlockList` has no removal: the address scopes are rebuilt from the bans on every change (rare). */
  private rebuildAddresses(): void {
    const byScope = new Map<string | undefined, BanRecord[]>();
    for (const ban of this.byKey.values()) {
      if (ban.kind !== 'address') continue;
      const list = byScope.get(ban.tenantId);
      if (list === undefined) byScope.set(ban.tenantId, [ban]);
      else list.push(ban);
    }
    this.tenantAddresses.clear();
    this.allAddresses = undefined;
    for (const [tenantId, bans] of byScope) {
      const scope: AddressScope = { any: blockListOf(bans), bans: bans.map((ban) => ({ ban, list: blockListOf([ban]) })) };
      if (tenantId === undefined) this.allAddresses = scope;
      else this.tenantAddresses.set(tenantId, scope);
    }
  }

  private async deleteStored(ban: BanRecord): Promise<void> {
    if (this.store === undefined) return;
    try {
      await this.store.delete(ban.kind, ban.tenantId, ban.value);
    } catch (err) {
      this.logger.warn(
        { kind: ban.kind, tenantId: ban.tenantId, value: ban.value, err: describeError(err) },
        'ban not deleted from storage',
      );
    }
  }

  private warnVolatile(): void {
    if (this.volatileWarned) return;
    this.volatileWarned = true;
    this.logger.warn(
      'the storage plugin has no ban store (storage.bans, SPI 1.3.0): bans hold only until the broker stops and will not survive a restart',
    );
  }
}

/** Whether a ban's time is up at `now`. */
function hasEnded(ban: BanRecord, now: number): boolean {
  return ban.until !== undefined && ban.until <= now;
}
