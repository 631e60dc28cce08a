import { EVENT_TYPES, type EventGroup, type EventType } from '@bifro/spi';

/** The levels a line may be logged at. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;

/** A level of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The validated options of the events-log collector. */
export interface EventsLogOptions {
  /** The event types to log, in {@link EVENT_TYPES} order; `undefined` for every type. */
  readonly eventTypes: readonly EventType[] | undefined;
  /** The level of every line. */
  readonly level: LogLevel;
}

/** The option names the plugin accepts. */
export const EVENTS_LOG_OPTION_NAMES = ['types', 'groups', 'level'] as const;

const GROUPS = Object.keys(EVENT_TYPES) as EventGroup[];
const TYPES: readonly EventType[] = GROUPS.flatMap((group): readonly EventType[] => EVENT_TYPES[group]);

/**
 * Checks the plugin's `options` block: `types` and `groups` (their union is the set of types
 * logged; every type when neither is given) and `level` (default `info`). Throws an Error naming
 * the option and the faulty values.
 *
 * @example
 * ```ts
 * parseEventsLogOptions({ groups: ['clientDisconnected'], types: ['clientConnected'], level: 'debug' });
 * ```
 */
export function parseEventsLogOptions(options: Readonly<Record<string, unknown>>): EventsLogOptions {
  const unknown = Object.keys(options).filter((key) => !(EVENTS_LOG_OPTION_NAMES as readonly string[]).includes(key));
  if (unknown.length > 0) {
    throw new Error(`${unknown.join(', ')}: unknown option (expected ${EVENTS_LOG_OPTION_NAMES.join(', ')})`);
  }
  const types = nameList('types', options.types, TYPES, 'event type');
  const groups = nameList('groups', options.groups, GROUPS, 'event group');
  return { eventTypes: types === undefined && groups === undefined ? undefined : union(types, groups), level: logLevel(options.level) };
}

function nameList<T extends string>(option: string, value: unknown, known: readonly T[], what: string): readonly T[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    throw new Error(`${option}: expected a list of ${what} names, got ${JSON.stringify(value)}`);
  }
  const names = value as string[];
  const unknownNames = names.filter((name) => !(known as readonly string[]).includes(name));
  if (unknownNames.length > 0) {
    throw new Error(
      `${option}: unknown ${what}${unknownNames.length > 1 ? 's' : ''} ${unknownNames.map((n) => JSON.stringify(n)).join(', ')}`,
    );
  }
  return names as T[];
}

function union(types: readonly EventType[] | undefined, groups: readonly EventGroup[] | undefined): readonly EventType[] {
  const wanted = new Set<EventType>(types);
  for (const group of groups ?? []) for (const type of EVENT_TYPES[group]) wanted.add(type);
  if (wanted.size === 0) {
    throw new Error('types, groups: no event type selected (list at least one, or give neither option to log every type)');
  }
  return TYPES.filter((type) => wanted.has(type));
}

function logLevel(value: unknown): LogLevel {
  if (value === undefined) return 'info';
  if (typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value)) return value as LogLevel;
  throw new Error(`level: expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`);
}
