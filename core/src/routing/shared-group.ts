/**
 * Shared subscription groups (`$share`, `$oshare`): who is a member, and which member receives one
 * message (round robin, or rendezvous hashing for ordered groups).
 */
import type { SubscriptionOptions } from '@bifro/spi';

/** One subscription as the session holds it. */
export interface DistSubscription<S> {
  /** The lead's subscriber handle (the session). One handle per client id: see `TenantDist.rebind`. */
  readonly subscriber: S;
  readonly clientId: string;
  /** The filter as sent, including any `$share/<group>/` or `$oshare/<group>/` prefix. */
  readonly filter: string;
  readonly options: SubscriptionOptions;
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

/**
 * The key of one message for ordered picks: publisher, a separator no client id contains (U+0000
 * folded in as one FNV round), then topic. The same for the member pick and the node pick.
 */
export function orderedKey(publisherClientId: string, topic: string): number {
  return fnv1a(topic, Math.imul(fnv1a(publisherClientId, FNV_OFFSET), FNV_PRIME));
}

/** The fixed weight of one rendezvous candidate (a member's client id, a node's id), from `seed`. */
export function rendezvousWeight(id: string, seed: number = FNV_OFFSET): number {
  return fmix32(fnv1a(id, seed));
}

/** A candidate's score for one key: the highest score wins (ties: the smallest id). */
export function rendezvousScore(key: number, weight: number): number {
  return fmix32(key ^ weight);
}

/** A shared group by name alone: what a forwarded message says its receiver is to serve (docs/cluster.md § Shared subscriptions). */
export interface SharedGroupRef {
  readonly shareKind: 'share' | 'oshare';
  readonly group: string;
  readonly topicFilter: string;
}

/** Whether two references name the same group (kind, group and topic filter). */
export function sameGroup(a: SharedGroupRef, b: SharedGroupRef): boolean {
  return a.shareKind === b.shareKind && a.group === b.group && a.topicFilter === b.topicFilter;
}

/**
 * Cluster mode: which of a message's local groups this node serves. A message published here: all of
 * them, until the cluster's pick assigns some elsewhere; one another node forwarded: only those it names.
 */
export function servedHere(groups: readonly SharedGroupRef[], named: readonly SharedGroupRef[] | undefined): boolean[] {
  const out = new Array<boolean>(groups.length);
  for (let i = 0; i < groups.length; i++) out[i] = named === undefined || named.some((n) => sameGroup(n, groups[i]!));
  return out;
}

/** One shared group: its members, with their hash weights and the round-robin cursor. */
export class SharedGroup<S> implements SharedGroupMatch<S> {
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
    this.weights.push(rendezvousWeight(sub.clientId));
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
    const key = orderedKey(publisherClientId, topic);
    const members = this.members;
    let best = 0;
    let bestScore = -1;
    for (let i = 0; i < members.length; i++) {
      const score = rendezvousScore(key, this.weights[i]!);
      if (score > bestScore || (score === bestScore && members[i]!.clientId < members[best]!.clientId)) {
        best = i;
        bestScore = score;
      }
    }
    return members[best]!;
  }
}
