import type { QoS, SubscriptionOptions } from '@bifro/spi';

import { topicMatchesFilter } from '../../src/routing/topic';
import { TenantDist, type DirectMatch, type DistSubscription, type MatchSet } from '../../src/routing/tenant-dist';

interface Session {
  readonly id: string;
}

const sessions = new Map<string, Session>();
function session(id: string): Session {
  let s = sessions.get(id);
  if (s === undefined) {
    s = { id };
    sessions.set(id, s);
  }
  return s;
}

function sub(clientId: string, filter: string, options: Partial<SubscriptionOptions> = {}): DistSubscription<Session> {
  return {
    subscriber: session(clientId),
    clientId,
    filter,
    options: { qos: 0, noLocal: false, retainAsPublished: false, retainHandling: 0, ...options },
  };
}

function directIds(set: MatchSet<Session>): string[] {
  return set.direct.map((d) => d.clientId).sort();
}

function directOf(set: MatchSet<Session>, clientId: string): DirectMatch<Session> {
  const d = set.direct.find((m) => m.clientId === clientId);
  if (d === undefined) throw new Error(`${clientId} not matched`);
  return d;
}

describe('TenantDist subscribe and match', () => {
  it('matches direct subscribers, one entry each', () => {
    const dist = new TenantDist<Session>();
    expect(dist.subscribe(sub('c1', 'a/+'))).toEqual({ replaced: false });
    expect(dist.subscribe(sub('c2', 'a/b'))).toEqual({ replaced: false });
    dist.subscribe(sub('c3', 'x/#'));
    const set = dist.match('a/b');
    expect(directIds(set)).toEqual(['c1', 'c2']);
    expect(set.groups).toEqual([]);
    expect(directOf(set, 'c1').subscriber).toBe(session('c1'));
    expect(dist.subscriptionCount).toBe(3);
    expect(dist.clientCount).toBe(3);
    expect(dist.filterCount).toBe(3);
  });

  it('returns a frozen empty set when nothing matches', () => {
    const dist = new TenantDist<Session>();
    expect(dist.match('a')).toEqual({ direct: [], groups: [] });
    dist.subscribe(sub('c1', 'b'));
    const set = dist.match('a');
    expect(set.direct).toHaveLength(0);
    expect(Object.isFrozen(set)).toBe(true);
  });

  it('aggregates overlapping subscriptions of one client: max QoS, all ids, any RAP [MQTT-3.3.4-2] [MQTT-3.3.4-3]', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+', { qos: 0, subscriptionId: 1 }));
    dist.subscribe(sub('c1', 'a/#', { qos: 2, subscriptionId: 2, retainAsPublished: true }));
    dist.subscribe(sub('c1', 'a/b', { qos: 1, subscriptionId: 3 }));
    dist.subscribe(sub('c1', '+/b', { qos: 1 }));
    dist.subscribe(sub('c1', '#', { qos: 0, subscriptionId: 2 }));
    dist.subscribe(sub('c2', 'a/b', { qos: 1 }));
    const set = dist.match('a/b');
    expect(set.direct).toHaveLength(2);
    const c1 = directOf(set, 'c1');
    expect(c1.qos).toBe(2);
    expect(c1.retainAsPublished).toBe(true);
    expect([...c1.subscriptionIds].sort()).toEqual([1, 2, 3]);
    expect(c1.localAllowed).toBe(c1);
    const c2 = directOf(set, 'c2');
    expect(c2.qos).toBe(1);
    expect(c2.retainAsPublished).toBe(false);
    expect(c2.subscriptionIds).toEqual([]);
  });

  it('only aggregates the subscriptions that match the topic', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+', { qos: 0, subscriptionId: 1 }));
    dist.subscribe(sub('c1', 'a/c', { qos: 2, subscriptionId: 2, retainAsPublished: true }));
    const c1 = directOf(dist.match('a/b'), 'c1');
    expect(c1.qos).toBe(0);
    expect(c1.retainAsPublished).toBe(false);
    expect(c1.subscriptionIds).toEqual([1]);
  });

  it('gives the no-local view for the publisher itself [MQTT-3.8.3-3]', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('only-nl', 'a/b', { noLocal: true, qos: 1 }));
    dist.subscribe(sub('mixed', 'a/+', { noLocal: true, qos: 2, subscriptionId: 7 }));
    dist.subscribe(sub('mixed', 'a/#', { noLocal: false, qos: 1, subscriptionId: 8 }));
    dist.subscribe(sub('plain', 'a/b', { qos: 1 }));
    const set = dist.match('a/b');

    const onlyNl = directOf(set, 'only-nl');
    expect(onlyNl.qos).toBe(1); // others' messages still arrive
    expect(onlyNl.localAllowed).toBeUndefined();

    const mixed = directOf(set, 'mixed');
    expect(mixed.qos).toBe(2);
    expect([...mixed.subscriptionIds].sort()).toEqual([7, 8]);
    const local = mixed.localAllowed!;
    expect(local.qos).toBe(1);
    expect(local.subscriptionIds).toEqual([8]);
    expect(local.localAllowed).toBe(local);

    const plain = directOf(set, 'plain');
    expect(plain.localAllowed).toBe(plain);

    // How the caller uses it: the publisher 'mixed' gets its own message via a/# only.
    const deliveries = set.direct.flatMap((d) => {
      const m = d.clientId === 'mixed' ? d.localAllowed : d;
      return m === undefined ? [] : [[m.clientId, m.qos] as [string, QoS]];
    });
    expect(deliveries.sort()).toEqual([
      ['mixed', 1],
      ['only-nl', 1],
      ['plain', 1],
    ]);
  });

  it('replaces the subscription with the same client id and filter [MQTT-3.8.4-3]', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+', { qos: 0, subscriptionId: 1 }));
    expect(dist.match('a/b').direct[0]!.qos).toBe(0);
    expect(dist.subscribe(sub('c1', 'a/+', { qos: 2, subscriptionId: 5 }))).toEqual({ replaced: true });
    expect(dist.subscriptionCount).toBe(1);
    const d = directOf(dist.match('a/b'), 'c1');
    expect(d.qos).toBe(2);
    expect(d.subscriptionIds).toEqual([5]);
    expect(dist.subscriptionsOf('c1').map((s) => s.options.qos)).toEqual([2]);
  });

  it('refuses malformed share syntax and misplaced wildcards', () => {
    const dist = new TenantDist<Session>();
    expect(dist.subscribe(sub('c1', '$share//a'))).toEqual({ rejected: 'invalid-filter' });
    expect(dist.subscribe(sub('c1', '$share/g'))).toEqual({ rejected: 'invalid-filter' });
    expect(dist.subscribe(sub('c1', 'a/#/b'))).toEqual({ rejected: 'invalid-filter' });
    expect(dist.subscribe(sub('c1', ''))).toEqual({ rejected: 'invalid-filter' });
    expect(dist.subscriptionCount).toBe(0);
    expect(dist.isEmpty).toBe(true);
  });

  it('keeps $ topics away from first-level wildcards [MQTT-4.7.2-1]', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('all', '#'));
    dist.subscribe(sub('sys', '$SYS/#'));
    dist.subscribe(sub('shared', '$share/g/#'));
    expect(directIds(dist.match('$SYS/uptime'))).toEqual(['sys']);
    expect(dist.match('$SYS/uptime').groups).toHaveLength(0);
    expect(directIds(dist.match('a'))).toEqual(['all']);
    expect(dist.match('a').groups).toHaveLength(1);
  });
});

describe('TenantDist unsubscribe', () => {
  it('removes one subscription by client id and filter as sent', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+'));
    dist.subscribe(sub('c1', 'a/#'));
    dist.subscribe(sub('c2', 'a/+'));
    expect(dist.unsubscribe('c1', 'a/+')).toBe(true);
    expect(dist.unsubscribe('c1', 'a/+')).toBe(false);
    expect(dist.unsubscribe('c3', 'a/+')).toBe(false);
    expect(directIds(dist.match('a/b'))).toEqual(['c1', 'c2']);
    expect(dist.unsubscribe('c1', 'a/#')).toBe(true);
    expect(directIds(dist.match('a/b'))).toEqual(['c2']);
    expect(dist.subscriptionCount).toBe(1);
    expect(dist.clientCount).toBe(1);
  });

  it('removes every subscription of a client', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+'));
    dist.subscribe(sub('c1', 'b'));
    dist.subscribe(sub('c1', '$share/g/a/+'));
    dist.subscribe(sub('c2', 'a/+'));
    expect(dist.unsubscribeAll('c1')).toBe(3);
    expect(dist.unsubscribeAll('c1')).toBe(0);
    expect(directIds(dist.match('a/b'))).toEqual(['c2']);
    expect(dist.match('a/b').groups).toHaveLength(0);
    expect(dist.match('b').direct).toHaveLength(0);
    expect(dist.subscriptionCount).toBe(1);
    expect(dist.sharedGroupCount).toBe(0);
    expect(dist.filterCount).toBe(1);
  });

  it('frees everything after churn', () => {
    const dist = new TenantDist<Session>();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 500; i++) {
        dist.subscribe(sub(`c${i}`, `t/${i % 17}/+`));
        dist.subscribe(sub(`c${i}`, `$share/g${i % 5}/t/#`));
        dist.subscribe(sub(`c${i}`, `u/${i}`));
        dist.match(`t/${i % 17}/x`);
      }
      for (let i = 0; i < 500; i++) dist.unsubscribeAll(`c${i}`);
      expect(dist.isEmpty).toBe(true);
      expect(dist.filterCount).toBe(0);
      expect(dist.sharedGroupCount).toBe(0);
      expect(dist.clientCount).toBe(0);
      expect(dist.match('t/1/x')).toEqual({ direct: [], groups: [] });
    }
  });

  it('rebinds a client to a new subscriber handle', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a'));
    dist.subscribe(sub('c1', '$share/g/a'));
    dist.match('a');
    const next: Session = { id: 'c1-again' };
    expect(dist.rebind('c1', next)).toBe(2);
    expect(dist.rebind('nobody', next)).toBe(0);
    const set = dist.match('a');
    expect(set.direct[0]!.subscriber).toBe(next);
    expect(set.groups[0]!.members[0]!.subscriber).toBe(next);
  });
});

describe('TenantDist match cache', () => {
  it('returns the same frozen object for a cached topic', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+'));
    const first = dist.match('a/b');
    expect(dist.match('a/b')).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first.direct)).toBe(true);
    expect(Object.isFrozen(first.direct[0])).toBe(true);
    expect(dist.cachedTopicCount).toBe(1);
  });

  it('sees a new subscription at once, literal or wildcard', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/b'));
    dist.match('a/b');
    dist.match('x/y');
    dist.subscribe(sub('c2', 'a/b'));
    expect(directIds(dist.match('a/b'))).toEqual(['c1', 'c2']);
    dist.subscribe(sub('c3', '+/y'));
    expect(directIds(dist.match('x/y'))).toEqual(['c3']);
    dist.subscribe(sub('c4', '#'));
    expect(directIds(dist.match('a/b'))).toEqual(['c1', 'c2', 'c4']);
    expect(directIds(dist.match('x/y'))).toEqual(['c3', 'c4']);
    dist.subscribe(sub('c5', '$share/g/x/+'));
    expect(dist.match('x/y').groups.map((g) => g.group)).toEqual(['g']);
  });

  it('forgets a removed subscription at once', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/b'));
    dist.subscribe(sub('c2', 'a/#'));
    dist.subscribe(sub('c3', '$share/g/a/b'));
    expect(directIds(dist.match('a/b'))).toEqual(['c1', 'c2']);
    dist.unsubscribe('c2', 'a/#');
    expect(directIds(dist.match('a/b'))).toEqual(['c1']);
    dist.unsubscribe('c1', 'a/b');
    expect(directIds(dist.match('a/b'))).toEqual([]);
    expect(dist.match('a/b').groups).toHaveLength(1);
    dist.unsubscribe('c3', '$share/g/a/b');
    expect(dist.match('a/b')).toEqual({ direct: [], groups: [] });
  });

  it('sees changed options after a resubscribe', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/#', { qos: 0 }));
    expect(dist.match('a/b').direct[0]!.qos).toBe(0);
    dist.subscribe(sub('c1', 'a/#', { qos: 1 }));
    expect(dist.match('a/b').direct[0]!.qos).toBe(1);
  });

  it('keeps unrelated cached topics on a precise invalidation', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('c1', 'a/+'));
    const ab = dist.match('a/b');
    const other = dist.match('z/z');
    dist.subscribe(sub('c2', 'z/+'));
    expect(dist.match('a/b')).toBe(ab);
    expect(dist.match('z/z')).not.toBe(other);
    dist.subscribe(sub('c3', 'q'));
    expect(dist.match('a/b')).toBe(ab);
  });

  it('clears wholesale when a wildcard change meets a large cache, and stays correct', () => {
    const dist = new TenantDist<Session>({ cacheSize: 10_000 });
    dist.subscribe(sub('c1', 't/#'));
    for (let i = 0; i < 3000; i++) dist.match(`t/${i}`);
    expect(dist.cachedTopicCount).toBe(3000);
    dist.subscribe(sub('c2', 't/+'));
    expect(dist.cachedTopicCount).toBe(0);
    expect(directIds(dist.match('t/5'))).toEqual(['c1', 'c2']);
  });

  it('stays bounded and keeps hot topics', () => {
    const dist = new TenantDist<Session>({ cacheSize: 100 });
    dist.subscribe(sub('c1', '#'));
    const hot = dist.match('hot');
    for (let i = 0; i < 1000; i++) {
      dist.match(`cold/${i}`);
      expect(dist.match('hot')).toBe(hot);
      expect(dist.cachedTopicCount).toBeLessThanOrEqual(100);
    }
  });

  it('works with the cache disabled', () => {
    const dist = new TenantDist<Session>({ cacheSize: 0 });
    dist.subscribe(sub('c1', 'a'));
    expect(directIds(dist.match('a'))).toEqual(['c1']);
    expect(dist.cachedTopicCount).toBe(0);
  });

  it('agrees with a brute-force matcher under random churn', () => {
    const dist = new TenantDist<Session>({ cacheSize: 64 });
    const filters = [
      '#',
      '+',
      'a',
      'a/#',
      'a/+',
      'a/b',
      '+/b',
      '+/+',
      'a/+/c',
      '$SYS/#',
      '/+',
      '+/',
      'a//b',
      '$share/g/a/#',
      '$oshare/h/+/b',
    ];
    const topics = ['a', 'a/b', 'x/b', 'a/b/c', '$SYS/x', '/a', 'a/', 'a//b', 'b'];
    const live = new Map<string, number>();
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const reference = new TenantDist<Session>({ cacheSize: 0 });
    for (let step = 0; step < 3000; step++) {
      const clientId = `c${rand(6)}`;
      const filter = filters[rand(filters.length)]!;
      const key = `${clientId} ${filter}`;
      if (rand(3) === 0) {
        const had = live.has(key);
        expect(dist.unsubscribe(clientId, filter)).toBe(had);
        reference.unsubscribe(clientId, filter);
        live.delete(key);
      } else {
        const qos = rand(3) as QoS;
        dist.subscribe(sub(clientId, filter, { qos }));
        reference.subscribe(sub(clientId, filter, { qos }));
        live.set(key, qos);
      }
      const topic = topics[rand(topics.length)]!;
      const got = dist.match(topic);
      const want = reference.match(topic);
      const brute = new Map<string, number>();
      for (const [k, qos] of live) {
        const [c, f] = k.split(' ') as [string, string];
        if (!f.startsWith('$share/') && !f.startsWith('$oshare/') && topicMatchesFilter(topic, f))
          brute.set(c, Math.max(qos, brute.get(c) ?? 0));
      }
      const direct = got.direct.map((d) => `${d.clientId}:${d.qos}`).sort();
      expect(direct).toEqual([...brute].map(([c, q]) => `${c}:${q}`).sort());
      expect(direct).toEqual(want.direct.map((d) => `${d.clientId}:${d.qos}`).sort());
      expect(got.groups.map((g) => `${g.shareKind}/${g.group}/${g.topicFilter}:${g.members.length}`).sort()).toEqual(
        want.groups.map((g) => `${g.shareKind}/${g.group}/${g.topicFilter}:${g.members.length}`).sort(),
      );
    }
    expect(dist.subscriptionCount).toBe(live.size);
  });
});
