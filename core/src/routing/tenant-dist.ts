/**
 * The subscription index of one tenant: who receives a message published on a topic. Non-shared
 * subscriptions are aggregated per subscriber; shared groups (`$share`, `$oshare`) are returned as
 * live groups to pick one member from. Results are cached per topic.
 */
import type { QoS, SubscriptionOptions } from '@bifro/spi';

import { hasWildcard, parseSubscription, topicMatchesFilter, validateTopicFilter, PROTOCOL_TOPIC_LIMITS } from './topic';
import { TopicTrie } from './topic-trie';

/** One subscription as the session holds it. */
export interface DistSubscription<S> {
  /** The lead's subscriber handle (the session). One handle per client id: see {@link TenantDist.rebind}. */
  readonly subscriber: S;
  readonly clientId: string;
  /** The filter as sent, including any `$share/<group>/` or `$oshare/<group>/` prefix. */
  readonly filter: string;
  readonly options: SubscriptionOptions;
}

/**
 * What one non-shared subscriber gets for a topic, aggregated over all its matching subscriptions
 * [MQTT-3.3.4-2].
 */
export interface DirectMatch<S> {
  readonly subscriber: S;
  readonly clientId: string;
  /** Highest granted QoS of the matching subscriptions; deliver with min(message QoS, this). */
  readonly qos: QoS;
  /** True when any matching subscription has Retain As Published. */
  readonly retainAsPublished: boolean;
  /** Distinct Subscription Identifiers of the matching subscriptions [MQTT-3.3.4-3]; empty when none. */
  readonly subscriptionIds: readonly number[];
  /**
   * The same aggregation over only the matching subscriptions without No Local: use it when the
   * publisher is this subscriber, and deliver nothing when it is undefined [MQTT-3.8.3-3]. It is
   * this very object when none of the matching subscriptions has No Local.
   */
  readonly localAllowed: DirectMatch<S> | undefined;
}

/** A member of a shared group: the subscription itself. */
export type SharedMember<S> = DistSubscription<S>;

/**
 * A shared subscription group: one per (share kind, group, topic filter). The object is live:
 * members join and leave without invalidating cached match sets; a removed group has no members.
 */
export interface SharedGroupMatch<S> {
  readonly shareKind: 'share' | 'oshare';
  readonly group: string;
  readonly topicFilter: string;
  /** Current members, in no particular order. */
  readonly members: readonly SharedMember<S>[];
  /** See {@link pickMember}. */
  pick(publisherClientId: string, topic: string, isAvailable: (subscriber: S) => boolean): SharedMember<S> | undefined;
}

/** Who receives a message published on one topic. Frozen, shared between calls: do not keep it past a subscription change if you need a snapshot. */
export interface MatchSet<S> {
  /** Non-shared subscribers, one entry per client id. */
  readonly direct: readonly DirectMatch<S>[];
  /** Shared groups with a matching filter, one per (share kind, group, topic filter). */
  readonly groups: readonly SharedGroupMatch<S>[];
}

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
const NO_IDS: readonly number[] = Object.freeze([]);
const EMPTY_MATCH: MatchSet<never> = Object.freeze({ direct: Object.freeze([]), groups: Object.freeze([]) });

/**
 * Up to this many cached topics, a wildcard subscription change deletes exactly the cached topics
 * it matches (a scan costing about 25 ns per topic); above, the cache is cleared, which is O(1)
 * and keeps subscribe storms cheap. Literal filters always invalidate exactly one topic.
 */
const PRECISE_INVALIDATION_MAX = 128;

/**
 * Picks the member of a shared group that receives one message, or undefined when the group has no members.
 * - `$share`: round robin, skipping members for which `isAvailable` is false (offline, queue full);
 *   when none is available, round robin over all of them.
 * - `$oshare`: ordered. Rendezvous (highest random weight) hashing of (publisher, topic) over the
 *   member client ids: the same publisher and topic always reach the same member while membership is
 *   unchanged, and a member leaving only moves its own keys. `isAvailable` is not consulted, as
 *   skipping a member would reorder its messages; queue to the chosen member (inbox when offline).
 */
export function pickMember<S>(
  group: SharedGroupMatch<S>,
  publisherClientId: string,
  topic: string,
  isAvailable: (subscriber: S) => boolean,
): SharedMember<S> | undefined {
  return group.pick(publisherClientId, topic, isAvailable);
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

function fnv1a(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  return h >>> 0;
}

/** MurmurHash3's finaliser: spreads FNV's weak low bits. */
function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

class SharedGroup<S> implements SharedGroupMatch<S> {
  readonly members: SharedMember<S>[] = [];
  /** fmix32(fnv1a(clientId)) per member, parallel to `members`. */
  private readonly weights: number[] = [];
  private readonly index = new Map<string, number>();
  private cursor = 0;

  constructor(
    readonly shareKind: 'share' | 'oshare',
    readonly group: string,
    readonly topicFilter: string,
  ) {}

  get size(): number {
    return this.members.length;
  }

  /** Adds or replaces (same client id) a member; true when it replaced one. */
  put(sub: SharedMember<S>): boolean {
    const at = this.index.get(sub.clientId);
    if (at !== undefined) {
      this.members[at] = sub;
      return true;
    }
    this.index.set(sub.clientId, this.members.length);
    this.members.push(sub);
    this.weights.push(fmix32(fnv1a(sub.clientId, FNV_OFFSET)));
    return false;
  }

  remove(clientId: string): boolean {
    const at = this.index.get(clientId);
    if (at === undefined) return false;
    this.index.delete(clientId);
    const last = this.members.length - 1;
    if (at !== last) {
      const moved = this.members[last]!;
      this.members[at] = moved;
      this.weights[at] = this.weights[last]!;
      this.index.set(moved.clientId, at);
    }
    this.members.pop();
    this.weights.pop();
    return true;
  }

  pick(publisherClientId: string, topic: string, isAvailable: (subscriber: S) => boolean): SharedMember<S> | undefined {
    const n = this.members.length;
    if (n === 0) return undefined;
    if (n === 1) return this.members[0];
    return this.shareKind === 'oshare' ? this.pickOrdered(publisherClientId, topic) : this.pickRoundRobin(isAvailable);
  }

  private pickRoundRobin(isAvailable: (subscriber: S) => boolean): SharedMember<S> {
    const members = this.members;
    const n = members.length;
    const start = this.cursor % n;
    for (let k = 0; k < n; k++) {
      const i = (start + k) % n;
      const member = members[i]!;
      if (isAvailable(member.subscriber)) {
        this.cursor = i + 1;
        return member;
      }
    }
    this.cursor = start + 1;
    return members[start]!;
  }

  private pickOrdered(publisherClientId: string, topic: string): SharedMember<S> {
    // Key hash over publisher, a separator no client id contains (U+0000), then topic.
    const key = fnv1a(topic, Math.imul(fnv1a(publisherClientId, FNV_OFFSET), FNV_PRIME));
    const members = this.members;
    let best = 0;
    let bestScore = -1;
    for (let i = 0; i < members.length; i++) {
      const score = fmix32(key ^ this.weights[i]!);
      if (score > bestScore || (score === bestScore && members[i]!.clientId < members[best]!.clientId)) {
        best = i;
        bestScore = score;
      }
    }
    return members[best]!;
  }
}

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

interface MutableDirectMatch<S> {
  subscriber: S;
  clientId: string;
  qos: QoS;
  retainAsPublished: boolean;
  subscriptionIds: readonly number[];
  localAllowed: DirectMatch<S> | undefined;
}

function groupKey(kind: 'share' | 'oshare', group: string): string {
  return kind === 'share' ? `s/${group}` : `o/${group}`;
}

/**
 * The subscriptions of one tenant. Not shared between tenants: see `Dist`.
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

function single<S>(sub: DistSubscription<S>): DirectMatch<S> {
  const o = sub.options;
  const m: MutableDirectMatch<S> = {
    subscriber: sub.subscriber,
    clientId: sub.clientId,
    qos: o.qos,
    retainAsPublished: o.retainAsPublished,
    subscriptionIds: o.subscriptionId !== undefined ? Object.freeze([o.subscriptionId]) : NO_IDS,
    localAllowed: undefined,
  };
  if (!o.noLocal) m.localAllowed = m;
  return Object.freeze(m);
}

/** Aggregates several subscriptions of one client [MQTT-3.3.4-2], [MQTT-3.3.4-3]. */
function aggregate<S>(subs: readonly DistSubscription<S>[]): DirectMatch<S> {
  const all = combine(subs, false)!;
  if (subs.some((s) => s.options.noLocal)) {
    (all as MutableDirectMatch<S>).localAllowed = combine(subs, true);
  } else {
    (all as MutableDirectMatch<S>).localAllowed = all;
  }
  return Object.freeze(all);
}

function combine<S>(subs: readonly DistSubscription<S>[], localOnly: boolean): DirectMatch<S> | undefined {
  let m: MutableDirectMatch<S> | undefined;
  let ids: number[] | undefined;
  for (const sub of subs) {
    const o = sub.options;
    if (localOnly && o.noLocal) continue;
    if (m === undefined) {
      m = {
        subscriber: sub.subscriber,
        clientId: sub.clientId,
        qos: o.qos,
        retainAsPublished: o.retainAsPublished,
        subscriptionIds: NO_IDS,
        localAllowed: undefined,
      };
    } else {
      if (o.qos > m.qos) m.qos = o.qos;
      if (o.retainAsPublished) m.retainAsPublished = true;
    }
    if (o.subscriptionId !== undefined) {
      ids ??= [];
      if (!ids.includes(o.subscriptionId)) ids.push(o.subscriptionId);
    }
  }
  if (m === undefined) return undefined;
  if (ids !== undefined) m.subscriptionIds = Object.freeze(ids);
  if (localOnly) {
    m.localAllowed = m;
    return Object.freeze(m);
  }
  return m;
}

/** A match set with nothing in it. */
export function emptyMatchSet<S>(): MatchSet<S> {
  return EMPTY_MATCH;
}
