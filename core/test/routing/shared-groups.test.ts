import type { SubscriptionOptions } from '@bifro/spi';

import { pickMember, TenantDist, type DistSubscription, type SharedGroupMatch } from '../../src/routing/tenant-dist';

interface Session {
  readonly id: string;
  online: boolean;
}

function sub(clientId: string, filter: string, options: Partial<SubscriptionOptions> = {}): DistSubscription<Session> {
  return {
    subscriber: { id: clientId, online: true },
    clientId,
    filter,
    options: { qos: 1, noLocal: false, retainAsPublished: false, retainHandling: 0, ...options },
  };
}

const online = (s: Session): boolean => s.online;

function onlyGroup(dist: TenantDist<Session>, topic: string): SharedGroupMatch<Session> {
  const { groups } = dist.match(topic);
  expect(groups).toHaveLength(1);
  return groups[0]!;
}

function tally(picks: readonly (string | undefined)[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of picks) out[p ?? 'none'] = (out[p ?? 'none'] ?? 0) + 1;
  return out;
}

describe('shared groups', () => {
  it('returns one group per (kind, group, topic filter), not per member', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('m1', '$share/g/a/+'));
    dist.subscribe(sub('m2', '$share/g/a/+'));
    dist.subscribe(sub('m3', '$share/h/a/+'));
    dist.subscribe(sub('m4', '$share/g/a/#'));
    dist.subscribe(sub('m5', '$oshare/g/a/+'));
    dist.subscribe(sub('d1', 'a/+'));
    const set = dist.match('a/b');
    expect(set.direct.map((d) => d.clientId)).toEqual(['d1']);
    expect(set.groups.map((g) => `${g.shareKind} ${g.group} ${g.topicFilter} ${g.members.length}`).sort()).toEqual([
      'oshare g a/+ 1',
      'share g a/# 1',
      'share g a/+ 2',
      'share h a/+ 1',
    ]);
    expect(dist.sharedGroupCount).toBe(4);
    expect(dist.groupMemberCount('g', 'a/+')).toBe(2);
    expect(dist.groupMemberCount('g', 'a/+', 'oshare')).toBe(1);
    expect(dist.groupMemberCount('nope', 'a/+')).toBe(0);
  });

  it('lets members join and leave without a new match set (the group is live)', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('m1', '$share/g/a'));
    const set = dist.match('a');
    dist.subscribe(sub('m2', '$share/g/a'));
    expect(dist.match('a')).toBe(set);
    expect(set.groups[0]!.members.map((m) => m.clientId).sort()).toEqual(['m1', 'm2']);
    dist.unsubscribe('m1', '$share/g/a');
    expect(set.groups[0]!.members.map((m) => m.clientId)).toEqual(['m2']);
    dist.unsubscribe('m2', '$share/g/a');
    expect(dist.match('a').groups).toHaveLength(0);
    expect(pickMember(set.groups[0]!, 'p', 'a', online)).toBeUndefined();
  });

  it('replaces a member in place on resubscribe', () => {
    const dist = new TenantDist<Session>();
    dist.subscribe(sub('m1', '$share/g/a', { qos: 0 }));
    dist.subscribe(sub('m2', '$share/g/a'));
    expect(dist.subscribe(sub('m1', '$share/g/a', { qos: 2 }))).toEqual({ replaced: true });
    const group = onlyGroup(dist, 'a');
    expect(group.members.map((m) => `${m.clientId}:${m.options.qos}`)).toEqual(['m1:2', 'm2:1']);
    expect(dist.subscriptionCount).toBe(2);
  });

  describe('$share round robin', () => {
    it('spreads messages evenly over the members', () => {
      const dist = new TenantDist<Session>();
      for (const m of ['m1', 'm2', 'm3']) dist.subscribe(sub(m, '$share/g/jobs/+'));
      const group = onlyGroup(dist, 'jobs/x');
      const picks = Array.from({ length: 300 }, (_, i) => pickMember(group, 'pub', `jobs/${i}`, online)?.clientId);
      expect(tally(picks)).toEqual({ m1: 100, m2: 100, m3: 100 });
      // Strict rotation, not just even totals.
      for (let i = 3; i < 300; i++) expect(picks[i]).toBe(picks[i - 3]);
    });

    it('skips unavailable members and falls back to any member when none is available', () => {
      const dist = new TenantDist<Session>();
      for (const m of ['m1', 'm2', 'm3']) dist.subscribe(sub(m, '$share/g/a'));
      const group = onlyGroup(dist, 'a');
      const m2 = group.members.find((m) => m.clientId === 'm2')!;
      m2.subscriber.online = false;
      const picks = Array.from({ length: 200 }, () => group.pick('pub', 'a', online)?.clientId);
      expect(tally(picks)).toEqual({ m1: 100, m3: 100 });
      for (const m of group.members) m.subscriber.online = false;
      const fallback = Array.from({ length: 30 }, () => group.pick('pub', 'a', online)?.clientId);
      expect(tally(fallback)).toEqual({ m1: 10, m2: 10, m3: 10 });
    });

    it('keeps rotating fairly as members join and leave', () => {
      const dist = new TenantDist<Session>();
      for (const m of ['m1', 'm2']) dist.subscribe(sub(m, '$share/g/a'));
      const group = onlyGroup(dist, 'a');
      group.pick('p', 'a', online);
      dist.subscribe(sub('m3', '$share/g/a'));
      dist.unsubscribe('m1', '$share/g/a');
      dist.subscribe(sub('m4', '$share/g/a'));
      const picks = Array.from({ length: 90 }, () => group.pick('p', 'a', online)?.clientId);
      expect(tally(picks)).toEqual({ m2: 30, m3: 30, m4: 30 });
    });

    it('always picks the only member', () => {
      const dist = new TenantDist<Session>();
      dist.subscribe(sub('m1', '$share/g/a'));
      const group = onlyGroup(dist, 'a');
      group.members[0]!.subscriber.online = false;
      expect(group.pick('p', 'a', online)?.clientId).toBe('m1');
    });
  });

  describe('$oshare ordered', () => {
    const members = ['m1', 'm2', 'm3', 'm4', 'm5'];
    function ordered(): { dist: TenantDist<Session>; group: SharedGroupMatch<Session> } {
      const dist = new TenantDist<Session>();
      for (const m of members) dist.subscribe(sub(m, '$oshare/g/t/#'));
      return { dist, group: onlyGroup(dist, 't/x') };
    }
    const keys = Array.from({ length: 2000 }, (_, i) => [`pub${i % 50}`, `t/${i % 40}`] as const);

    it('sends the same publisher and topic to the same member across 1000 messages', () => {
      const { group } = ordered();
      const first = group.pick('pub-7', 't/a/b', online)!.clientId;
      for (let i = 0; i < 1000; i++) expect(group.pick('pub-7', 't/a/b', online)!.clientId).toBe(first);
    });

    it('does not consult availability, to keep order', () => {
      const { group } = ordered();
      const chosen = group.pick('p', 't/1', online)!;
      chosen.subscriber.online = false;
      expect(group.pick('p', 't/1', online)).toBe(chosen);
    });

    it('spreads keys over all members', () => {
      const { group } = ordered();
      const counts = tally(keys.map(([p, t]) => group.pick(p, t, online)!.clientId));
      expect(Object.keys(counts).sort()).toEqual(members);
      for (const m of members) {
        expect(counts[m]).toBeGreaterThan(2000 / members.length / 2);
        expect(counts[m]).toBeLessThan((2000 / members.length) * 2);
      }
    });

    it('moves only the keys of a member that leaves, and the same keys back when it returns', () => {
      const { dist, group } = ordered();
      const before = keys.map(([p, t]) => group.pick(p, t, online)!.clientId);
      dist.unsubscribe('m3', '$oshare/g/t/#');
      const after = keys.map(([p, t]) => group.pick(p, t, online)!.clientId);
      let moved = 0;
      keys.forEach((_, i) => {
        if (before[i] === 'm3') {
          expect(after[i]).not.toBe('m3');
          moved++;
        } else expect(after[i]).toBe(before[i]);
      });
      expect(moved).toBeGreaterThan(0);
      dist.subscribe(sub('m3', '$oshare/g/t/#'));
      expect(keys.map(([p, t]) => group.pick(p, t, online)!.clientId)).toEqual(before);
    });

    it('does not depend on the order members joined', () => {
      const { group } = ordered();
      const dist2 = new TenantDist<Session>();
      for (const m of [...members].reverse()) dist2.subscribe(sub(m, '$oshare/g/t/#'));
      const group2 = onlyGroup(dist2, 't/x');
      for (const [p, t] of keys) expect(group2.pick(p, t, online)!.clientId).toBe(group.pick(p, t, online)!.clientId);
    });
  });

  describe('MaxSharedGroupMembers', () => {
    it('refuses a new member beyond the limit, but not a resubscribe or another group', () => {
      const dist = new TenantDist<Session>();
      const limits = { maxGroupMembers: 2 };
      expect(dist.subscribe(sub('m1', '$share/g/a'), limits)).toEqual({ replaced: false });
      expect(dist.subscribe(sub('m2', '$share/g/a'), limits)).toEqual({ replaced: false });
      expect(dist.subscribe(sub('m3', '$share/g/a'), limits)).toEqual({ rejected: 'group-full' });
      expect(dist.subscribe(sub('m1', '$share/g/a', { qos: 2 }), limits)).toEqual({ replaced: true });
      expect(dist.subscribe(sub('m3', '$share/h/a'), limits)).toEqual({ replaced: false });
      expect(dist.subscribe(sub('m3', '$oshare/g/a'), limits)).toEqual({ replaced: false });
      expect(dist.subscribe(sub('m3', '$share/g/b'), limits)).toEqual({ replaced: false });
      expect(dist.subscribe(sub('m3', 'a'), limits)).toEqual({ replaced: false });
      expect(dist.groupMemberCount('g', 'a')).toBe(2);
      expect(
        dist
          .subscriptionsOf('m3')
          .map((s) => s.filter)
          .sort(),
      ).toEqual(['$oshare/g/a', '$share/g/b', '$share/h/a', 'a']);
      dist.unsubscribe('m2', '$share/g/a');
      expect(dist.subscribe(sub('m3', '$share/g/a'), limits)).toEqual({ replaced: false });
    });

    it('refuses even the first member when the limit is 0 and leaves nothing behind', () => {
      const dist = new TenantDist<Session>();
      expect(dist.subscribe(sub('m1', '$share/g/a'), { maxGroupMembers: 0 })).toEqual({ rejected: 'group-full' });
      expect(dist.isEmpty).toBe(true);
      expect(dist.filterCount).toBe(0);
    });
  });
});
