import { definePlugin } from '@bifro/spi';
import { LogCollector } from './log-collector';
import { parseEventsLogOptions } from './options';

export { LogCollector } from './log-collector';
export { EVENTS_LOG_OPTION_NAMES, LOG_LEVELS, parseEventsLogOptions, type EventsLogOptions, type LogLevel } from './options';

/**
 * The events-log plugin (`plugins.events: [{ use: "@bifro/plugin-events-log", options: { groups,
 * types, level } }]` in the broker config). Invalid options fail the plugin's load with an Error
 * naming the option.
 */
export default definePlugin({
  events: (ctx) => {
    const options = parseEventsLogOptions(ctx.options);
    ctx.logger.debug('events log', { types: options.eventTypes?.length ?? 'all', level: options.level });
    return new LogCollector(ctx.logger, options);
  },
});
