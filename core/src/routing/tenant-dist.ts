/**
 * The subscription index of one tenant: who receives a message published on a topic. Non-shared
 * subscriptions are aggregated per subscriber (`match-set.ts`); shared groups (`$share`, `$oshare`,
 * `shared-group.ts`) are returned as live groups to pick one member from. Results are cached per topic.
 */
import { aggregate, emptyMatchSet, single, type DirectMatch, type MatchSet } from './match-set';
import { SharedGroup, type DistSubscription, type SharedGroupMatch } from './shared-group';
import { hasWildcard, parseSubscription, topicMatchesFilter, validateTopicFilter, PROTOCOL_TOPIC_LIMITS } from './topic';
import { TopicTrie } from './topic-trie';

export { emptyMatchSet, type DirectMatch, type MatchSet } from './match-set';
export { pickMember, type DistSubscription, type SharedGroupMatch, type SharedMember } from './shared-group';

/** Outcome of {@link TenantDist.subscribe}. Shared constants. */
export type SubscribeResult =
  | { readonly replaced: boolean; readonly rejected?: undefined }
  | {
      readonly replaced?: undefined;
      /** `group-full`: the shared group already has `maxGroupMembers`. `invalid-filter`: malformed share syntax or misplaced wildcard. */
      readonly rejected: 'group-full' | 'invalid-filter';
    };

/** Limits applied by {@link TenantDist.subscribe}. */
export interface SubscribeLimits {
  /** Tenant setting MaxSharedGroupMembers: a new member beyond this many is refused. */
  readonly maxGroupMembers: number;
}

/** Options of a {@link TenantDist}. */
export interface TenantDistOptions {
  /** Most topics whose match sets are cached (default 10 000). 0 disables the cache. */
  readonly cacheSize?: number;
}

const ADDED: SubscribeResult = Object.freeze({ replaced: false });
const REPLACED: SubscribeResult = Object.freeze({ replaced: true });
const GROUP_FULL: SubscribeResult = Object.freeze({ rejected: 'group-full' });
const INVALID_FILTER: SubscribeResult = Object.freeze({ rejected: 'invalid-filter' });
const EMPTY_MATCH: MatchSet<never> = emptyMatchSet<never>();

/**
 * Up to this many cached topics, a wildcard subscription change deletes exactly the cached topics
 * it matches (a scan costing about 25 ns per topic); above, the cache is cleared, which is O(1)
 * and keeps subscribe storms cheap. Literal filters always invalidate exactly one topic.
 */
const PRECISE_INVALIDATION_MAX = 128;

/** Every subscription with the same topic filter (the trie's value). */
class FilterEntry<S> {
  /** Non-shared subscriptions by client id. */
  readonly direct = new Map<string, DistSubscription<S>>();
  /** Shared groups by kind and group name. */
  readonly groups = new Map<string, SharedGroup<S>>();

  constructor(readonly topicFilter: string) {}

  isEmpty(): boolean {
    return this.direct.size === 0 && this.groups.size === 0;
  }
}

/** Where one subscription of a client is held. */
interface Placement<S> {
  sub: DistSubscription<S>;
  readonly entry: FilterEntry<S>;
  readonly group: SharedGroup<S> | undefined;
}

function groupKey(kind: 'share' | 'oshare', group: string): string {
  return kind === 'share' ? `s/${group}` : `o/${group}`;
}

/**
 * The subscriptions of one tenant. Not shared between tenants: see `LocalRouter`.
 *
 * @example
 * ```ts
 * const dist = new TenantDist<Session>();
 * dist.subscribe({ subscriber: session, clientId: 'c1', filter: 'a/+', options });
 * for (const d of dist.match('a/b').direct) {
 *   const m = d.clientId === publisherId ? d.localAllowed : d;
 *   if (m) m.subscriber.deliver(msg, Math.min(msg.qos, m.qos) as QoS, m.subscriptionIds);
 * }
 * ```
 */
export class TenantDist<S> {
  private readonly trie = new TopicTrie<FilterEntry<S>>();
  private readonly filters = new Map<string, FilterEntry<S>>();
  private readonly clients = new Map<string, Map<string, Placement<S>>>();
  private subscriptions = 0;
  private groups = 0;
  /** Two-generation cache: hits in `older` are promoted; when `recent` is full it becomes `older`. */
  private recent = new Map<string, MatchSet<S>>();
  private older = new Map<string, MatchSet<S>>();
  private readonly generationSize: number;
  /** Scratch for the uncached path (no user code runs while they are in use). */
  private readonly scratchEntries: FilterEntry<S>[] = [];
  private readonly scratchByClient = new Map<string, DistSubscription<S> | DistSubscription<S>[]>();
  private readonly collect = (entry: FilterEntry<S>): void => {
    this.scratchEntries.push(entry);
  };

  constructor(options: TenantDistOptions = {}) {
    this.generationSize = Math.ceil((options.cacheSize ?? 10_000) / 2);
  }

  /** Number of subscriptions, shared ones included. */
  get subscriptionCount(): number {
    return this.subscriptions;
  }

  /** Number of shared groups (distinct share kind, group, topic filter). */
  get sharedGroupCount(): number {
    return this.groups;
  }

  /** Number of clients holding at least one subscription. */
  get clientCount(): number {
    return this.clients.size;
  }

  /** Number of distinct topic filters (without share prefixes). */
  get filterCount(): number {
    return this.filters.size;
  }

  /** Number of topics whose match sets are cached. */
  get cachedTopicCount(): number {
    return this.recent.size + this.older.size;
  }

  /** True when there are no subscriptions. */
  get isEmpty(): boolean {
    return this.subscriptions === 0;
  }

  /** Members of one shared group; `topicFilter` without the share prefix. */
  groupMemberCount(group: string, topicFilter: string, shareKind: 'share' | 'oshare' = 'share'): number {
    return this.filters.get(topicFilter)?.groups.get(groupKey(shareKind, group))?.size ?? 0;
  }

  /** The subscriptions of one client, in no particular order. */
  subscriptionsOf(clientId: string): DistSubscription<S>[] {
    const placed = this.clients.get(clientId);
    if (placed === undefined) return [];
    return Array.from(placed.values(), (p) => p.sub);
  }

  /**
   * Adds a subscription, or replaces the one with the same client id and filter as sent
   * [MQTT-3.8.4-3] (a replaced shared member keeps its place in the group). The caller validates the
   * filter first (`checkSubscription`); here malformed share syntax or a misplaced wildcard is refused.
   */
  subscribe(sub: DistSubscription<S>, limits?: SubscribeLimits): SubscribeResult {
    const parsed = parseSubscription(sub.filter);
    if (parsed.shareKind === 'malformed' || !validateTopicFilter(parsed.topicFilter, PROTOCOL_TOPIC_LIMITS).ok) return INVALID_FILTER;
    const topicFilter = parsed.topicFilter;
    let placed = this.clients.get(sub.clientId);
    const existing = placed?.get(sub.filter);
    if (existing !== undefined) {
      existing.sub = sub;
      if (existing.group !== undefined) existing.group.put(sub);
      else {
        existing.entry.direct.set(sub.clientId, sub);
        this.invalidate(topicFilter);
      }
      return REPLACED;
    }
    let entry = this.filters.get(topicFilter);
    let group: SharedGroup<S> | undefined;
    if (parsed.shareKind !== 'none') {
      const key = groupKey(parsed.shareKind, parsed.group);
      group = entry?.groups.get(key);
      if (limits !== undefined && (group?.size ?? 0) >= limits.maxGroupMembers) return GROUP_FULL;
      entry ??= this.addEntry(topicFilter);
      if (group === undefined) {
        group = new SharedGroup<S>(parsed.shareKind, parsed.group, topicFilter);
        entry.groups.set(key, group);
        this.groups++;
        this.invalidate(topicFilter);
      }
      group.put(sub);
    } else {
      entry ??= this.addEntry(topicFilter);
      entry.direct.set(sub.clientId, sub);
      this.invalidate(topicFilter);
    }
    if (placed === undefined) {
      placed = new Map();
      this.clients.set(sub.clientId, placed);
    }
    placed.set(sub.filter, { sub, entry, group });
    this.subscriptions++;
    return ADDED;
  }

  private addEntry(topicFilter: string): FilterEntry<S> {
    const entry = new FilterEntry<S>(topicFilter);
    this.filters.set(topicFilter, entry);
    this.trie.add(topicFilter, entry);
    return entry;
  }

  /** Removes the subscription with this client id and filter as sent; false when there was none. */
  unsubscribe(clientId: string, filter: string): boolean {
    const placed = this.clients.get(clientId);
    const placement = placed?.get(filter);
    if (placement === undefined) return false;
    placed!.delete(filter);
    if (placed!.size === 0) this.clients.delete(clientId);
    this.drop(clientId, placement);
    return true;
  }

  /** Removes every subscription of a client (session end); returns how many there were. */
  unsubscribeAll(clientId: string): number {
    const placed = this.clients.get(clientId);
    if (placed === undefined) return 0;
    this.clients.delete(clientId);
    for (const placement of placed.values()) this.drop(clientId, placement);
    return placed.size;
  }

  private drop(clientId: string, placement: Placement<S>): void {
    const { entry, group } = placement;
    this.subscriptions--;
    if (group !== undefined) {
      group.remove(clientId);
      if (group.size === 0) {
        entry.groups.delete(groupKey(group.shareKind, group.group));
        this.groups--;
        this.invalidate(entry.topicFilter);
      }
    } else {
      entry.direct.delete(clientId);
      this.invalidate(entry.topicFilter);
    }
    if (entry.isEmpty()) {
      this.filters.delete(entry.topicFilter);
      this.trie.remove(entry.topicFilter, entry);
    }
  }

  /**
   * Points every subscription of a client at a new subscriber handle (e.g. a persistent session
   * resumed on a new connection when the handle is per connection). Returns how many were updated.
   */
  rebind(clientId: string, subscriber: S): number {
    const placed = this.clients.get(clientId);
    if (placed === undefined) return 0;
    for (const placement of placed.values()) {
      const sub: DistSubscription<S> = { ...placement.sub, subscriber };
      placement.sub = sub;
      if (placement.group !== undefined) placement.group.put(sub);
      else {
        placement.entry.direct.set(clientId, sub);
        this.invalidate(placement.entry.topicFilter);
      }
    }
    return placed.size;
  }

  /**
   * Who receives a message published on `topic` (a valid topic name). Cached per topic: a repeated
   * call returns the same frozen object without allocating, until a subscription that can match
   * the topic changes.
   */
  match(topic: string): MatchSet<S> {
    if (this.subscriptions === 0) return EMPTY_MATCH;
    let set = this.recent.get(topic);
    if (set !== undefined) return set;
    set = this.older.get(topic);
    if (set !== undefined) {
      this.remember(topic, set);
      return set;
    }
    set = this.compute(topic);
    this.remember(topic, set);
    return set;
  }

  private remember(topic: string, set: MatchSet<S>): void {
    if (this.generationSize === 0) return;
    if (this.recent.size >= this.generationSize) {
      this.older = this.recent;
      this.recent = new Map();
    }
    this.recent.set(topic, set);
  }

  /** Forgets cached topics a change to `topicFilter` can affect. */
  private invalidate(topicFilter: string): void {
    if (this.recent.size === 0 && this.older.size === 0) return;
    if (!hasWildcard(topicFilter)) {
      this.recent.delete(topicFilter);
      this.older.delete(topicFilter);
    } else if (this.recent.size + this.older.size <= PRECISE_INVALIDATION_MAX) {
      for (const topic of this.recent.keys()) if (topicMatchesFilter(topic, topicFilter)) this.recent.delete(topic);
      for (const topic of this.older.keys()) if (topicMatchesFilter(topic, topicFilter)) this.older.delete(topic);
    } else {
      this.recent = new Map();
      this.older = new Map();
    }
  }

  private compute(topic: string): MatchSet<S> {
    const entries = this.scratchEntries;
    this.trie.match(topic, this.collect);
    if (entries.length === 0) return EMPTY_MATCH;
    const direct: DirectMatch<S>[] = [];
    const groups: SharedGroupMatch<S>[] = [];
    try {
      if (entries.length === 1) {
        // One filter: every client appears once.
        const entry = entries[0]!;
        for (const sub of entry.direct.values()) direct.push(single(sub));
        for (const group of entry.groups.values()) groups.push(group);
      } else {
        const byClient = this.scratchByClient;
        for (const entry of entries) {
          for (const sub of entry.direct.values()) {
            const seen = byClient.get(sub.clientId);
            if (seen === undefined) byClient.set(sub.clientId, sub);
            else if (Array.isArray(seen)) seen.push(sub);
            else byClient.set(sub.clientId, [seen, sub]);
          }
          for (const group of entry.groups.values()) groups.push(group);
        }
        for (const subs of byClient.values()) direct.push(Array.isArray(subs) ? aggregate(subs) : single(subs));
        byClient.clear();
      }
    } finally {
      entries.length = 0;
    }
    return Object.freeze({ direct: Object.freeze(direct), groups: Object.freeze(groups) });
  }
}
