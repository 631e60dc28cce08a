import type { Lifecycle } from './common';

/**
 * Every event type the broker reports, by group (docs/spi/events.md). Collectors name the types they
 * want; the broker builds an event only when some collector wants its type.
 */
export const EVENT_TYPES = {
  connectionRefused: [
    'authError',
    'unauthenticated',
    'notAuthorizedClient',
    'protocolError',
    'unacceptedProtocolVersion',
    'identifierRejected',
    'malformedClientIdentifier',
    'malformedUserName',
    'malformedWillTopic',
    'connectTimeout',
    'connectionRateExceeded',
    'banned',
  ],
  clientConnected: ['clientConnected'],
  clientDisconnected: [
    'byClient',
    'badPacket',
    'channelError',
    'idle',
    'byServer',
    'kicked',
    'redirected',
    'serverBusy',
    'resourceThrottled',
    'invalidTopic',
    'malformedTopic',
    'invalidTopicFilter',
    'malformedTopicFilter',
    'reAuthFailed',
    'noPubPermission',
    'protocolViolation',
    'receiveLimitExceeded',
    'exceedPubRate',
    'tooLargeSubscription',
    'tooLargeUnsubscription',
    'oversizePacketDropped',
  ],
  inboundPublish: ['pubDiscarded', 'willDistributed', 'willDistError', 'distError', 'pubAcked', 'pubReceived', 'pubDropped'],
  outboundPush: ['qos0Pushed', 'qos0Dropped', 'qos1Pushed', 'qos1Dropped', 'qos1Confirmed', 'qos2Pushed', 'qos2Dropped', 'qos2Confirmed'],
  retained: ['msgRetained', 'retainMsgCleared', 'retainMsgMatched', 'msgRetainedError'],
  accessControl: ['pubActionDisallow', 'subActionDisallow', 'unsubActionDisallow', 'accessControlError'],
  subscription: ['subAcked', 'unsubAcked', 'subscriberStalled'],
  inbox: ['inboxOverflowed'],
  session: ['sessionStarted', 'sessionStopped'],
  tenant: ['resourceExhausted'],
  plugin: ['pluginCallFailed'],
  security: ['flappingDetected'],
  storage: ['storageFailed', 'storageRecovered'],
} as const;

/** An event group name. */
export type EventGroup = keyof typeof EVENT_TYPES;

/** An event type name, e.g. `clientConnected` or `pubActionDisallow`. */
export type EventType = (typeof EVENT_TYPES)[EventGroup][number];

/** Values an event detail field may hold. */
export type EventDetailValue = string | number | boolean | undefined;

/**
 * One event. The shape is the same for every type; `detail` holds the type's own fields, e.g.
 * `{ topic, qos, size }` for publish events or `{ reasonCode, remoteAddress }` for disconnects
 * (docs/spi/events.md lists the types by group).
 */
export interface BrokerEvent {
  readonly type: EventType;
  readonly group: EventGroup;
  /** Milliseconds since the epoch. */
  readonly time: number;
  /** The tenant, when known (not before auth succeeded). */
  readonly tenantId: string | undefined;
  readonly clientId: string | undefined;
  readonly userId: string | undefined;
  readonly detail: Readonly<Record<string, EventDetailValue>>;
}

/**
 * Receives broker events. `report` is called synchronously on the broker's hot path: keep it
 * cheap (buffer, then write in batches); throws are caught and counted.
 *
 * @example
 * ```ts
 * const collector: EventCollector = {
 *   eventTypes: ['clientConnected', 'byClient'],
 *   report: (e) => buffer.push(e),
 * };
 * ```
 */
export interface EventCollector extends Lifecycle {
  /** The event types wanted; all types when absent. */
  readonly eventTypes?: readonly EventType[];
  report(event: BrokerEvent): void;
}
