import { definePlugin } from '@bifro/spi';
import { NATS_STORAGE_ERRORS } from './errors';
import { NatsStorage } from './nats-storage';
import { resolveOptions } from './options';

export { NatsStorage, LAYOUT_FORMAT } from './nats-storage';
export { parseOptions, resolveOptions, DEFAULTS, type NatsStorageOptions } from './options';
export { NATS_STORAGE_ERRORS, NatsStorageError, type NatsStorageErrorCode } from './errors';

/**
 * The cluster storage plugin (`plugins.storage: "@bifro/plugin-storage-nats"`): sessions,
 * inboxes, inflight state, retained messages and bans in NATS JetStream, shared by every node.
 * Options: `servers` (required), `user`/`password` or `token`, `tls` {ca, cert, key},
 * `partitions` (16), `replicas` (3), `prefix` (`bifro`), `timeoutMs` (5000); see
 * docs/storage-nats.md.
 */
export default definePlugin({
  storage: (ctx) => new NatsStorage(resolveOptions(ctx)),
  errors: NATS_STORAGE_ERRORS,
});
