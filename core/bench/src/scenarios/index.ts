/** Every scenario, in the order a full run executes them. */
import type { Scenario, ScenarioParams } from '../scenario';
import { fanIn } from './fan-in';
import { fanOut } from './fan-out';
import { idleConnections } from './idle-connections';
import { qos1Pairs, qos1Persistent } from './qos1-pairs';

export { fanIn, fanOut, idleConnections, qos1Pairs, qos1Persistent };
export type { FanInParams } from './fan-in';
export type { FanOutParams } from './fan-out';
export type { IdleConnectionsParams } from './idle-connections';
export type { Qos1PairsParams } from './qos1-pairs';

export const SCENARIOS: readonly Scenario<ScenarioParams>[] = [fanIn, fanOut, qos1Pairs, qos1Persistent, idleConnections];

export function findScenario(name: string): Scenario<ScenarioParams> | undefined {
  return SCENARIOS.find((s) => s.name === name);
}
