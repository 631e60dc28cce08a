import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EVENT_TYPES, SPI_VERSION, type BrokerEvent, type EventCollector } from '@bifro/spi';
import { allEventTypes, testPluginContext, type TestPluginContext } from '@bifro/spi/testing';
import plugin, { LOG_LEVELS, LogCollector, parseEventsLogOptions } from '../src';

function create(options: Readonly<Record<string, unknown>> = {}): { collector: EventCollector; ctx: TestPluginContext } {
  const ctx = testPluginContext({ options });
  const collector = plugin.events?.(ctx);
  if (!(collector instanceof LogCollector)) throw new Error('the plugin must create a LogCollector synchronously');
  return { collector, ctx };
}

const connected: BrokerEvent = {
  type: 'clientConnected',
  group: 'clientConnected',
  time: 1_700_000_000_000,
  tenantId: 'acme',
  clientId: 'sensor-1',
  userId: 'alice',
  detail: { remoteAddress: '10.0.0.7', protocolVersion: 5, cleanStart: true },
};

describe('events log plugin', () => {
  it('declares the events kind and an SPI range the current SPI satisfies', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      bifro: { kinds: string[]; spi: string; main: string };
      peerDependencies: Record<string, string>;
      devDependencies: Record<string, string>;
      dependencies?: Record<string, string>;
    };
    expect(pkg.name).toBe('@bifro/plugin-events-log');
    expect(pkg.version).toBe('1.0.0');
    expect(pkg.bifro.kinds).toEqual(['events']);
    expect(pkg.bifro.main).toBe('dist/index.js');
    expect(pkg.peerDependencies).toEqual({ '@bifro/spi': pkg.bifro.spi });
    expect(pkg.devDependencies).toEqual({ '@bifro/spi': SPI_VERSION });
    expect(pkg.dependencies).toBeUndefined();
    expect(pkg.bifro.spi).toBe(`^${SPI_VERSION.split('.')[0]}.0.0`);
  });

  it('wants every type when neither types nor groups is given', () => {
    expect(create().collector.eventTypes).toBeUndefined();
  });

  it('declares only the listed types', () => {
    expect(create({ types: ['idle', 'clientConnected'] }).collector.eventTypes).toEqual(['clientConnected', 'idle']);
  });

  it('declares every type of the listed groups', () => {
    expect(create({ groups: ['retained', 'tenant'] }).collector.eventTypes).toEqual([...EVENT_TYPES.retained, 'resourceExhausted']);
  });

  it('declares the union of types and groups, each type once, in EVENT_TYPES order', () => {
    const { collector } = create({ types: ['pluginCallFailed', 'sessionStarted', 'authError', 'authError'], groups: ['session', 'inbox'] });
    expect(collector.eventTypes).toEqual(['authError', 'inboxOverflowed', 'sessionStarted', 'sessionStopped', 'pluginCallFailed']);
  });

  it('logs one line per event with the event fields and the detail, at info by default', () => {
    const { collector, ctx } = create({ types: ['clientConnected'] });
    collector.report(connected);
    expect(ctx.logged.filter((l) => l.msg.startsWith('event '))).toEqual([
      {
        level: 'info',
        msg: 'event clientConnected',
        fields: {
          group: 'clientConnected',
          tenantId: 'acme',
          clientId: 'sensor-1',
          userId: 'alice',
          eventTime: 1_700_000_000_000,
          remoteAddress: '10.0.0.7',
          protocolVersion: 5,
          cleanStart: true,
        },
      },
    ]);
  });

  it('keeps the fields of an event without tenant, client or user as undefined', () => {
    const { collector, ctx } = create();
    collector.report({
      type: 'connectTimeout',
      group: 'connectionRefused',
      time: 5,
      tenantId: undefined,
      clientId: undefined,
      userId: undefined,
      detail: {},
    });
    const line = ctx.logged.find((l) => l.msg === 'event connectTimeout');
    expect(line?.fields).toEqual({ group: 'connectionRefused', tenantId: undefined, clientId: undefined, userId: undefined, eventTime: 5 });
  });

  it('does not keep the detail object it was given', () => {
    const { collector, ctx } = create();
    const detail: Record<string, string> = { topic: 'a/b' };
    collector.report({ ...connected, detail });
    detail.topic = 'changed';
    expect(ctx.logged.find((l) => l.msg === 'event clientConnected')?.fields?.topic).toBe('a/b');
  });

  it.each(LOG_LEVELS)('logs at the level option %s', (level) => {
    const { collector, ctx } = create({ level });
    collector.report(connected);
    const line = ctx.logged.find((l) => l.msg === 'event clientConnected');
    expect(line?.level).toBe(level);
  });

  it('logs one line for every event of every type', () => {
    const { collector, ctx } = create();
    const before = ctx.logged.length;
    for (const { type, group } of allEventTypes()) collector.report({ ...connected, type, group });
    expect(ctx.logged.slice(before).map((l) => l.msg)).toEqual(allEventTypes().map((e) => `event ${e.type}`));
  });
});

describe('events log options', () => {
  it('rejects unknown event types, naming them', () => {
    expect(() => create({ types: ['clientConnected', 'conected', 'idel'] })).toThrow('types: unknown event types "conected", "idel"');
  });

  it('rejects unknown groups, naming them', () => {
    expect(() => create({ groups: ['session', 'sessions'] })).toThrow('groups: unknown event group "sessions"');
  });

  it('rejects a group name given as a type and a type given as a group', () => {
    expect(() => parseEventsLogOptions({ types: ['session'] })).toThrow('types: unknown event type "session"');
    expect(() => parseEventsLogOptions({ groups: ['idle'] })).toThrow('groups: unknown event group "idle"');
  });

  it('rejects types and groups that are not lists of strings', () => {
    expect(() => parseEventsLogOptions({ types: 'clientConnected' })).toThrow(
      'types: expected a list of event type names, got "clientConnected"',
    );
    expect(() => parseEventsLogOptions({ groups: [1] })).toThrow('groups: expected a list of event group names, got [1]');
  });

  it('rejects lists that select no type at all', () => {
    expect(() => parseEventsLogOptions({ types: [], groups: [] })).toThrow('types, groups: no event type selected');
  });

  it('rejects an unknown level', () => {
    expect(() => create({ level: 'verbose' })).toThrow('level: expected one of trace, debug, info, warn, error, got "verbose"');
    expect(() => create({ level: 3 })).toThrow('level: expected one of trace, debug, info, warn, error, got 3');
  });

  it('rejects unknown options, naming them', () => {
    expect(() => create({ type: ['clientConnected'] })).toThrow('type: unknown option (expected types, groups, level)');
  });

  it('defaults the level to info', () => {
    expect(parseEventsLogOptions({})).toEqual({ eventTypes: undefined, level: 'info' });
  });
});
