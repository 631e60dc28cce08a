import { eventCollectorConformance, registerConformance, testPluginContext, type LoggedLine } from '@bifro/spi/testing';
import { EVENT_TYPES, type BrokerEvent, type EventCollector } from '@bifro/spi';
import plugin from '../src';

function create(options: Readonly<Record<string, unknown>>, logged?: LoggedLine[][]): EventCollector {
  const factory = plugin.events;
  if (factory === undefined) throw new Error('the plugin must provide events');
  const ctx = testPluginContext({ options });
  logged?.push(ctx.logged);
  const collector = factory(ctx);
  if (collector instanceof Promise) throw new Error('the events factory must be synchronous');
  return collector;
}

function eventLines(lines: readonly LoggedLine[]): LoggedLine[] {
  return lines.filter((l) => l.msg.startsWith('event '));
}

describe('events log: conformance with every type (no options)', () => {
  const contexts: LoggedLine[][] = [];
  registerConformance(
    eventCollectorConformance({
      create: () => create({}, contexts),
      expectedEventTypes: 'all',
      verifyReported: async (_collector, reported: readonly BrokerEvent[]) => {
        const lines = eventLines(contexts[contexts.length - 1]);
        expect(lines.map((l) => l.msg)).toEqual(reported.map((e) => `event ${e.type}`));
        expect(lines.every((l) => l.level === 'info')).toBe(true);
      },
    }),
    { it },
  );
});

describe('events log: conformance with types and groups', () => {
  const contexts: LoggedLine[][] = [];
  registerConformance(
    eventCollectorConformance({
      create: () =>
        create(
          { types: ['clientConnected', 'pluginCallFailed', 'byClient'], groups: ['clientDisconnected', 'session'], level: 'warn' },
          contexts,
        ),
      expectedEventTypes: ['clientConnected', 'pluginCallFailed', ...EVENT_TYPES.clientDisconnected, ...EVENT_TYPES.session],
      verifyReported: async (_collector, reported: readonly BrokerEvent[]) => {
        const lines = eventLines(contexts[contexts.length - 1]);
        expect(lines.map((l) => l.msg)).toEqual(reported.map((e) => `event ${e.type}`));
        expect(lines.every((l) => l.level === 'warn')).toBe(true);
      },
    }),
    { it },
  );
});
