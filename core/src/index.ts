/**
 * @bifro/core: the broker. Embedders start it with `loadConfig` + `startBroker`; the `bifro`
 * CLI (cli/main.ts) does the same.
 */
export { startBroker, type RunningBroker, type ListenerAddress } from './runtime/broker';
export { loadConfig, type LoadConfigOptions } from './runtime/config';
export type { BrokerConfig, ListenerConfig, PluginRef, PluginsConfig } from './base/config-types';
export { createLogger, type Logger } from './base/logger';
export { BifroError } from './base/errors';
export { errorSpec, ERROR_AREAS } from './cli/error-catalogue';
export { verifyPlugin, listPlugins, type VerifyReport, type PluginListEntry, type LoadedPluginInfo } from './plugin-host';
