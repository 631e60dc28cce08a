import type {
  ClientInfo,
  InboxEntry,
  InboxMessage,
  InflightRecord,
  ProtocolVersion,
  SessionRecord,
  Storage,
  SubscriptionRecord,
  WillRecord,
} from '@bifro/spi';
import { inject, injectable } from 'tsyringe';
import { PLUGIN_TOKENS } from '../plugin-host/tokens';
import { fromStored, toStored } from './stored-message';
import type { Delivery, SessionWill } from './session-types';
import { Message } from './message';

/** What persistence reads of a session (the `Session` class, without importing it). */
export interface PersistedSession {
  readonly tenantId: string;
  readonly clientId: string;
  readonly client: ClientInfo;
  readonly protocolVersion: ProtocolVersion;
  readonly expirySeconds: number;
  readonly createdAt: number;
  readonly subscriptions: ReadonlyMap<string, SubscriptionRecord>;
  readonly will: SessionWill | undefined;
}

/** A delivery as the inbox and inflight stores keep it. */
export function toInboxMessage(d: Delivery): InboxMessage {
  return { message: toStored(d.msg), qos: d.qos, retain: d.retain, subscriptionIds: d.subscriptionIds };
}

/** A stored delivery back into one the session can send. */
export function fromInboxMessage(m: InboxMessage): Delivery {
  return {
    msg: fromStored(m.message),
    qos: m.qos,
    retain: m.retain,
    subscriptionIds: m.subscriptionIds === undefined || m.subscriptionIds.length === 0 ? undefined : m.subscriptionIds,
  };
}

function willRecord(session: PersistedSession): WillRecord | undefined {
  return session.will === undefined ? undefined : toWillRecord(session.will);
}

/** A will as storage (and the cluster's session registry) keeps it. */
export function toWillRecord(will: SessionWill): WillRecord {
  const s = toStored(will.message);
  return { topic: s.topic, payload: s.payload, qos: s.qos, retain: s.retain, properties: s.properties, delaySeconds: will.delaySeconds };
}

/** The will of a stored session as a broker message (its expiry counts from publication). */
export function willFromRecord(w: WillRecord, clientId: string, now: number): { message: Message; delaySeconds: number } {
  const stored = { topic: w.topic, payload: w.payload, qos: w.qos, retain: w.retain, properties: w.properties, publishedAt: now };
  const m = fromStored(stored, clientId);
  return {
    message: new Message(m.topic, m.payload, m.qos, m.retain, m.properties, m.publishedAt, 0, clientId),
    delaySeconds: w.delaySeconds,
  };
}

/**
 * The persistent half of sessions, over the storage SPI: session records (subscriptions, will,
 * expiry), the inbox of deliveries waiting for the client, outbound QoS 1/2 in flight and inbound
 * QoS 2 packet ids. Only sessions with a non-zero expiry are written; transient sessions live in
 * memory only.
 */
@injectable()
export class SessionPersistence {
  constructor(@inject(PLUGIN_TOKENS.Storage) readonly storage: Storage) {}

  saveRecord(session: PersistedSession, disconnectedAt?: number): Promise<void> {
    const record: SessionRecord = {
      tenantId: session.tenantId,
      clientId: session.clientId,
      userId: session.client.userId,
      protocolVersion: session.protocolVersion,
      expirySeconds: session.expirySeconds,
      createdAt: session.createdAt,
      disconnectedAt,
      subscriptions: [...session.subscriptions.values()] as SubscriptionRecord[],
      will: willRecord(session),
    };
    return this.storage.sessions.put(record);
  }

  deleteSession(session: PersistedSession): Promise<void> {
    return this.storage.sessions.delete(session.tenantId, session.clientId);
  }

  append(session: PersistedSession, d: Delivery, maxSize: number, dropOldest: boolean): Promise<{ appended: number; dropped: number }> {
    return this.storage.inbox.append(session.tenantId, session.clientId, [toInboxMessage(d)], { maxSize, dropOldest });
  }

  read(session: PersistedSession, afterSeq: number, max: number): Promise<InboxEntry[]> {
    return this.storage.inbox.read(session.tenantId, session.clientId, afterSeq, max);
  }

  commit(session: PersistedSession, uptoSeq: number): Promise<void> {
    return this.storage.inbox.commit(session.tenantId, session.clientId, uptoSeq);
  }

  count(session: PersistedSession): Promise<number> {
    return this.storage.inbox.count(session.tenantId, session.clientId);
  }

  putInflight(session: PersistedSession, records: readonly InflightRecord[]): Promise<void> {
    return this.storage.inflight.put(session.tenantId, session.clientId, records);
  }

  removeInflight(session: PersistedSession, packetIds: readonly number[]): Promise<void> {
    return this.storage.inflight.remove(session.tenantId, session.clientId, packetIds);
  }

  listInflight(session: PersistedSession): Promise<InflightRecord[]> {
    return this.storage.inflight.list(session.tenantId, session.clientId);
  }

  addIncoming(session: PersistedSession, packetId: number): Promise<void> {
    return this.storage.inflight.addIncoming(session.tenantId, session.clientId, packetId);
  }

  removeIncoming(session: PersistedSession, packetId: number): Promise<void> {
    return this.storage.inflight.removeIncoming(session.tenantId, session.clientId, packetId);
  }

  listIncoming(session: PersistedSession): Promise<number[]> {
    return this.storage.inflight.listIncoming(session.tenantId, session.clientId);
  }
}
