import type { StoredMessage } from '@bifro/spi';

/** One topic level of the index. */
class LevelNode {
  readonly children = new Map<string, LevelNode>();
  message: StoredMessage | undefined = undefined;
}

/** A step of the match walk: a node, the filter level to match below it, or `all` to take its whole subtree. */
interface Step {
  readonly node: LevelNode;
  readonly depth: number;
  readonly all: boolean;
}

/**
 * The retained messages of one tenant in a trie of topic levels (`a/b/c` → a → b → c). A match
 * walks only the branches the filter allows: a literal level is one map lookup, `+` visits the
 * children of one node, `#` takes a subtree. A filter with a literal first level therefore never
 * touches the topics under other first levels. Topics starting with `$` are not matched by a
 * first-level `+` or `#` [MQTT-4.7.2-1].
 */
export class RetainedIndex {
  private readonly root = new LevelNode();

  /** Stores (or replaces) the message of `topic`. */
  set(topic: string, message: StoredMessage): void {
    let node = this.root;
    for (const level of topic.split('/')) {
      let child = node.children.get(level);
      if (child === undefined) {
        child = new LevelNode();
        node.children.set(level, child);
      }
      node = child;
    }
    node.message = message;
  }

  /** Removes the message of `topic` and prunes the branch nodes left empty. */
  delete(topic: string): void {
    const levels = topic.split('/');
    const path: LevelNode[] = [this.root];
    for (const level of levels) {
      const child = path[path.length - 1].children.get(level);
      if (child === undefined) return;
      path.push(child);
    }
    path[path.length - 1].message = undefined;
    for (let i = levels.length; i > 0; i--) {
      const node = path[i];
      if (node.message !== undefined || node.children.size > 0) break;
      path[i - 1].children.delete(levels[i - 1]);
    }
  }

  /**
   * Messages whose topic matches `filter`, at most `limit`, leaving out those that expired
   * before `now` (`expiresAt < now`).
   */
  match(filter: string, limit: number, now: number): StoredMessage[] {
    const out: StoredMessage[] = [];
    if (limit <= 0) return out;
    const levels = filter.split('/');
    const take = (node: LevelNode): boolean => {
      const m = node.message;
      if (m !== undefined && (m.expiresAt === undefined || m.expiresAt >= now)) out.push(m);
      return out.length >= limit;
    };
    const pushChildren = (stack: Step[], node: LevelNode, depth: number, all: boolean): void => {
      for (const [name, child] of node.children) {
        if (depth === 0 && name.startsWith('$')) continue;
        stack.push({ node: child, depth: depth + 1, all });
      }
    };
    const stack: Step[] = [{ node: this.root, depth: 0, all: false }];
    while (stack.length > 0) {
      const { node, depth, all } = stack.pop() as Step;
      if (all) {
        if (take(node)) break;
        pushChildren(stack, node, depth, true);
        continue;
      }
      if (depth === levels.length) {
        if (take(node)) break;
        continue;
      }
      const level = levels[depth];
      if (level === '#') {
        // `a/#` also matches `a` itself [MQTT-4.7.1-2]; the root holds no message.
        if (take(node)) break;
        pushChildren(stack, node, depth, true);
      } else if (level === '+') {
        pushChildren(stack, node, depth, false);
      } else {
        const child = node.children.get(level);
        if (child !== undefined) stack.push({ node: child, depth: depth + 1, all: false });
      }
    }
    return out;
  }
}
