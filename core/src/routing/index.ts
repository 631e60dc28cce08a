/** Topic validation, the topic trie and the per-tenant subscription index. */
export * from './topic';
export * from './topic-trie';
export * from './tenant-dist';
export * from './dist';
