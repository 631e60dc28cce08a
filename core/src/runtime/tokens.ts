/** Injection tokens of the runtime's own services (plugin managers have theirs in plugin-host/tokens.ts). */
export const RUNTIME_TOKENS = {
  Config: Symbol('BrokerConfig'),
  Logger: Symbol('Logger'),
  TenantUsage: Symbol('TenantUsage'),
  TimerWheel: Symbol('TimerWheel'),
} as const;
