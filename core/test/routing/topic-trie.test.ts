import { topicMatchesFilter } from '../../src/routing/topic';
import { TopicTrie } from '../../src/routing/topic-trie';

/** [topic, filter, matches] */
const TABLE: ReadonlyArray<readonly [string, string, boolean]> = [
  ['a', 'a', true],
  ['a', 'b', false],
  ['a/b', 'a/b', true],
  ['a/b', 'a', false],
  ['a', 'a/b', false],
  ['a/b/c', 'a/+/c', true],
  ['a/b/c', 'a/+', false],
  ['a/b', 'a/+', true],
  ['a', 'a/+', false],
  ['a/', 'a/+', true],
  ['a', '+', true],
  ['a/b', '+', false],
  ['a/b', '+/+', true],
  ['a', '+/+', false],
  ['a/b/c', '+/+', false],
  ['/', '+/+', true],
  ['/a', '+/+', true],
  ['/a', '+', false],
  ['/a', '/+', true],
  ['/a', '/a', true],
  ['/a', 'a', false],
  ['a/', 'a', false],
  ['a/', 'a/', true],
  ['a//b', 'a//b', true],
  ['a//b', 'a/+/b', true],
  ['a//b', 'a/b', false],
  ['a//b', 'a/#', true],
  ['a', '#', true],
  ['a/b/c', '#', true],
  ['/', '#', true],
  ['a', 'a/#', true], // `a/#` matches its parent
  ['a/b', 'a/#', true],
  ['a/b/c/d', 'a/#', true],
  ['ab', 'a/#', false],
  ['b/a', 'a/#', false],
  ['a/', 'a/#', true],
  ['a/b/c', 'a/+/#', true],
  ['a/b', 'a/+/#', true],
  ['a', 'a/+/#', false],
  ['a/b/c', '+/b/#', true],
  ['x/b', '+/+/#', true],
  ['$SYS/broker', '#', false], // [MQTT-4.7.2-1]
  ['$SYS/broker', '+/broker', false],
  ['$SYS/broker', '+/#', false],
  ['$SYS/broker', '$SYS/#', true],
  ['$SYS', '$SYS/#', true],
  ['$SYS/broker', '$SYS/+', true],
  ['$SYS/a/b', '$SYS/+', false],
  ['$', '#', false],
  ['$', '+', false],
  ['a/$SYS', 'a/+', true],
  ['a/$SYS', '+/#', true],
  ['$share/g/x', '$share/#', true],
  ['sport/tennis/player1', 'sport/tennis/player1/#', true],
  ['sport/tennis/player1/ranking', 'sport/tennis/player1/#', true],
  ['sport', 'sport/#', true],
  ['sport/tennis', 'sport/+/player1', false],
  ['sport/', 'sport/+', true],
  ['Sport', 'sport', false],
  ['日本/😀', '日本/+', true],
  ['日本/😀', '+/😀', true],
  ['日本/😀', '日/😀', false],
];

function matches(trie: TopicTrie<string>, topic: string): string[] {
  const out: string[] = [];
  trie.match(topic, (v) => out.push(v));
  return out.sort();
}

describe('TopicTrie matching table', () => {
  it('has at least 40 cases', () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(40);
  });

  it.each(TABLE)('topic %j, filter %j → %s (trie)', (topic, filter, expected) => {
    const trie = new TopicTrie<string>();
    trie.add(filter, filter);
    expect(matches(trie, topic)).toEqual(expected ? [filter] : []);
  });

  it.each(TABLE)('topic %j, filter %j → %s (topicMatchesFilter)', (topic, filter, expected) => {
    expect(topicMatchesFilter(topic, filter)).toBe(expected);
  });

  it('matches every table filter at once, each exactly as the table says', () => {
    const trie = new TopicTrie<string>();
    const filters = [...new Set(TABLE.map(([, f]) => f))];
    for (const f of filters) trie.add(f, f);
    for (const topic of new Set(TABLE.map(([t]) => t))) {
      const expected = filters.filter((f) => topicMatchesFilter(topic, f)).sort();
      expect(matches(trie, topic)).toEqual(expected);
    }
  });
});

describe('TopicTrie values', () => {
  it('holds several values per filter and visits a value once per matching filter', () => {
    const trie = new TopicTrie<string>();
    trie.add('a/+', 'x');
    trie.add('a/+', 'y');
    trie.add('a/#', 'x');
    expect(trie.size).toBe(3);
    expect(matches(trie, 'a/b')).toEqual(['x', 'x', 'y']);
  });

  it('throws on a misplaced #', () => {
    const trie = new TopicTrie<string>();
    expect(() => trie.add('a/#/b', 'x')).toThrow(/last level/);
    expect(trie.size).toBe(0);
  });

  it('supports a match started from inside a visit', () => {
    const trie = new TopicTrie<string>();
    trie.add('a/+', 'outer');
    trie.add('b', 'inner');
    const seen: string[] = [];
    trie.match('a/x', (v) => {
      seen.push(v);
      trie.match('b', (w) => seen.push(w));
    });
    trie.match('a/y', (v) => seen.push(v));
    expect(seen).toEqual(['outer', 'inner', 'outer']);
  });

  it('matches topics deeper than the call stack could recurse', () => {
    const trie = new TopicTrie<string>();
    const deep = Array.from({ length: 50_000 }, () => '+').join('/');
    trie.add(deep, 'deep');
    const topic = Array.from({ length: 50_000 }, (_, i) => String(i % 10)).join('/');
    expect(matches(trie, topic)).toEqual(['deep']);
  });
});

describe('TopicTrie remove', () => {
  it('removes one value, leaving the others', () => {
    const trie = new TopicTrie<string>();
    trie.add('a/b', 'x');
    trie.add('a/b', 'y');
    trie.add('a/#', 'x');
    expect(trie.remove('a/b', 'x')).toBe(true);
    expect(matches(trie, 'a/b')).toEqual(['x', 'y']);
    expect(trie.remove('a/#', 'x')).toBe(true);
    expect(matches(trie, 'a/b')).toEqual(['y']);
    expect(trie.size).toBe(1);
  });

  it('returns false for a filter or value not held', () => {
    const trie = new TopicTrie<string>();
    trie.add('a/+/c', 'x');
    expect(trie.remove('a/+/c', 'y')).toBe(false);
    expect(trie.remove('a/b/c', 'x')).toBe(false);
    expect(trie.remove('a/+', 'x')).toBe(false);
    expect(trie.remove('a/+/#', 'x')).toBe(false);
    expect(trie.remove('a/+/c/d', 'x')).toBe(false);
    expect(trie.size).toBe(1);
  });

  it('frees the nodes only the removed filter used', () => {
    const trie = new TopicTrie<string>();
    trie.add('a/b/c', 'keep');
    const base = trie.nodeCount; // root, a, b, c
    expect(base).toBe(4);
    trie.add('a/b/c/d/e', 'x');
    trie.add('a/+/c/#', 'x');
    trie.add('a//x', 'x');
    expect(trie.nodeCount).toBe(base + 2 + 2 + 2);
    trie.remove('a/b/c/d/e', 'x');
    trie.remove('a/+/c/#', 'x');
    trie.remove('a//x', 'x');
    expect(trie.nodeCount).toBe(base);
    expect(matches(trie, 'a/b/c')).toEqual(['keep']);
    trie.remove('a/b/c', 'keep');
    expect(trie.nodeCount).toBe(1);
    expect(trie.size).toBe(0);
  });

  it('keeps a node that still ends another filter or holds #', () => {
    const trie = new TopicTrie<string>();
    trie.add('a', 'parent');
    trie.add('a/#', 'hash');
    trie.add('a/b', 'child');
    trie.remove('a/b', 'child');
    expect(matches(trie, 'a')).toEqual(['hash', 'parent']);
    trie.remove('a', 'parent');
    expect(matches(trie, 'a/z')).toEqual(['hash']);
    trie.remove('a/#', 'hash');
    expect(trie.nodeCount).toBe(1);
  });

  it('returns to one node after heavy subscribe/unsubscribe churn', () => {
    const trie = new TopicTrie<number>();
    const filters: string[] = [];
    for (let i = 0; i < 5000; i++) {
      const f = [`t${i % 37}`, i % 3 === 0 ? '+' : `d${i}`, i % 5 === 0 ? '#' : `m${i % 11}`].join('/');
      filters.push(f);
      trie.add(f, i);
    }
    expect(trie.size).toBe(5000);
    for (let i = 4999; i >= 0; i--) expect(trie.remove(filters[i]!, i)).toBe(true);
    expect(trie.size).toBe(0);
    expect(trie.nodeCount).toBe(1);
  });
});
