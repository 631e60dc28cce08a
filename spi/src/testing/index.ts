/**
 * `@bifro/spi/testing`: conformance kits, one per plugin kind, that a plugin's own tests run.
 * Each kit returns runner-agnostic cases (`{ name, run }`); {@link registerConformance} hands
 * them to jest-like runners and {@link runConformance} runs them without one. Kits depend on
 * nothing but Node built-ins.
 *
 * @example
 * ```ts
 * import { authProviderConformance, registerConformance } from '@bifro/spi/testing';
 * import plugin from '../src';
 *
 * describe('auth conformance', () => {
 *   registerConformance(authProviderConformance({ create: () => plugin.auth!(testPluginContext()) }), { it });
 * });
 * ```
 */
export {
  DEFAULT_CALL_TIMEOUT_MS,
  registerConformance,
  runConformance,
  type ConformanceCase,
  type ConformanceFailure,
  type ConformanceRegistrar,
  type ConformanceReport,
  type InstanceFactory,
} from './conformance-case';
export { testPluginContext, type LoggedLine, type TestPluginContext, type TestPluginContextOptions } from './plugin-context';
export { ordinaryActions, ordinaryAuthRequests, ordinaryClients, sampleAuthRequest, sampleClient } from './fixtures';
export {
  AUTH_REJECT_REASONS,
  assertAuthResult,
  assertExtendedAuthResult,
  authProviderConformance,
  type AuthProviderConformanceOptions,
} from './auth-provider';
export {
  ACCESS_DECISIONS,
  accessControlConformance,
  assertAccessDecision,
  type AccessControlConformanceOptions,
  type AccessExpectation,
} from './access-control';
export {
  assertRedirectDecision,
  clientBalancerConformance,
  type ClientBalancerConformanceOptions,
  type RedirectExpectation,
} from './client-balancer';
export { allEventTypes, eventCollectorConformance, sampleEvents, type EventCollectorConformanceOptions } from './event-collector';
export {
  allSettingNames,
  assertSettingValue,
  settingProviderConformance,
  type SettingExpectation,
  type SettingProviderConformanceOptions,
} from './setting-provider';
export { resourceThrottlerConformance, type ResourceThrottlerConformanceOptions, type ThrottleExpectation } from './resource-throttler';
export { storageConformance, type StorageConformanceOptions } from './storage';
export { sampleBans } from './storage-ban-cases';
export {
  FIXTURE_TIME,
  binaryPayload,
  numberedInboxMessage,
  numberedInboxMessages,
  plainMessage,
  richInboxMessage,
  richMessage,
  sampleSession,
  utf8,
} from './storage-fixtures';
export { assertSameData, toComparable } from './contract-checks';
