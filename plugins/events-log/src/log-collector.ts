import type { BrokerEvent, EventCollector, EventType, PluginLogger } from '@bifro/spi';
import type { EventsLogOptions } from './options';

/**
 * An {@link EventCollector} that writes one log line per event through the plugin's logger: the
 * message `event <type>` with the fields `{ group, tenantId, clientId, userId, eventTime, ...detail }`.
 * It builds no JSON of its own; formatting is the logger's job.
 *
 * @example
 * ```ts
 * const collector = new LogCollector(ctx.logger, parseEventsLogOptions(ctx.options));
 * collector.report(event); // logs "event clientConnected" at info
 * ```
 */
export class LogCollector implements EventCollector {
  /** The event types logged; `undefined` for every type. */
  readonly eventTypes: readonly EventType[] | undefined;
  private readonly write: PluginLogger['info'];

  constructor(logger: PluginLogger, options: EventsLogOptions) {
    this.eventTypes = options.eventTypes;
    this.write = logger[options.level].bind(logger);
  }

  /** Logs the event: one line, synchronously. */
  report(event: BrokerEvent): void {
    this.write(`event ${event.type}`, {
      group: event.group,
      tenantId: event.tenantId,
      clientId: event.clientId,
      userId: event.userId,
      eventTime: event.time,
      ...event.detail,
    });
  }
}
