import type { Clock } from '../clock';
import type { MessageProperties, Storage, StoredMessage } from '@bifro/spi';
import type { PublishProperties } from '../protocol/codec/publish-codec';
import { Message } from '../session/message';

/** Turns broker messages into stored ones and back, for the retained store (and later the inbox). */
export function toStored(msg: Message): StoredMessage {
  const p = msg.properties;
  let properties: MessageProperties | undefined;
  if (p !== undefined) {
    properties = {
      payloadFormatIndicator: p.payloadFormatIndicator,
      messageExpiryInterval: p.messageExpiryInterval,
      contentType: p.contentType,
      responseTopic: p.responseTopic,
      correlationData: p.correlationData,
      userProperties: p.userProperties,
    };
  }
  return {
    topic: msg.topic,
    payload: msg.payload,
    qos: msg.qos,
    retain: msg.retain,
    properties,
    publishedAt: msg.publishedAt,
    expiresAt: msg.expiresAt === 0 ? undefined : msg.expiresAt,
  };
}

export function fromStored(stored: StoredMessage, publisherClientId = ''): Message {
  const sp = stored.properties;
  let properties: PublishProperties | undefined;
  if (sp !== undefined) {
    properties = {};
    if (sp.payloadFormatIndicator !== undefined) properties.payloadFormatIndicator = sp.payloadFormatIndicator;
    if (sp.contentType !== undefined) properties.contentType = sp.contentType;
    if (sp.responseTopic !== undefined) properties.responseTopic = sp.responseTopic;
    if (sp.correlationData !== undefined) properties.correlationData = Buffer.from(sp.correlationData);
    if (sp.userProperties !== undefined) properties.userProperties = sp.userProperties.map(([k, v]) => [k, v]);
  }
  return new Message(
    stored.topic,
    Buffer.isBuffer(stored.payload) ? stored.payload : Buffer.from(stored.payload),
    stored.qos,
    stored.retain,
    properties,
    stored.publishedAt,
    stored.expiresAt ?? 0,
    publisherClientId,
  );
}

/**
 * Retained messages over the storage SPI: one per (tenant, topic). A PUBLISH with RETAIN and an
 * empty payload clears the topic [MQTT-3.3.1-10], [MQTT-3.3.1-11]; any other replaces it
 * [MQTT-3.3.1-5].
 */
export class RetainService {
  /** The last retained write issued per tenant: a match waits for it, so it sees every write issued before it. */
  private readonly lastWrite = new Map<string, Promise<unknown>>();

  constructor(
    private readonly storage: Storage,
    /** The broker's clock: what has expired is decided against it. */
    private readonly clock: Clock,
  ) {}

  /** Store or clear; resolves with what happened. */
  apply(tenantId: string, msg: Message): Promise<'retained' | 'cleared'> {
    const write: Promise<'retained' | 'cleared'> =
      msg.payload.length === 0
        ? this.storage.retained.delete(tenantId, msg.topic).then(() => 'cleared' as const)
        : this.storage.retained.put(tenantId, toStored(msg)).then(() => 'retained' as const);
    this.track(tenantId, write);
    return write;
  }

  /** Make matches of the tenant wait for `work` too (a retained write that is still being decided). */
  track(tenantId: string, work: Promise<unknown>): void {
    this.lastWrite.set(tenantId, work);
    const forget = (): void => {
      if (this.lastWrite.get(tenantId) === work) this.lastWrite.delete(tenantId);
    };
    work.then(forget, forget);
  }

  /** Whether a topic has a retained message. */
  async has(tenantId: string, topic: string): Promise<boolean> {
    return (await this.storage.retained.get(tenantId, topic)) !== undefined;
  }

  /** The tenant's retained topics and bytes, as the store counts them. */
  totals(tenantId: string): Promise<{ topics: number; bytes: number }> {
    return this.storage.retained.totals(tenantId);
  }

  /** Retained messages matching a filter, expired ones left out, at most `limit`. */
  async match(tenantId: string, filter: string, limit: number): Promise<Message[]> {
    if (limit <= 0) return [];
    const pending = this.lastWrite.get(tenantId);
    if (pending !== undefined) await pending.catch(() => undefined);
    const now = this.clock();
    const found = await this.storage.retained.match(tenantId, filter, limit, now);
    return found.map((s) => fromStored(s));
  }
}
