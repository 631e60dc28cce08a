import type { MessageProperties, StoredMessage } from '@bifro/spi';
import type { PublishProperties } from '../codec/publish-codec';
import { Message } from './message';

/** Turns broker messages into stored ones and back: the retained store, session inboxes and wills. */
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
