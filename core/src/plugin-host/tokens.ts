import type { DependencyContainer } from 'tsyringe';
import type { Storage } from '@bifro/spi';
import type { AclManager, AuthManager, BalancerManager, EventManager, PluginHost, SettingsManager, ThrottlerManager } from './managers';

/** Injection tokens of the plugin host and its managers in the broker's tsyringe container. */
export const PLUGIN_TOKENS = {
  Auth: Symbol('AuthManager'),
  Acl: Symbol('AclManager'),
  Balancer: Symbol('BalancerManager'),
  Events: Symbol('EventManager'),
  Settings: Symbol('SettingsManager'),
  Throttler: Symbol('ThrottlerManager'),
  Storage: Symbol('Storage'),
} as const;

/** Registers each of the host's managers and its storage as values, for the services that inject them (resolved once at boot: docs/principles.md 8, hot-path discipline). */
export function registerPluginHost(container: DependencyContainer, host: PluginHost): void {
  container.register<AuthManager>(PLUGIN_TOKENS.Auth, { useValue: host.auth });
  container.register<AclManager>(PLUGIN_TOKENS.Acl, { useValue: host.acl });
  container.register<BalancerManager>(PLUGIN_TOKENS.Balancer, { useValue: host.balancer });
  container.register<EventManager>(PLUGIN_TOKENS.Events, { useValue: host.events });
  container.register<SettingsManager>(PLUGIN_TOKENS.Settings, { useValue: host.settings });
  container.register<ThrottlerManager>(PLUGIN_TOKENS.Throttler, { useValue: host.throttler });
  container.register<Storage>(PLUGIN_TOKENS.Storage, { useValue: host.storage });
}
