import type { Lifecycle } from './common';

/** How a setting's value is checked. */
export interface SettingSpec<T extends boolean | number> {
  readonly type: T extends boolean ? 'boolean' : 'integer';
  readonly default: T;
  /** Smallest allowed value (integers). */
  readonly min?: number;
  /** Largest allowed value (integers). */
  readonly max?: number;
  /** `connect`: read when a client connects, live connections keep the value they started with; `live`: applies to live connections too. */
  readonly applies: 'connect' | 'live';
  readonly description: string;
}

const bool = (def: boolean, applies: 'connect' | 'live', description: string): SettingSpec<boolean> => ({
  type: 'boolean',
  default: def,
  applies,
  description,
});

const int = (def: number, min: number, max: number, applies: 'connect' | 'live', description: string): SettingSpec<number> => ({
  type: 'integer',
  default: def,
  min,
  max,
  applies,
  description,
});

const U32 = 0xffffffff;
const I32 = 0x7fffffff;

/**
 * The per-tenant settings registry (docs/spi/settings.md): every setting once, with its type, default,
 * bounds and meaning. A {@link SettingProvider} may override any of them per tenant; values out of
 * bounds are rejected by the broker with a warning naming tenant, setting and value, and the
 * registry default applies.
 * `docs/settings.md` is generated from this table.
 */
export const SETTINGS = {
  MQTT3Enabled: bool(true, 'connect', 'Accept MQTT 3.1 (protocol level 3) connections.'),
  MQTT4Enabled: bool(true, 'connect', 'Accept MQTT 3.1.1 (protocol level 4) connections.'),
  MQTT5Enabled: bool(true, 'connect', 'Accept MQTT 5.0 (protocol level 5) connections.'),
  NoLWTWhenServerShuttingDown: bool(false, 'live', 'Do not publish wills of clients disconnected because the broker shuts down.'),
  DebugModeEnabled: bool(
    false,
    'live',
    'Report outbound push events (qos0Pushed, qos1Confirmed...) for this tenant; costly, for troubleshooting.',
  ),
  ForceTransient: bool(false, 'connect', 'Treat every session as clean (clean start, session expiry 0), whatever the client asks.'),
  ResumeSessionsOfOtherUsers: bool(
    false,
    'connect',
    'A CONNECT (Clean Start 0) of one user with the client id of a stored session of another user: false starts a fresh session (the stored one ends, Session Present 0); true resumes it only when access control allows the new user every stored subscription, and starts fresh otherwise.',
  ),
  ByPassPermCheckError: bool(
    false,
    'live',
    'When an access control plugin cannot decide (answers `error`, throws, rejects, times out or answers no decision), grant (true) or deny (false, fail closed) the action; the rest of the chain is not asked.',
  ),
  PayloadFormatValidationEnabled: bool(
    true,
    'live',
    'Check that a v5 payload with Payload Format Indicator 1 is valid UTF-8 (PUBLISH refused with 0x99 otherwise).',
  ),
  RetainEnabled: bool(true, 'connect', 'Allow retained messages (v5 CONNACK Retain Available).'),
  WildcardSubscriptionEnabled: bool(true, 'connect', 'Allow `+` and `#` in topic filters (v5 CONNACK Wildcard Subscription Available).'),
  SubscriptionIdentifierEnabled: bool(true, 'connect', 'Allow v5 Subscription Identifiers (CONNACK Subscription Identifiers Available).'),
  SharedSubscriptionEnabled: bool(
    true,
    'connect',
    'Allow `$share/` and `$oshare/` subscriptions (v5 CONNACK Shared Subscription Available).',
  ),
  MaximumQoS: int(2, 0, 2, 'connect', 'Highest QoS the tenant may publish with (v5 CONNACK Maximum QoS); also caps will QoS.'),
  MaxTopicLevelLength: int(1024, 1, 65535, 'live', 'Longest topic level in bytes.'),
  MaxTopicLevels: int(128, 1, 65535, 'live', 'Most levels in a topic or topic filter.'),
  MaxTopicLength: int(65535, 1, 65535, 'live', 'Longest topic or topic filter in bytes.'),
  MaxTopicAlias: int(64, 0, 65535, 'connect', 'v5 Topic Alias Maximum offered to clients (0 disables inbound aliases).'),
  MaxSharedGroupMembers: int(1000, 1, I32, 'live', 'Most members of one shared subscription group.'),
  MaxTopicFiltersPerInbox: int(1000, 1, I32, 'live', 'Most subscriptions one session may hold.'),
  MsgPubPerSec: int(
    0,
    0,
    I32,
    'live',
    'Most PUBLISH packets per second from one connection; 0 = unlimited. Excess: v5 DISCONNECT 0x96, v3 close.',
  ),
  ReceivingMaximum: int(
    1024,
    1,
    65535,
    'connect',
    'v5 Receive Maximum the broker offers: unacknowledged inbound QoS 2 PUBLISH per connection (QoS 1 is acknowledged at once); more → DISCONNECT 0x93.',
  ),
  InBoundBandWidth: int(
    0,
    0,
    Number.MAX_SAFE_INTEGER,
    'live',
    'Inbound bytes per second per connection; 0 = unlimited. Past it reading pauses for as long as the bytes read are worth at this rate (TCP slows the client); nothing is dropped.',
  ),
  OutBoundBandWidth: int(
    0,
    0,
    Number.MAX_SAFE_INTEGER,
    'live',
    'Outbound bytes per second per connection; 0 = unlimited. Past it deliveries wait in the session queue until the next second (dropped by SessionInboxSize / QoS0DropOldest when it is full).',
  ),
  MaxLastWillBytes: int(65536, 0, 268435455, 'connect', 'Largest will payload in bytes (CONNACK 0x95 / v3 0x03 when exceeded).'),
  MaxUserPayloadBytes: int(
    4194304,
    0,
    268435455,
    'connect',
    'Largest PUBLISH payload in bytes; v5 Maximum Packet Size is derived from it.',
  ),
  MinSendPerSec: int(
    8,
    0,
    I32,
    'live',
    'A subscriber whose queue overflows while fewer PUBLISH packets per second leave for it than this is reported stalled (subscriberStalled event, once a second).',
  ),
  MaxResendTimes: int(
    3,
    0,
    1000,
    'live',
    'MQTT 3.1/3.1.1 only: how often an unacknowledged QoS 1/2 message (or PUBREL) is resent with DUP to a connected client before it is given up (dropped, packet id freed). MQTT 5 clients get resends only on reconnect [MQTT-4.4.0-1].',
  ),
  ResendTimeoutSeconds: int(
    10,
    1,
    3600,
    'live',
    'MQTT 3.1/3.1.1 only: seconds to wait for an acknowledgement before a resend (checked once a second).',
  ),
  MaxTopicFiltersPerSub: int(
    100,
    1,
    65535,
    'live',
    'Most topic filters in one SUBSCRIBE packet (each filter gets 0x97 / v3 0x80 when exceeded); larger UNSUBSCRIBE packets are reported (tooLargeUnsubscription) but served.',
  ),
  MaxGroupFanout: int(1000, 1, I32, 'live', 'Most shared subscription groups one message is delivered to.'),
  MaxPersistentFanout: int(100000, 1, I32, 'live', 'Most offline persistent sessions one message is queued for.'),
  MaxPersistentFanoutBytes: int(
    1073741824,
    1,
    Number.MAX_SAFE_INTEGER,
    'live',
    'Most bytes one message may queue across offline persistent sessions.',
  ),
  MaxSessionExpirySeconds: int(
    2592000,
    0,
    U32,
    'connect',
    'Upper clamp on the session expiry a client asks for (v5 Session Expiry Interval; v3 persistent sessions get this value).',
  ),
  MinSessionExpirySeconds: int(0, 0, U32, 'connect', 'Lower clamp on a non-zero session expiry.'),
  MinKeepAliveSeconds: int(
    0,
    0,
    65535,
    'connect',
    'Keep alive floor: a smaller (non-zero) keep alive is raised to this (v5 Server Keep Alive).',
  ),
  SessionInboxSize: int(
    10000,
    1,
    I32,
    'live',
    'Most deliveries queued for one session: while its client is offline, or connected but not reading fast enough.',
  ),
  QoS0DropOldest: bool(
    false,
    'live',
    'When a session queue is full, drop its oldest queued message, whatever its QoS (true), or the new one (false).',
  ),
  MaxTenantQueuedBytes: int(
    268435456,
    0,
    Number.MAX_SAFE_INTEGER,
    'live',
    "Most message bytes (payload + topic) waiting in memory for all of the tenant's connected sessions together; past it QoS0DropOldest decides what is dropped (reason `tenant-queue-bytes`). 0 = no tenant bound (mqtt.maxQueuedBytesPerConnection still applies).",
  ),
  RetainMessageMatchLimit: int(10000, 0, I32, 'live', 'Most retained messages delivered for one subscription.'),
} as const;

/** A setting name, e.g. `MaxTopicLevels`. */
export type SettingName = keyof typeof SETTINGS;

/** The value type of a setting. */
export type SettingValue<S extends SettingName = SettingName> = S extends SettingName
  ? (typeof SETTINGS)[S]['default'] extends boolean
    ? boolean
    : number
  : never;

/** A change a {@link SettingProvider} announces: one tenant (or all, `tenantId` undefined) may have new values. */
export interface SettingChange {
  readonly tenantId?: string;
}

/**
 * A change of a tenant's overrides (SPI 1.3.0): a value sets the override, `null` removes it (the
 * provider's default, then the registry default, applies again).
 */
export type SettingUpdate = { readonly [S in SettingName]?: SettingValue<S> | null };

/**
 * Supplies per-tenant setting values. The broker asks once per tenant and setting and caches the
 * answer until the provider announces a change; `provide` must be synchronous and cheap.
 *
 * @example
 * ```ts
 * const provider: SettingProvider = {
 *   provide: (setting, tenantId) => (tenantId === 'small' && setting === 'MaxTopicLevels' ? 8 : undefined),
 * };
 * ```
 */
export interface SettingProvider extends Lifecycle {
  /** The value for a tenant, or `undefined` for the registry default. */
  provide<S extends SettingName>(setting: S, tenantId: string): SettingValue<S> | undefined;
  /** Subscribe to changes (hot reload). Returns a function that unsubscribes. */
  onChange?(listener: (change: SettingChange) => void): () => void;
  /**
   * SPI 1.3.0, writable providers: the values this provider holds for the tenant (its own overrides
   * and provider-wide defaults), by setting; what it does not set is absent.
   */
  readOverrides?(tenantId: string): Partial<Record<SettingName, SettingValue>>;
  /**
   * SPI 1.3.0, writable providers: change the tenant's overrides, durably. The broker checks every
   * value against the registry first; the provider rejects with an Error naming the setting when it
   * cannot store one. Resolves once stored, and announces the change through `onChange` (so the
   * broker's cache is dropped) before or when it resolves. (Named so that a provider written for an
   * earlier SPI with a method of its own called `update` is not taken for a writable one.)
   */
  writeOverrides?(tenantId: string, changes: SettingUpdate): Promise<void>;
}
