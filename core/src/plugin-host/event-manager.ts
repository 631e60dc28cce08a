import { EVENT_TYPES, type BrokerEvent, type EventType } from '@bifro/spi';
import type { Logger } from '../base/logger';
import type { EventManager } from './managers';
import type { GuardedPlugin } from './plugin-call-guard';

/** Every event type the SPI defines. */
export const ALL_EVENT_TYPES: readonly EventType[] = Object.values(EVENT_TYPES).flat();

const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set<string>(ALL_EVENT_TYPES);

/**
 * Hands events to the collectors that want them. The collectors of each type are worked out once
 * from their `eventTypes` (absent = all), so {@link wants} is one map lookup and an event nobody
 * wants is never built. A collector's throw is caught, counted and logged.
 */
export class GuardedEventManager implements EventManager {
  private readonly byType = new Map<EventType, GuardedPlugin<'events'>[]>();

  constructor(collectors: readonly GuardedPlugin<'events'>[], logger: Logger) {
    for (const collector of collectors) {
      const declared = collector.instance.eventTypes;
      if (declared !== undefined) {
        const unknown = declared.filter((type) => !KNOWN_EVENT_TYPES.has(type));
        if (unknown.length > 0) {
          logger.warn(
            { plugin: collector.name, unknown },
            `event collector ${collector.name} asks for unknown event types ${unknown.join(', ')}; they are never reported`,
          );
        }
      }
      const wanted = declared === undefined ? ALL_EVENT_TYPES : declared.filter((type) => KNOWN_EVENT_TYPES.has(type));
      for (const type of new Set(wanted)) {
        const list = this.byType.get(type);
        if (list === undefined) this.byType.set(type, [collector]);
        else list.push(collector);
      }
    }
  }

  wants(type: EventType): boolean {
    return this.byType.has(type);
  }

  report(event: BrokerEvent): void {
    const collectors = this.byType.get(event.type);
    if (collectors === undefined) return;
    for (let i = 0; i < collectors.length; i++) {
      const collector = collectors[i]!;
      const start = collector.start();
      try {
        collector.instance.report(event);
        collector.succeeded(start);
      } catch (err) {
        collector.failed(start, 'report', 'error', err, { tenantId: event.tenantId, clientId: event.clientId, userId: event.userId });
      }
    }
  }
}
