/** Topic validation, the topic trie, the per-tenant subscription index and the routing seam. */
export * from './topic';
export * from './topic-trie';
export * from './shared-group';
export * from './match-set';
export * from './tenant-dist';
export * from './router';
export * from './local-router';
