import { isUtf8 } from 'node:buffer';
import type { QoS, StoredMessage } from '@bifro/spi';
import type { Engine } from '../broker/engine';
import type { PublishProperties } from '../codec/publish-codec';
import { Message } from '../session/message';
import { MQTT_MAX_STRING_BYTES, PROTOCOL_TOPIC_LIMITS, validateTopicName, type TopicLimits } from '../routing/topic';
import { isReservedTopic } from '../security/secure-defaults';
import { ApiError } from './api-errors';

/**
 * Application messages as the admin API reads and writes them (publish, retained): the payload as
 * UTF-8 text or base64, the MQTT 5 properties as JSON, with the checks an MQTT PUBLISH gets.
 */

/** The largest Message Expiry Interval MQTT can carry (a four-byte integer). */
const U32 = 0xffffffff;

/** The `tenant` path parameter of every tenant resource. */
export const TENANT_PARAMS = {
  type: 'object',
  required: ['tenant'],
  properties: { tenant: { type: 'string', minLength: 1, maxLength: MQTT_MAX_STRING_BYTES, description: 'The tenant id.' } },
} as const;

/** MQTT 5 properties in a request body (publish, retained set). */
export const PROPERTIES_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  description: 'MQTT 5 PUBLISH properties; MQTT 3 subscribers get the message without them.',
  properties: {
    messageExpiryInterval: { type: 'integer', minimum: 0, maximum: U32, description: 'Seconds until the message expires.' },
    contentType: { type: 'string', maxLength: MQTT_MAX_STRING_BYTES, description: 'Content Type, e.g. `application/json`.' },
    responseTopic: { type: 'string', minLength: 1, maxLength: MQTT_MAX_STRING_BYTES, description: 'Response Topic (no wildcards).' },
    correlationData: { type: 'string', maxLength: 4 * 65535, description: 'Correlation Data, base64.' },
    userProperties: {
      type: 'object',
      description: 'User Properties: a name and its value, or a list of values for a name given several times.',
      additionalProperties: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
    },
    payloadFormatIndicator: {
      type: 'boolean',
      description: 'true: the payload is UTF-8 text (checked when PayloadFormatValidationEnabled).',
    },
  },
} as const;

/** Payload fields of a request body: exactly one of them. */
export const PAYLOAD_PROPERTIES = {
  payload: { type: 'string', description: 'The payload as UTF-8 text. Exactly one of payload and payloadBase64.' },
  payloadBase64: { type: 'string', description: 'The payload as base64 (binary payloads).' },
} as const;

/** A stored message in an answer: the payload as text when it is UTF-8, and always as base64. */
export const MESSAGE_VIEW_SCHEMA = {
  type: 'object',
  required: ['topic', 'payloadBase64', 'qos', 'publishedAt'],
  properties: {
    topic: { type: 'string' },
    payload: { type: 'string', description: 'The payload as UTF-8 text; absent when it is not valid UTF-8.' },
    payloadBase64: { type: 'string' },
    qos: { type: 'integer', enum: [0, 1, 2] },
    publishedAt: { type: 'string', format: 'date-time', description: 'When the broker received it.' },
    expiresAt: { type: 'string', format: 'date-time', description: 'When it expires (Message Expiry Interval); absent: never.' },
    properties: {
      type: 'object',
      properties: {
        messageExpiryInterval: { type: 'integer' },
        contentType: { type: 'string' },
        responseTopic: { type: 'string' },
        correlationData: { type: 'string', description: 'base64' },
        userProperties: {
          type: 'object',
          additionalProperties: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
        },
        payloadFormatIndicator: { type: 'boolean' },
      },
    },
  },
} as const;

/** The properties of a request body, as the JSON schema above lets them through. */
export interface PropertiesBody {
  readonly messageExpiryInterval?: number;
  readonly contentType?: string;
  readonly responseTopic?: string;
  readonly correlationData?: string;
  readonly userProperties?: Readonly<Record<string, string | readonly string[]>>;
  readonly payloadFormatIndicator?: boolean;
}

/** A request body with a payload. */
export interface PayloadBody {
  readonly payload?: string;
  readonly payloadBase64?: string;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Bytes of a base64 field; 400 naming `field` when it is not base64. */
export function base64Bytes(value: string, field: string): Buffer {
  const compact = value.replace(/\s+/g, '');
  if (!BASE64.test(compact) || compact.length % 4 === 1) throw invalid(`${field}: not base64`);
  return Buffer.from(compact, 'base64');
}

/** The payload of a body: exactly one of `payload` (UTF-8) and `payloadBase64`. */
export function payloadOf(body: PayloadBody): Buffer {
  if ((body.payload === undefined) === (body.payloadBase64 === undefined))
    throw invalid('body: exactly one of payload (UTF-8 text) and payloadBase64 is required');
  if (body.payload !== undefined) {
    const bytes = Buffer.from(body.payload, 'utf8');
    // A lone surrogate cannot be UTF-8 encoded: refused rather than sent as U+FFFD.
    if (bytes.toString('utf8') !== body.payload)
      throw invalid('body/payload: not valid Unicode text (a lone surrogate); use payloadBase64');
    return bytes;
  }
  return base64Bytes(body.payloadBase64!, 'body/payloadBase64');
}

/**
 * Checks a topic a message is published or retained to, like a PUBLISH's: a valid topic name
 * within the tenant's limits [MQTT-3.3.2-2], [MQTT-4.7.3-1], and not one the broker reserves
 * (`$SYS`, `$share/`, `$oshare/`), which clients may not publish to either.
 */
export function checkPublishTopic(topic: string, limits: TopicLimits, field: string): void {
  const check = validateTopicName(topic, limits);
  if (!check.ok) throw invalid(`${field}: invalid topic ${JSON.stringify(topic)} (${check.reason}${limitHint(check.reason)})`);
  if (isReservedTopic(topic)) throw invalid(`${field}: ${JSON.stringify(topic)} is reserved for the broker ($SYS, $share/, $oshare/)`);
}

/** A topic named in a path (read or clear a retained message): any valid topic name. */
export function checkTopicName(topic: string, field: string): void {
  const check = validateTopicName(topic, PROTOCOL_TOPIC_LIMITS);
  if (!check.ok) throw invalid(`${field}: invalid topic ${JSON.stringify(topic)} (${check.reason})`);
}

function limitHint(reason: string): string {
  if (reason === 'too-long') return ': above the tenant setting MaxTopicLength';
  if (reason === 'too-many-levels') return ': above the tenant setting MaxTopicLevels';
  if (reason === 'level-too-long') return ': above the tenant setting MaxTopicLevelLength';
  return '';
}

/**
 * A UTF-8 string property as MQTT requires: well-formed, no U+0000 [MQTT-1.5.4-1], [MQTT-1.5.4-2],
 * at most 65535 bytes.
 */
function checkString(value: string, field: string): void {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.toString('utf8') !== value) throw invalid(`${field}: not valid Unicode text (a lone surrogate)`);
  if (bytes.includes(0)) throw invalid(`${field}: contains U+0000, which MQTT strings may not`);
  if (bytes.length > MQTT_MAX_STRING_BYTES) throw invalid(`${field}: longer than ${MQTT_MAX_STRING_BYTES} bytes`);
}

/** The PUBLISH properties of a body, checked like an MQTT 5 PUBLISH's; undefined when there are none. */
export function propertiesOf(body: PropertiesBody | undefined): PublishProperties | undefined {
  if (body === undefined) return undefined;
  const out: PublishProperties = {};
  let any = false;
  if (body.messageExpiryInterval !== undefined) {
    out.messageExpiryInterval = body.messageExpiryInterval;
    any = true;
  }
  if (body.contentType !== undefined) {
    checkString(body.contentType, 'body/properties/contentType');
    out.contentType = body.contentType;
    any = true;
  }
  if (body.responseTopic !== undefined) {
    // A Response Topic is a topic name: no wildcards [MQTT-3.3.2-14].
    const check = validateTopicName(body.responseTopic, PROTOCOL_TOPIC_LIMITS);
    if (!check.ok) throw invalid(`body/properties/responseTopic: invalid topic (${check.reason})`);
    out.responseTopic = body.responseTopic;
    any = true;
  }
  if (body.correlationData !== undefined) {
    const data = base64Bytes(body.correlationData, 'body/properties/correlationData');
    if (data.length > 65535) throw invalid('body/properties/correlationData: longer than 65535 bytes');
    out.correlationData = data;
    any = true;
  }
  if (body.userProperties !== undefined) {
    const pairs: [string, string][] = [];
    for (const [name, value] of Object.entries(body.userProperties)) {
      checkString(name, 'body/properties/userProperties');
      for (const v of typeof value === 'string' ? [value] : value) {
        checkString(v, `body/properties/userProperties/${name}`);
        pairs.push([name, v]);
      }
    }
    if (pairs.length > 0) {
      out.userProperties = pairs;
      any = true;
    }
  }
  if (body.payloadFormatIndicator !== undefined) {
    out.payloadFormatIndicator = body.payloadFormatIndicator;
    any = true;
  }
  return any ? out : undefined;
}

/** A QoS from a body (the schema allows 0, 1, 2 only). */
export function qosOf(value: number | undefined): QoS {
  return (value ?? 0) as QoS;
}

/** Whether a Payload Format Indicator 1 payload is UTF-8 [MQTT-3.3.2-4] (400 when it is not and the tenant checks it). */
export function checkPayloadFormat(payload: Buffer, properties: PublishProperties | undefined, validate: boolean): void {
  if (properties?.payloadFormatIndicator === true && validate && !isUtf8(payload))
    throw invalid('body: payloadFormatIndicator is true but the payload is not UTF-8 (tenant setting PayloadFormatValidationEnabled)');
}

/** The body of an admin publish or retained set: payload, QoS and v5 properties. */
export interface MessageBody extends PayloadBody {
  readonly qos?: number;
  readonly properties?: PropertiesBody;
}

/**
 * The application message of an admin publish or retained set, checked as a client's PUBLISH is
 * against its CONNACK [MQTT-3.2.2-11], [MQTT-3.2.2-14], with the tenant's current settings:
 * MaximumQoS, RetainEnabled (when `retain`), MaxUserPayloadBytes, the payload format. Its expiry
 * counts from now. The topic is the caller's to check.
 */
export function checkedMessage(engine: Engine, tenantId: string, topic: string, body: MessageBody, retain: boolean): Message {
  const payload = payloadOf(body);
  const qos = qosOf(body.qos);
  const maxQoS = engine.setting(tenantId, 'MaximumQoS');
  if (qos > maxQoS) throw invalid(`body/qos: ${qos} is above the tenant's MaximumQoS ${maxQoS}`);
  if (retain && !engine.setting(tenantId, 'RetainEnabled'))
    throw invalid('retain: the tenant has RetainEnabled false (retained messages are refused)');
  const maxPayload = engine.setting(tenantId, 'MaxUserPayloadBytes');
  if (payload.length > maxPayload)
    throw invalid(`body: a payload of ${payload.length} bytes is above the tenant's MaxUserPayloadBytes ${maxPayload}`);
  const properties = propertiesOf(body.properties);
  checkPayloadFormat(payload, properties, engine.setting(tenantId, 'PayloadFormatValidationEnabled'));
  const now = engine.now();
  const expiry = properties?.messageExpiryInterval;
  return new Message(topic, payload, qos, retain, properties, now, expiry === undefined ? 0 : now + expiry * 1000, '');
}

/** A stored message as an answer shows it. */
export function messageView(m: StoredMessage): Record<string, unknown> {
  const payload = Buffer.from(m.payload.buffer, m.payload.byteOffset, m.payload.byteLength);
  const view: Record<string, unknown> = { topic: m.topic };
  if (isUtf8(payload)) view.payload = payload.toString('utf8');
  view.payloadBase64 = payload.toString('base64');
  view.qos = m.qos;
  view.publishedAt = new Date(m.publishedAt).toISOString();
  if (m.expiresAt !== undefined) view.expiresAt = new Date(m.expiresAt).toISOString();
  const p = m.properties;
  if (p !== undefined) {
    const props: Record<string, unknown> = {};
    if (p.messageExpiryInterval !== undefined) props.messageExpiryInterval = p.messageExpiryInterval;
    if (p.contentType !== undefined) props.contentType = p.contentType;
    if (p.responseTopic !== undefined) props.responseTopic = p.responseTopic;
    if (p.correlationData !== undefined) props.correlationData = Buffer.from(p.correlationData).toString('base64');
    if (p.userProperties !== undefined && p.userProperties.length > 0) {
      const user: Record<string, string | string[]> = {};
      for (const [name, value] of p.userProperties) {
        const had = user[name];
        user[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
      }
      props.userProperties = user;
    }
    if (p.payloadFormatIndicator !== undefined) props.payloadFormatIndicator = p.payloadFormatIndicator;
    if (Object.keys(props).length > 0) view.properties = props;
  }
  return view;
}

function invalid(message: string): ApiError {
  return new ApiError('BIFRO_API_INVALID_REQUEST', message);
}
