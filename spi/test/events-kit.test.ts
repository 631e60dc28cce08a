import { EVENT_TYPES, type BrokerEvent, type EventCollector, type EventType } from '@bifro/spi';
import { eventCollectorConformance } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';

/** A correct collector that buffers the events it wants. */
class BufferingCollector implements EventCollector {
  readonly buffer: BrokerEvent[] = [];
  constructor(readonly eventTypes?: readonly EventType[]) {}
  report(event: BrokerEvent): void {
    this.buffer.push(event);
  }
}

const groups = Object.keys(EVENT_TYPES).length;

describe('event collector kit', () => {
  it('passes a correct collector that wants everything, and checks what it received', async () => {
    const cases = eventCollectorConformance({
      create: () => new BufferingCollector(),
      expectedEventTypes: 'all',
      verifyReported: async (collector, reported) => {
        expect((collector as BufferingCollector).buffer).toEqual(reported);
      },
    });
    expect(cases).toHaveLength(2 + groups + 1);
    await expectAllPass(cases);
  });

  it('passes a collector that wants a few types', async () => {
    await expectAllPass(
      eventCollectorConformance({
        create: () => new BufferingCollector(['clientConnected', 'byClient']),
        expectedEventTypes: ['byClient', 'clientConnected'],
        verifyReported: async (_c, reported) => {
          expect(new Set(reported.map((e) => e.type))).toEqual(new Set(['clientConnected', 'byClient']));
        },
      }),
    );
  });

  it('fails eventTypes naming an unknown or repeated type, or not the expected ones', async () => {
    await expectFailures(
      eventCollectorConformance({ create: () => new BufferingCollector(['clientConnected', 'nope' as EventType]) }),
      'eventTypes, when present',
    );
    await expectFailures(
      eventCollectorConformance({ create: () => new BufferingCollector(['byClient', 'byClient']) }),
      'eventTypes, when present',
    );
    await expectFailures(
      eventCollectorConformance({ create: () => new BufferingCollector(['byClient']), expectedEventTypes: 'all' }),
      'eventTypes, when present',
    );
  });

  it('fails a collector that throws for one type', async () => {
    await expectFailures(
      eventCollectorConformance({
        create: () => ({
          report: (e: BrokerEvent) => {
            if (e.type === 'kicked') throw new Error('no handler for kicked');
          },
        }),
      }),
      'every clientDisconnected event',
    );
  });

  it('fails a collector that throws on events without a tenant', async () => {
    await expectFailures(
      eventCollectorConformance({
        create: () => ({
          report: (e: BrokerEvent) => {
            if (e.tenantId === undefined) throw new TypeError('tenantId.length of undefined');
          },
        }),
      }),
      'every connectionRefused event',
      'every session event',
    );
  });

  it('fails an async report', async () => {
    await expectFailures(
      eventCollectorConformance({ create: () => ({ report: async () => undefined }) }),
      'every clientConnected event synchronously',
    );
  });

  it('fails when the plugin check of reported events fails', async () => {
    await expectFailures(
      eventCollectorConformance({
        create: () => ({ report: () => undefined }),
        verifyReported: async () => {
          throw new Error('nothing was written');
        },
      }),
      'reported events are handled as the plugin promises',
    );
  });
});
