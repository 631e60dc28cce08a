import type { PluginKindMap } from '@bifro/spi';
import type { Logger } from '../../base/logger';
import { ALLOW_ALL_ACL, createAllowAllAcl } from './allow-all-acl';
import { createDevAllowAllAuth, DEV_ALLOW_ALL_AUTH } from './dev-allow-all-auth';
import { createNoRedirectBalancer, NO_REDIRECT_BALANCER } from './no-redirect-balancer';
import { createRegistryDefaultSettings, REGISTRY_DEFAULT_SETTINGS } from './registry-default-settings';
import { createUnlimitedThrottler, UNLIMITED_THROTTLER } from './unlimited-throttler';

/** Kinds core serves itself when the config names no plugin (events: no collector; storage: a package, see default-storage.ts). */
export type BuiltinKind = 'auth' | 'acl' | 'balancer' | 'settings' | 'throttler';

export interface BuiltinPlugin<K extends BuiltinKind> {
  readonly name: string;
  readonly description: string;
  create(): PluginKindMap[K];
  /** Logs, at every start, that the default is in use (and says so loudly when it is unsafe). */
  announce(logger: Logger): void;
}

export const BUILTIN_PLUGINS: { readonly [K in BuiltinKind]: BuiltinPlugin<K> } = {
  auth: {
    name: DEV_ALLOW_ALL_AUTH,
    description: 'DEV ONLY: accepts every client; username tenant/user names the tenant',
    create: createDevAllowAllAuth,
    announce: (logger) =>
      logger.warn(
        { plugin: DEV_ALLOW_ALL_AUTH, kind: 'auth' },
        'NO AUTH PLUGIN CONFIGURED: using the DEV-ONLY allow-all auth provider. EVERY client is accepted without checking credentials ' +
          '(username tenant/user → tenant "tenant", anything else → tenant "default"). Never run this in production: configure plugins.auth.',
      ),
  },
  acl: {
    name: ALLOW_ALL_ACL,
    description: 'grants every action',
    create: createAllowAllAcl,
    announce: (logger) =>
      logger.info({ plugin: ALLOW_ALL_ACL, kind: 'acl' }, 'no access control plugin configured: every action is granted'),
  },
  balancer: {
    name: NO_REDIRECT_BALANCER,
    description: 'never redirects',
    create: createNoRedirectBalancer,
    announce: (logger) =>
      logger.debug({ plugin: NO_REDIRECT_BALANCER, kind: 'balancer' }, 'no balancer plugin configured: clients are never redirected'),
  },
  settings: {
    name: REGISTRY_DEFAULT_SETTINGS,
    description: 'registry defaults for every tenant',
    create: createRegistryDefaultSettings,
    announce: (logger) =>
      logger.debug(
        { plugin: REGISTRY_DEFAULT_SETTINGS, kind: 'settings' },
        'no settings plugin configured: every tenant gets the registry defaults',
      ),
  },
  throttler: {
    name: UNLIMITED_THROTTLER,
    description: 'never throttles',
    create: createUnlimitedThrottler,
    announce: (logger) =>
      logger.debug({ plugin: UNLIMITED_THROTTLER, kind: 'throttler' }, 'no throttler plugin configured: tenants are not throttled'),
  },
};
