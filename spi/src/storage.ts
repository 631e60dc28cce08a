import type { Lifecycle, PluginContext, ProtocolVersion, QoS, UserProperties } from './common';

/** MQTT 5 message properties kept with a stored message. */
export interface MessageProperties {
  readonly payloadFormatIndicator?: boolean;
  /** Message Expiry Interval in seconds, as the publisher sent it. */
  readonly messageExpiryInterval?: number;
  readonly contentType?: string;
  readonly responseTopic?: string;
  readonly correlationData?: Uint8Array;
  readonly userProperties?: UserProperties;
}

/** An application message as the broker keeps it (retained store, inbox, inflight). */
export interface StoredMessage {
  readonly topic: string;
  readonly payload: Uint8Array;
  /** QoS the publisher used. */
  readonly qos: QoS;
  /** The RETAIN flag the publisher set. */
  readonly retain: boolean;
  readonly properties?: MessageProperties;
  /** When the broker received it, milliseconds since the epoch. */
  readonly publishedAt: number;
  /** When it expires (from Message Expiry Interval), milliseconds since the epoch; absent: never. */
  readonly expiresAt?: number;
}

/** Subscription options (MQTT 5 names; MQTT 3 sessions use the defaults). */
export interface SubscriptionOptions {
  readonly qos: QoS;
  readonly noLocal: boolean;
  readonly retainAsPublished: boolean;
  readonly retainHandling: 0 | 1 | 2;
  readonly subscriptionId?: number;
}

/** One subscription of a session. */
export interface SubscriptionRecord extends SubscriptionOptions {
  /** The topic filter as the client sent it, including any `$share/<group>/` prefix. */
  readonly filter: string;
}

/** A session's will message. */
export interface WillRecord {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: QoS;
  readonly retain: boolean;
  readonly properties?: MessageProperties;
  /** v5 Will Delay Interval in seconds (0 for MQTT 3). */
  readonly delaySeconds: number;
}

/** What survives of a persistent session while its client is away. */
export interface SessionRecord {
  readonly tenantId: string;
  readonly clientId: string;
  readonly userId: string;
  readonly protocolVersion: ProtocolVersion;
  /** Session Expiry Interval in seconds after the client disconnects (0xFFFFFFFF: never). */
  readonly expirySeconds: number;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
  /** When the client last disconnected (ms since epoch); absent while connected. */
  readonly disconnectedAt?: number;
  readonly subscriptions: readonly SubscriptionRecord[];
  readonly will?: WillRecord;
}

/** Paging for list calls: keys are returned in ascending order, starting after `after`. */
export interface PageRequest {
  readonly tenantId?: string;
  /** Exclusive start key (a client id for sessions, a topic for retained messages). */
  readonly after?: string;
  readonly limit: number;
}

/** Session records, keyed by (tenantId, clientId). */
export interface SessionStore {
  get(tenantId: string, clientId: string): Promise<SessionRecord | undefined>;
  /** Create or replace. */
  put(record: SessionRecord): Promise<void>;
  /** Remove the session, its inbox and its inflight state. */
  delete(tenantId: string, clientId: string): Promise<void>;
  /** Sessions of one tenant (or all tenants, ordered by tenant then client id) after a key. */
  list(page: PageRequest): Promise<SessionRecord[]>;
}

/** A message queued for a session, with what its delivery needs. */
export interface InboxMessage {
  readonly message: StoredMessage;
  /** Delivery QoS: min(message QoS, subscription QoS). */
  readonly qos: QoS;
  /** RETAIN flag to deliver with (retain-as-published). */
  readonly retain: boolean;
  /** v5 Subscription Identifiers of the matching subscriptions. */
  readonly subscriptionIds?: readonly number[];
}

/** A queued message and its position. Sequence numbers grow by one per append, per session. */
export interface InboxEntry extends InboxMessage {
  readonly seq: number;
}

/** How an append treats a full inbox. */
export interface InboxLimit {
  /** Most entries the inbox may hold. */
  readonly maxSize: number;
  /** When full: drop the oldest entries to make room (true), or refuse the new ones (false). */
  readonly dropOldest: boolean;
}

/** Outcome of an append. */
export interface InboxAppendResult {
  /** How many of the given messages were queued. */
  readonly appended: number;
  /** How many entries were dropped (old ones or refused new ones). */
  readonly dropped: number;
}

/** The offline queue of each persistent session. */
export interface InboxStore {
  /** Queue messages in order. Resolves once they are stored (durably, for durable backends). */
  append(tenantId: string, clientId: string, messages: readonly InboxMessage[], limit: InboxLimit): Promise<InboxAppendResult>;
  /** Up to `max` entries with seq greater than `afterSeq`, oldest first. */
  read(tenantId: string, clientId: string, afterSeq: number, max: number): Promise<InboxEntry[]>;
  /** Remove every entry with seq up to and including `uptoSeq`. */
  commit(tenantId: string, clientId: string, uptoSeq: number): Promise<void>;
  /** Number of entries, without scanning. */
  count(tenantId: string, clientId: string): Promise<number>;
}

/** An outbound QoS 1/2 message waiting for the client's acknowledgement. */
export interface InflightRecord {
  readonly packetId: number;
  /** `publish`: PUBLISH sent, awaiting PUBACK/PUBREC. `pubrel`: PUBREL sent, awaiting PUBCOMP. */
  readonly phase: 'publish' | 'pubrel';
  /** The message (phase `publish` only). */
  readonly message?: InboxMessage;
  /**
   * The seq of the inbox entry it was read from (SPI 1.4.0; absent for a message sent without
   * queueing). With a backend that writes the inflight record and the inbox commit apart (over a
   * network), a crash between the two leaves the entry in the inbox: the broker skips entries up
   * to the highest of these, so a QoS 2 message is not delivered twice.
   */
  readonly inboxSeq?: number;
}

/** QoS 1/2 state that must survive a restart for DUP redelivery and exactly-once. */
export interface InflightStore {
  /** Create or replace outbound records by packet id. */
  put(tenantId: string, clientId: string, records: readonly InflightRecord[]): Promise<void>;
  remove(tenantId: string, clientId: string, packetIds: readonly number[]): Promise<void>;
  /** Outbound records in the order they were first put. */
  list(tenantId: string, clientId: string): Promise<InflightRecord[]>;
  /** Remember an inbound QoS 2 packet id (PUBREC sent, PUBREL not yet received). */
  addIncoming(tenantId: string, clientId: string, packetId: number): Promise<void>;
  removeIncoming(tenantId: string, clientId: string, packetId: number): Promise<void>;
  listIncoming(tenantId: string, clientId: string): Promise<number[]>;
}

/** Totals of a tenant's retained messages. */
export interface RetainedTotals {
  readonly topics: number;
  /** Sum of topic and payload bytes. */
  readonly bytes: number;
}

/** Retained messages, one per (tenantId, topic). */
export interface RetainStore {
  /** Create or replace the retained message of `message.topic`. */
  put(tenantId: string, message: StoredMessage): Promise<void>;
  /** Remove; resolves true when there was one. */
  delete(tenantId: string, topic: string): Promise<boolean>;
  get(tenantId: string, topic: string): Promise<StoredMessage | undefined>;
  /**
   * Retained messages whose topic matches `filter` (MQTT wildcard rules: `+`/`#` do not match
   * topics starting with `$` at the first level), at most `limit`, expired ones left out. Must not
   * scan every retained message of the tenant for a filter with a literal first level.
   */
  match(tenantId: string, filter: string, limit: number, now: number): Promise<StoredMessage[]>;
  totals(tenantId: string): Promise<RetainedTotals>;
  /** Retained messages of a tenant ordered by topic, after a topic. */
  list(page: PageRequest & { readonly tenantId: string }): Promise<StoredMessage[]>;
}

/** What a ban applies to (SPI 1.3.0). */
export type BanKind = 'clientId' | 'user' | 'tenant' | 'address';

/**
 * A ban (SPI 1.3.0): CONNECTs it matches are refused with CONNACK 0x8A Banned (v3: 0x05) until it
 * ends or is lifted. Identified by (kind, tenantId, value).
 */
export interface BanRecord {
  readonly kind: BanKind;
  /**
   * The tenant a `clientId` or `user` ban is about, and the banned tenant for `tenant`. For
   * `address`: the one tenant whose clients are refused from the address, absent for every tenant.
   */
  readonly tenantId?: string;
  /** The client id, the user id, the tenant id, or an IPv4/IPv6 address or CIDR block (`10.0.0.0/8`). */
  readonly value: string;
  /** Why, as the operator wrote it (shown in lists and logs). */
  readonly reason?: string;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
  /** When the ban ends (ms since the epoch); absent: until lifted. */
  readonly until?: number;
  /** Who set it (the admin API token's name). */
  readonly by?: string;
}

/** Bans (SPI 1.3.0): few records, read once at boot, written when an operator bans or lifts. */
export interface BanStore {
  /** Create or replace the ban with the same (kind, tenantId, value). */
  put(ban: BanRecord): Promise<void>;
  /** Remove; resolves true when there was one. */
  delete(kind: BanKind, tenantId: string | undefined, value: string): Promise<boolean>;
  /** Every stored ban, ended ones included (the broker prunes them). */
  list(): Promise<BanRecord[]>;
}

/**
 * Where the broker keeps durable state. One storage plugin is active. Promises resolve once the
 * write is stored; a durable backend resolves after the data is on disk (it may group writes of
 * a few milliseconds into one batch).
 */
export interface Storage extends Lifecycle {
  /** true when a resolved write survives a process crash. */
  readonly durable: boolean;
  /**
   * true when the brokers of a cluster all open the same data at once (SPI 1.4.0): a persistent
   * session can then move between nodes, and a node restores only the sessions it owns. Absent:
   * each broker's own storage.
   */
  readonly shared?: boolean;
  readonly sessions: SessionStore;
  readonly inbox: InboxStore;
  readonly inflight: InflightStore;
  readonly retained: RetainStore;
  /**
   * Bans set through the admin API (SPI 1.3.0). Optional: without it bans hold only until the
   * broker stops, and the broker says so when one is set.
   */
  readonly bans?: BanStore;
  /**
   * Whether the storage can serve calls now (SPI 1.6.0, optional): synchronous and cheap. The
   * broker's `/ready` asks it at every request, and while an episode of failed storage calls lasts
   * the broker asks it every second to tell when the storage healed. A storage that recovers on
   * its own (reopening after an I/O error, repairing a damaged block) reports `ok: false` with the
   * reason until it has. Absent: the broker judges by the calls (an episode ends with the next call
   * that succeeds).
   */
  health?(): StorageHealth;
}

/** What a storage says of its own state (SPI 1.6.0). */
export interface StorageHealth {
  /** true when calls are expected to succeed. */
  readonly ok: boolean;
  /** Why not, in the storage's words (shown by `/ready` and in the broker's log); absent when ok. */
  readonly reason?: string;
}

/**
 * What `bifro storage check` and `bifro storage repair` report of a storage's data (SPI 1.6.0):
 * what it holds, what is damaged, and what a repair loses (or lost).
 */
export interface StorageReport {
  /** Where the data is: a directory, a URL. */
  readonly location: string;
  /** true when nothing is damaged and nothing was lost at recovery: no repair is needed. */
  readonly healthy: boolean;
  /** What was found or done, one sentence each, naming files and counts. */
  readonly findings: readonly string[];
  /** What the data holds and a repair keeps, by kind of record, e.g. `{ sessions: 10, 'queued messages': 300 }`. */
  readonly holds: Readonly<Record<string, number>>;
  /** What a repair drops because it cannot be read (or was already lost at recovery), by kind of record. */
  readonly loses: Readonly<Record<string, number>>;
}

/**
 * Offline maintenance of a storage plugin's data (SPI 1.6.0, optional member `storageTools` of a
 * plugin definition): what `bifro storage check` and `bifro storage repair` run, with the broker
 * stopped. The context is the one the storage factory gets (its options, the data directory).
 */
export interface StorageTools {
  /** Reads the data without changing it; reports damage and what a repair would keep and lose. */
  check(ctx: PluginContext): Promise<StorageReport>;
  /**
   * Repairs the data, keeping what can be read and dropping what cannot (what {@link check}
   * reports as lost), so the storage opens again. With `backup`, a copy of the data as it was is
   * kept first (its location is among the findings).
   */
  repair(ctx: PluginContext, options: { readonly backup: boolean }): Promise<StorageReport>;
}
