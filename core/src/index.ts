/**
 * @bifro/core: the broker. Embedders start it with `loadConfig` + `startBroker`; the `bifro`
 * CLI (cli/main.ts) does the same.
 */
export { startBroker, type RunningBroker, type ListenerAddress } from './runtime/broker';
export { loadConfig, type LoadConfigOptions } from './runtime/config';
export type { BrokerConfig, ListenerConfig, PluginRef, PluginsConfig } from './runtime/config-types';
export { createLogger, type Logger } from './runtime/logger';
export { BifroError } from './errors';
export { errorSpec, ERROR_AREAS } from './error-catalogue';
export { verifyPlugin, listPlugins, type VerifyReport, type PluginListEntry, type LoadedPluginInfo } from './plugin-host';
