/**
 * @bifro/spi: the contracts between the Bifro broker and its plugins. Pure types, the
 * {@link SPI_VERSION}, the settings registry, the event and resource names, and `definePlugin`.
 * Conformance kits live in `@bifro/spi/testing`.
 */
export * from './version';
export * from './common';
export * from './auth';
export * from './acl';
export * from './balancer';
export * from './events';
export * from './settings';
export * from './throttler';
export * from './storage';
export * from './plugin';
export * from './paging';
