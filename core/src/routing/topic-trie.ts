/**
 * A trie over topic levels mapping topic filters to values, matched against topic names.
 * `+` and `#` levels live in dedicated fields, not in the child map, so matching a level costs one
 * map lookup plus two field reads.
 */

const SLASH = '/';
const DOLLAR = 0x24;

class TrieNode<V> {
  /** Literal child levels; the empty string is a real level. Created on first use. */
  children: Map<string, TrieNode<V>> | undefined = undefined;
  /** The `+` child. */
  plus: TrieNode<V> | undefined = undefined;
  /** Values of filters ending at this node. */
  values: V[] | undefined = undefined;
  /** Values of filters ending in `/#` below this node (or `#` itself, at the root). */
  hashValues: V[] | undefined = undefined;

  isEmpty(): boolean {
    return this.children === undefined && this.plus === undefined && this.values === undefined && this.hashValues === undefined;
  }
}

/** Removes one occurrence of `value`; returns the array, or undefined once it is empty. */
function removeValue<V>(values: V[], value: V): V[] | undefined | false {
  const i = values.indexOf(value);
  if (i === -1) return false;
  const last = values.length - 1;
  if (i !== last) values[i] = values[last]!;
  values.pop();
  return values.length === 0 ? undefined : values;
}

/**
 * Topic filters to values. A filter may hold several values and the same value may be added under
 * several filters; adding the same (filter, value) twice stores it twice. Filters must be valid
 * (see `validateTopicFilter`); `add` throws on a misplaced `#`. Nodes left empty by `remove` are
 * freed, so subscribe/unsubscribe churn does not grow memory.
 *
 * Matching: `+` matches exactly one level, `#` zero or more trailing levels (so `a/#` matches `a`),
 * empty levels are levels (`a//b`, `/a`), and a topic starting with `$` is not matched by a
 * first-level `+` or `#` [MQTT-4.7.2-1].
 *
 * @example
 * ```ts
 * const trie = new TopicTrie<string>();
 * trie.add('sensors/+/temp', 'alice');
 * trie.match('sensors/k1/temp', (who) => console.log(who)); // alice
 * ```
 */
export class TopicTrie<V> {
  private readonly root = new TrieNode<V>();
  private count = 0;
  private nodes = 1;
  /** Reusable traversal stack (nodes and level indexes); a nested match allocates its own. */
  private readonly stackNodes: TrieNode<V>[] = [];
  private readonly stackLevels: number[] = [];
  private matching = false;

  /** Number of (filter, value) entries held. */
  get size(): number {
    return this.count;
  }

  /** Number of trie nodes, the root included (1 when empty). For tests and memory metrics. */
  get nodeCount(): number {
    return this.nodes;
  }

  /** Adds `value` under `filter`. */
  add(filter: string, value: V): void {
    const levels = filter.split(SLASH);
    const last = levels.length - 1;
    let node = this.root;
    for (let i = 0; i <= last; i++) {
      const level = levels[i]!;
      if (level === '#') {
        if (i !== last) throw new Error(`topic filter ${JSON.stringify(filter)}: '#' must be the last level`);
        (node.hashValues ??= []).push(value);
        this.count++;
        return;
      }
      node = this.child(node, level);
    }
    (node.values ??= []).push(value);
    this.count++;
  }

  private child(node: TrieNode<V>, level: string): TrieNode<V> {
    if (level === '+') {
      if (node.plus === undefined) {
        node.plus = new TrieNode<V>();
        this.nodes++;
      }
      return node.plus;
    }
    const children = (node.children ??= new Map<string, TrieNode<V>>());
    let next = children.get(level);
    if (next === undefined) {
      next = new TrieNode<V>();
      children.set(level, next);
      this.nodes++;
    }
    return next;
  }

  /** Removes one occurrence of `value` under `filter`; false when it was not there. */
  remove(filter: string, value: V): boolean {
    const levels = filter.split(SLASH);
    const last = levels.length - 1;
    const endsInHash = levels[last] === '#';
    const depth = endsInHash ? last : last + 1;
    const path: TrieNode<V>[] = [this.root];
    let node = this.root;
    for (let i = 0; i < depth; i++) {
      const level = levels[i]!;
      const next = level === '+' ? node.plus : node.children?.get(level);
      if (next === undefined) return false;
      node = next;
      path.push(node);
    }
    if (endsInHash) {
      if (node.hashValues === undefined) return false;
      const left = removeValue(node.hashValues, value);
      if (left === false) return false;
      node.hashValues = left;
    } else {
      if (node.values === undefined) return false;
      const left = removeValue(node.values, value);
      if (left === false) return false;
      node.values = left;
    }
    this.count--;
    // Free the nodes this filter alone kept alive, from the deepest up.
    for (let i = depth; i > 0; i--) {
      const child = path[i]!;
      if (!child.isEmpty()) break;
      const parent = path[i - 1]!;
      const level = levels[i - 1]!;
      if (level === '+') parent.plus = undefined;
      else {
        parent.children!.delete(level);
        if (parent.children!.size === 0) parent.children = undefined;
      }
      this.nodes--;
    }
    return true;
  }

  /**
   * Calls `visit` once per (filter, value) entry whose filter matches `topic` (a valid topic name).
   * A value added under two matching filters is visited twice. `visit` must not modify this trie.
   */
  match(topic: string, visit: (value: V) => void): void {
    const levels = topic.split(SLASH);
    const len = levels.length;
    const dollar = topic.charCodeAt(0) === DOLLAR;
    const nested = this.matching;
    const nodes = nested ? [] : this.stackNodes;
    const at = nested ? [] : this.stackLevels;
    this.matching = true;
    try {
      nodes.push(this.root);
      at.push(0);
      while (nodes.length > 0) {
        const node = nodes.pop()!;
        const i = at.pop()!;
        if (i === len) {
          if (node.values !== undefined) visitAll(node.values, visit);
          // `a/#` also matches `a` [MQTT-4.7.1-2].
          if (node.hashValues !== undefined) visitAll(node.hashValues, visit);
          continue;
        }
        // [MQTT-4.7.2-1] a first-level wildcard does not match a `$` topic.
        const wild = i !== 0 || !dollar;
        if (wild && node.hashValues !== undefined) visitAll(node.hashValues, visit);
        if (node.children !== undefined) {
          const next = node.children.get(levels[i]!);
          if (next !== undefined) {
            nodes.push(next);
            at.push(i + 1);
          }
        }
        if (wild && node.plus !== undefined) {
          nodes.push(node.plus);
          at.push(i + 1);
        }
      }
    } finally {
      if (!nested) {
        this.matching = false;
        nodes.length = 0;
        at.length = 0;
      }
    }
  }
}

function visitAll<V>(values: readonly V[], visit: (value: V) => void): void {
  for (let k = 0; k < values.length; k++) visit(values[k]!);
}
