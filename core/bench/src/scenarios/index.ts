/** Every scenario, in the order a full run executes them. */
import type { Scenario, ScenarioParams } from '../scenario';
import { fanIn } from './fan-in';
import { fanOut } from './fan-out';
import { idleConnections } from './idle-connections';
import { latency } from './latency';
import { qos1Pairs, qos1Persistent } from './qos1-pairs';
import { sharedSub } from './shared-sub';

export { fanIn, fanOut, idleConnections, latency, qos1Pairs, qos1Persistent, sharedSub };
export type { FanInParams } from './fan-in';
export type { FanOutParams } from './fan-out';
export type { IdleConnectionsParams } from './idle-connections';
export type { LatencyParams } from './latency';
export type { Qos1PairsParams } from './qos1-pairs';
export type { SharedSubParams } from './shared-sub';

export const SCENARIOS: readonly Scenario<ScenarioParams>[] = [
  fanIn,
  fanOut,
  qos1Pairs,
  qos1Persistent,
  sharedSub,
  latency,
  idleConnections,
];

export function findScenario(name: string): Scenario<ScenarioParams> | undefined {
  return SCENARIOS.find((s) => s.name === name);
}
