/**
 * @bifro/spi: the contracts between the Bifro broker and its plugins. Pure types, the
 * {@link SPI_VERSION}, the settings registry and its value checks, the event and resource names,
 * the error catalogue shape, and `definePlugin`.
 * Conformance kits live in `@bifro/spi/testing`.
 */
export * from './version';
export * from './common';
export * from './auth';
export * from './acl';
export * from './acl-rules';
export * from './identity-ids';
export * from './balancer';
export * from './events';
export * from './settings';
export * from './setting-checks';
export * from './throttler';
export * from './storage';
export * from './errors';
export * from './plugin';
export * from './paging';
export { FileWatcher, serialized, type FileWatcherOptions } from './file-watcher';
export * from './record-codec';
