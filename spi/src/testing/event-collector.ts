import assert from 'node:assert/strict';
import { EVENT_TYPES, type BrokerEvent, type EventCollector, type EventGroup, type EventType } from '../events';
import type { ConformanceCase, InstanceFactory } from './conformance-case';
import { callSync, lifecycleCheck, withInstance } from './contract-checks';

/** Options of {@link eventCollectorConformance}. */
export interface EventCollectorConformanceOptions extends InstanceFactory<EventCollector> {
  /** The event types the collector must declare (in any order); unchecked when absent. */
  readonly expectedEventTypes?: readonly EventType[] | 'all';
  /**
   * Checks what the collector did with the events it was given (e.g. reads back a file it
   * wrote). Called with the events of the types it wants, after they were reported and before
   * `close`.
   */
  readonly verifyReported?: (collector: EventCollector, reported: readonly BrokerEvent[]) => Promise<void>;
}

/** Every event type with its group, in {@link EVENT_TYPES} order. */
export function allEventTypes(): Array<{ readonly group: EventGroup; readonly type: EventType }> {
  const out: Array<{ group: EventGroup; type: EventType }> = [];
  for (const group of Object.keys(EVENT_TYPES) as EventGroup[]) {
    for (const type of EVENT_TYPES[group]) out.push({ group, type });
  }
  return out;
}

/** Events of every type, with and without tenant and client, with varied detail fields. */
export function sampleEvents(time = Date.now()): BrokerEvent[] {
  const events: BrokerEvent[] = [];
  for (const { group, type } of allEventTypes()) {
    events.push({
      type,
      group,
      time,
      tenantId: 't1',
      clientId: 'client-1',
      userId: 'u1',
      detail: { topic: 'a/b', qos: 1, size: 12, retain: false, reasonCode: 0x80, remoteAddress: '127.0.0.1' },
    });
    events.push({ type, group, time, tenantId: undefined, clientId: undefined, userId: undefined, detail: {} });
    events.push({
      type,
      group,
      time,
      tenantId: 'tenant-ü',
      clientId: '',
      userId: undefined,
      detail: { text: 'ünïcödé', missing: undefined },
    });
  }
  return events;
}

/**
 * The conformance kit of {@link EventCollector}: lifecycle, `eventTypes` names only known types
 * (no repeats), and `report` accepts an event of every type (with and without tenant, varied
 * details) synchronously and without throwing.
 *
 * @example
 * ```ts
 * registerConformance(
 *   eventCollectorConformance({ create: () => new JsonLinesCollector(file), expectedEventTypes: 'all' }),
 *   { it },
 * );
 * ```
 */
export function eventCollectorConformance(options: EventCollectorConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const add = (name: string, check: (p: EventCollector, timeoutMs: number) => Promise<void>): void => {
    cases.push({ name: `events: ${name}`, run: () => withInstance(options, check) });
  };
  const known = new Set<string>(allEventTypes().map((e) => e.type));

  add('create, init and close resolve; report is a method', async (p) => lifecycleCheck(['report'])(p));

  add('eventTypes, when present, names only known event types, each once', async (p) => {
    const types: unknown = p.eventTypes;
    if (types !== undefined) {
      assert.ok(Array.isArray(types), 'eventTypes must be an array');
      for (const t of types as unknown[]) assert.ok(known.has(t as string), `eventTypes names an unknown type ${JSON.stringify(t)}`);
      assert.equal(new Set(types).size, types.length, 'eventTypes must not repeat a type');
    }
    const expected = options.expectedEventTypes;
    if (expected === 'all') assert.equal(types, undefined, 'the collector must want every type (no eventTypes)');
    else if (expected !== undefined)
      assert.deepStrictEqual([...((types as EventType[] | undefined) ?? [])].sort(), [...expected].sort(), 'eventTypes');
  });

  for (const group of Object.keys(EVENT_TYPES) as EventGroup[]) {
    add(`report accepts every ${group} event synchronously without throwing`, async (p) => {
      for (const event of sampleEvents().filter((e) => e.group === group)) {
        callSync(`report(${event.type})`, () => p.report(event));
      }
    });
  }

  if (options.verifyReported) {
    const verify = options.verifyReported;
    add('reported events are handled as the plugin promises', async (p) => {
      const reported = sampleEvents().filter((e) => p.eventTypes === undefined || p.eventTypes.includes(e.type));
      for (const event of reported) callSync(`report(${event.type})`, () => p.report(event));
      await verify(p, reported);
    });
  }

  return cases;
}
