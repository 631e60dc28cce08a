/**
 * The delivery checker's data: schedules (what to run), the records clients and the broker leave
 * (what happened) and the problems the checker finds. Everything here is plain JSON, so a
 * schedule and its problems can be written to the corpus and read back.
 */

export type QoS = 0 | 1 | 2;
/** MQTT protocol level: 4 = 3.1.1, 5 = 5.0. */
export type Version = 4 | 5;
/** `nats`: the cluster target's storage-nats (a cluster schedule). */
export type StorageKind = 'level' | 'memory' | 'nats';

/** One subscription a client asks for. `filter` may start with `$share/<g>/` or `$oshare/<g>/`. */
export interface SubSpec {
  readonly filter: string;
  readonly qos: QoS;
  /** v5 No Local. */
  readonly noLocal: boolean;
}

/** How a client publishes. Each message's topic and QoS are drawn in order from `seed`. */
export interface PublishSpec {
  readonly topics: readonly string[];
  /** QoS choices (repeat one to weigh it). */
  readonly qos: readonly QoS[];
  /** Most QoS 1/2 messages unacknowledged at once. */
  readonly window: number;
  /** Pause after each publish, milliseconds (0: the next event-loop turn). */
  readonly pauseMs: number;
  readonly seed: number;
}

export interface ClientSpec {
  /** Short and unique in the schedule: p0 (publisher), s1 (subscriber), g0m1 (group member), n0 (no-local). */
  readonly name: string;
  readonly clientId: string;
  /** Index of the target node it connects to (0 for the single-node target). */
  readonly node: number;
  readonly version: Version;
  /** v5 clean start 0 with a Session Expiry Interval above 0; v3.1.1 clean session 0. */
  readonly persistent: boolean;
  /** v5 persistent: the Session Expiry Interval asked for, seconds; otherwise 0. */
  readonly expirySeconds: number;
  /** v5 Receive Maximum (absent: the client's default). */
  readonly receiveMaximum?: number;
  readonly subscriptions: readonly SubSpec[];
  readonly publish?: PublishSpec;
  /**
   * A will client (cluster schedules): v5, one connection with a will on `will/<name>` (QoS 2,
   * payload `will|<name>|<connection>`), never connecting again once that connection is gone.
   */
  readonly will?: { readonly delaySeconds: number };
}

/** Something a client does at `at` ms after the start of the fault phase. */
export type ClientAction =
  | { readonly at: number; readonly client: string; readonly kind: 'disconnect' | 'drop'; readonly offMs: number }
  | { readonly at: number; readonly client: string; readonly kind: 'takeover' }
  /** Leave (DISCONNECT or a dropped socket) and come back after `offMs`, close to the session's expiry. */
  | { readonly at: number; readonly client: string; readonly kind: 'expire'; readonly how: 'disconnect' | 'drop'; readonly offMs: number }
  /** Stop reading and acknowledging for `forMs`. */
  | { readonly at: number; readonly client: string; readonly kind: 'slow'; readonly forMs: number }
  | { readonly at: number; readonly client: string; readonly kind: 'unsubscribe'; readonly filter: string }
  | { readonly at: number; readonly client: string; readonly kind: 'subscribe'; readonly sub: SubSpec };

/** A fault of a broker node. */
export type NodeAction =
  /** SIGKILL, `downMs` down, then started again on the same data directory (durable storage only). */
  | { readonly at: number; readonly kind: 'kill'; readonly node: number; readonly downMs: number }
  /** Every storage write fails for `forMs`. */
  | { readonly at: number; readonly kind: 'storage-fail'; readonly node: number; readonly forMs: number }
  /**
   * Inbox appends are acknowledged and dropped for `forMs`: a broken broker. Never generated; the
   * self-test of test/e2e/49 uses it to see the checker fail.
   */
  | { readonly at: number; readonly kind: 'storage-lose'; readonly node: number; readonly forMs: number }
  /** Cluster: SIGSTOP of a node, SIGCONT after `forMs`. */
  | { readonly at: number; readonly kind: 'pause'; readonly node: number; readonly forMs: number }
  /** Cluster: the node cut off from every NATS server by its proxies for `forMs`. */
  | { readonly at: number; readonly kind: 'partition'; readonly node: number; readonly forMs: number }
  /** Cluster: `kill -9` of NATS server `server`, started again after `downMs`. */
  | { readonly at: number; readonly kind: 'nats-kill'; readonly node: -1; readonly server: number; readonly downMs: number }
  /** Cluster: every NATS server killed (`kill -9`) and started again after `downMs`. */
  | { readonly at: number; readonly kind: 'nats-restart'; readonly node: -1; readonly downMs: number };

export interface Schedule {
  readonly seed: number;
  readonly index: number;
  readonly storage: StorageKind;
  /** Every client logs in as `<tenant>/<name>`: one tenant per schedule. */
  readonly tenant: string;
  /** Per-tenant settings for the settings-file plugin (SessionInboxSize, QoS0DropOldest). */
  readonly settings: Readonly<Record<string, number | boolean>>;
  /** Length of the fault phase, ms. */
  readonly durationMs: number;
  readonly topics: readonly string[];
  readonly clients: readonly ClientSpec[];
  readonly actions: readonly ClientAction[];
  readonly nodeActions: readonly NodeAction[];
  /** A cluster schedule: the target it runs on (absent: the single-node target). */
  readonly cluster?: { readonly nodes: number; readonly natsServers: number; readonly maxFaultMs: number };
}

// ---------------------------------------------------------------------------------------------
// Records

/** What one client saw and did; `t` is ms since the epoch (Date.now()), `conn` numbers its connections from 1. */
export type ClientEvent =
  /** `node`: the node it connects to (cluster targets, where clients fail over). */
  | { readonly t: number; readonly conn: number; readonly type: 'connect'; readonly clean: boolean; readonly node?: number }
  | { readonly t: number; readonly conn: number; readonly type: 'connack'; readonly sessionPresent: boolean; readonly reason: number }
  | { readonly t: number; readonly conn: number; readonly type: 'connect-failed'; readonly error: string }
  | { readonly t: number; readonly conn: number; readonly type: 'subscribe'; readonly op: number; readonly subs: readonly SubSpec[] }
  | { readonly t: number; readonly conn: number; readonly type: 'suback'; readonly op: number; readonly granted: readonly number[] }
  | { readonly t: number; readonly conn: number; readonly type: 'unsubscribe'; readonly op: number; readonly filters: readonly string[] }
  | { readonly t: number; readonly conn: number; readonly type: 'unsuback'; readonly op: number; readonly reasons: readonly number[] }
  /** A PUBLISH this client sent (`msg` from its payload). */
  | {
      readonly t: number;
      readonly conn: number;
      readonly type: 'publish';
      readonly msg: string;
      readonly topic: string;
      readonly qos: QoS;
      readonly packetId: number;
    }
  /** PUBACK (QoS 1) or PUBREC (QoS 2) for one of this client's PUBLISH. */
  | {
      readonly t: number;
      readonly conn: number;
      readonly type: 'ack';
      readonly msg: string;
      readonly packet: 'puback' | 'pubrec';
      readonly reason: number;
    }
  /** A PUBLISH packet the broker sent to this client. */
  | {
      readonly t: number;
      readonly conn: number;
      readonly type: 'recv';
      readonly msg: string;
      readonly topic: string;
      readonly qos: QoS;
      readonly dup: boolean;
      readonly packetId: number;
    }
  /** A PUBREL from the broker (the release of a QoS 2 message this client received). */
  | { readonly t: number; readonly conn: number; readonly type: 'pubrel'; readonly packetId: number }
  /** The client library handed a message to the application (QoS 2: at PUBREL). */
  | { readonly t: number; readonly conn: number; readonly type: 'deliver'; readonly msg: string; readonly topic: string; readonly qos: QoS }
  /** A fault or phase the driver acted out (disconnect, drop, takeover, expire, slow, fast, drain...). */
  | { readonly t: number; readonly conn: number; readonly type: 'fault'; readonly fault: string }
  /** A DISCONNECT from the broker (v5). */
  | { readonly t: number; readonly conn: number; readonly type: 'server-disconnect'; readonly reason: number }
  | { readonly t: number; readonly conn: number; readonly type: 'close' }
  | { readonly t: number; readonly conn: number; readonly type: 'error'; readonly message: string };

export interface ClientRecord {
  readonly spec: ClientSpec;
  readonly events: ClientEvent[];
}

/** A fault of a node as the runner carried it out. */
export interface NodeEvent {
  readonly t: number;
  /** The node, or -1 for the NATS servers. */
  readonly node: number;
  readonly type:
    | 'kill'
    | 'restart'
    | 'storage-fail'
    | 'storage-lose'
    | 'storage-ok'
    | 'pause'
    | 'resume'
    | 'partition'
    | 'heal'
    | 'nats-kill'
    | 'nats-restart'
    | 'nats-up';
  /** For NATS events: which server (absent: all). */
  readonly server?: number;
}

/** An event line of @bifro/plugin-events-log (only the fields the checker uses). */
export interface BrokerEvent {
  readonly node: number;
  readonly type: string;
  readonly tenantId?: string;
  readonly clientId?: string;
  readonly eventTime: number;
  readonly topic?: string;
  readonly reason?: string;
  /** The event's group (`clientConnected`, `clientDisconnected`, `session`...). */
  readonly group?: string;
}

/** Everything a run of one schedule left behind. */
export interface RunRecord {
  readonly schedule: Schedule;
  /** Start of the fault phase (t of the schedule's `at` 0). */
  readonly t0: number;
  /** End of the fault phase: no new fault, publishers stop. */
  readonly faultEnd: number;
  /** Faults cleared and publishers stopped: connected clients keep their connections until the drain. */
  readonly settleStart: number;
  /** Every persistent client reconnects from here on. */
  readonly drainStart: number;
  readonly end: number;
  /** The drain stopped at its time bound with required messages still missing. */
  readonly drainCut?: boolean;
  /** The tenant the run used: the schedule's, with a suffix of the run. */
  readonly tenant: string;
  readonly clients: readonly ClientRecord[];
  readonly nodes: readonly NodeEvent[];
  readonly broker: readonly BrokerEvent[];
}

/** One thing the checker found wrong, with the lines that explain it. */
export interface Problem {
  readonly kind:
    | 'lost'
    | 'order'
    | 'duplicate'
    | 'after-unsubscribe'
    | 'before-session'
    | 'no-local'
    | 'wrong-qos'
    | 'wrong-topic'
    | 'session-lost'
    | 'session-outlived'
    | 'session-present'
    | 'drain'
    | 'stalled'
    | 'broker'
    | 'two-owners'
    | 'lease'
    | 'will'
    | 'routes';
  /** One line: what is wrong. */
  readonly summary: string;
  /** What the clients saw around it. */
  readonly details: readonly string[];
  /** `lost`: when the missing messages were acknowledged (ms since the epoch). */
  readonly acks?: readonly number[];
}

// ---------------------------------------------------------------------------------------------
// Payloads and topics

/** The identity of a message, carried as its payload: `<tenant>|<publisher>|<seq>|<topic>|<qos>`. */
export interface MsgId {
  readonly publisher: string;
  readonly seq: number;
  readonly topic: string;
  readonly qos: QoS;
}

export function encodePayload(tenant: string, m: MsgId): string {
  return `${tenant}|${m.publisher}|${m.seq}|${m.topic}|${m.qos}`;
}

/** The key of a message in records: `<publisher>:<seq>`. */
export function msgKey(m: Pick<MsgId, 'publisher' | 'seq'>): string {
  return `${m.publisher}:${m.seq}`;
}

export function decodePayload(payload: string): (MsgId & { tenant: string }) | undefined {
  const parts = payload.split('|');
  if (parts.length !== 5) return undefined;
  const seq = Number(parts[2]);
  const qos = Number(parts[4]);
  if (!Number.isInteger(seq) || (qos !== 0 && qos !== 1 && qos !== 2)) return undefined;
  return { tenant: parts[0]!, publisher: parts[1]!, seq, topic: parts[3]!, qos };
}

/** A filter without its `$share/<g>/` or `$oshare/<g>/` prefix, and the kind of share. */
export function parseFilter(filter: string): { share?: '$share' | '$oshare'; group?: string; filter: string } {
  const m = /^(\$share|\$oshare)\/([^/]+)\/(.*)$/.exec(filter);
  if (m === null) return { filter };
  return { share: m[1] as '$share' | '$oshare', group: m[2]!, filter: m[3]! };
}

/** MQTT topic matching (`+` one level, `#` the rest including the parent; `$` topics not matched by a leading wildcard). */
export function topicMatches(filter: string, topic: string): boolean {
  const f = parseFilter(filter).filter.split('/');
  const t = topic.split('/');
  if (topic.startsWith('$') && (f[0] === '+' || f[0] === '#')) return false;
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true;
    if (i >= t.length) return false;
    if (f[i] !== '+' && f[i] !== t[i]) return false;
  }
  return f.length === t.length;
}
