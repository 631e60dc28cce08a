/** Injection tokens of the runtime's own services (plugin managers have theirs in plugin-host/tokens.ts). */
export const RUNTIME_TOKENS = {
  Config: Symbol('BrokerConfig'),
  Logger: Symbol('Logger'),
  TenantUsage: Symbol('TenantUsage'),
  TimerWheel: Symbol('TimerWheel'),
  /** The broker's `Clock` (StartOptions.clock, `Date.now` by default). */
  Clock: Symbol('Clock'),
  /** The `Router` (routing seam): the in-process `LocalRouter` unless the composition root picks another. */
  Router: Symbol('Router'),
  /** The `Topology` (broker/topology.ts): standalone, worker or cluster node, built before the engine. */
  Topology: Symbol('Topology'),
} as const;
