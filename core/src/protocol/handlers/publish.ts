import { isUtf8 } from 'node:buffer';
import type { AccessAction } from '@bifro/spi';
import type { ConnectionPort } from '../connection-port';
import { receivedEncoding, type DecodedPublish } from '../../codec/publish-codec';
import { validateTopicName } from '../../routing/topic';
import { Message } from '../../session/message';
import { RC } from '../../codec/reason-codes';
import { PublishAck } from '../publish-ack';
import { ackTypeFor, PACKET } from '../../codec/packet-types';
import { isReservedTopic } from '../../security/secure-defaults';
import { publishAccepted } from '../../broker/accepted-publish';

/**
 * PUBLISH from a client: resolve a topic alias, validate, check rate, size, QoS, retain and
 * permission, then distribute and retain (broker/accepted-publish.ts, shared with the admin API's
 * publish) and acknowledge: QoS 1 PUBACK after distribution (§4.3.2); QoS 2 delivered once on the
 * first PUBLISH, PUBREC for it and for any duplicate until PUBREL (§4.3.3).
 */
export function handlePublish(conn: ConnectionPort, p: DecodedPublish, frame: Buffer): void {
  const client = conn.client!;
  const session = conn.session!;
  const engine = conn.engine;
  const tenantId = client.tenantId;

  // Topic alias (v5) (§3.3.2): 0 and values above our maximum are invalid.
  let topic = p.topic;
  const alias = p.properties?.topicAlias;
  if (alias !== undefined) {
    if (alias === 0 || alias > conn.topicAliasMaximumIn) {
      conn.protocolError(RC.TopicAliasInvalid, `topic alias ${alias} out of range`, 'protocolViolation');
      return;
    }
    if (topic.length > 0) (conn.aliasesIn ??= [])[alias] = topic;
    else {
      const known = conn.aliasesIn?.[alias];
      if (known === undefined) {
        conn.protocolError(RC.ProtocolError, `unknown topic alias ${alias}`, 'protocolViolation');
        return;
      }
      topic = known;
    }
  }
  if (topic.length === 0 && alias === undefined) {
    // A zero-length topic without a Topic Alias is a protocol error (§3.3.2.3.4; 3.1.1 [MQTT-4.7.3-1]: closed).
    conn.protocolError(RC.ProtocolError, 'empty topic without a topic alias', 'invalidTopic');
    return;
  }
  let live = conn.live;
  if (live.stale) live = conn.refreshLiveLimits();
  const check = validateTopicName(topic, live.topic);
  if (!check.ok) {
    // Wildcards, U+0000, empty topics and limit breaches: Topic Name invalid [MQTT-3.3.2-2].
    conn.protocolError(RC.TopicNameInvalid, `invalid topic (${check.reason})`, 'invalidTopic');
    return;
  }

  const maxRate = live.msgPubPerSec;
  if (maxRate > 0 && conn.overPublishRate(maxRate)) {
    conn.protocolError(RC.MessageRateTooHigh, 'publish rate above MsgPubPerSec', 'exceedPubRate');
    return;
  }
  const limits = conn.limits;
  if (p.qos > limits.maximumQoS) {
    // QoS above the Maximum QoS we announced [MQTT-3.2.2-11].
    conn.protocolError(RC.QoSNotSupported, `QoS ${p.qos} not supported`, 'protocolViolation');
    return;
  }
  if (p.retain && !limits.retainEnabled) {
    // Retain not available [MQTT-3.2.2-14].
    conn.protocolError(RC.RetainNotSupported, 'retain not supported', 'protocolViolation');
    return;
  }
  if (p.payload.length > limits.maxUserPayloadBytes) {
    conn.protocolError(RC.PacketTooLarge, `payload of ${p.payload.length} bytes above MaxUserPayloadBytes`, 'oversizePacketDropped');
    return;
  }

  if (p.qos === 2) {
    if (session.inboundQoS2.has(p.packetId)) {
      // A duplicate before PUBREL: acknowledge again, do not deliver again [MQTT-4.3.3-9].
      conn.sendAck(PACKET.PUBREC, p.packetId, 0, topic);
      return;
    }
    if (session.inboundQoS2.size >= limits.receivingMaximum) {
      // More unacknowledged QoS 2 than our Receive Maximum [MQTT-3.3.4-7].
      conn.protocolError(RC.ReceiveMaximumExceeded, 'receive maximum exceeded', 'receiveLimitExceeded');
      return;
    }
  }

  if (p.properties?.payloadFormatIndicator === true && engine.setting(tenantId, 'PayloadFormatValidationEnabled') && !isUtf8(p.payload)) {
    // Payload Format Indicator 1 promises UTF-8 [MQTT-3.3.2-4]: refuse what is not.
    if (p.qos === 0) conn.protocolError(RC.PayloadFormatInvalid, 'payload is not UTF-8', 'protocolViolation');
    else conn.sendAck(ackTypeFor(p.qos), p.packetId, conn.v5 ? RC.PayloadFormatInvalid : 0, topic);
    return;
  }

  if (isReservedTopic(topic)) {
    // `$SYS`, `$SYS/...`, `$share/...`, `$oshare/...` are not for clients to publish to: refused like an ACL denial, before the ACL is asked.
    accept(conn, p, frame, topic, false);
    return;
  }
  const action: AccessAction = { type: 'publish', topic, qos: p.qos, retain: p.retain };
  const allowed = engine.acl.check(client, action);
  if (allowed instanceof Promise) {
    conn.hold(allowed.then((ok) => accept(conn, p, frame, topic, ok)));
  } else {
    accept(conn, p, frame, topic, allowed);
  }
}

function accept(conn: ConnectionPort, p: DecodedPublish, frame: Buffer, topic: string, allowed: boolean): void {
  if (conn.state === 'closed') return;
  const engine = conn.engine;
  const client = conn.client!;
  if (!allowed) {
    engine.emit('pubActionDisallow', client, { topic, qos: p.qos });
    // v5: Not authorized on the acknowledgement; v3 cannot say no: acknowledged and dropped.
    if (p.qos > 0) conn.sendAck(ackTypeFor(p.qos as 1 | 2), p.packetId, conn.v5 ? RC.NotAuthorized : 0, topic);
    return;
  }
  const now = engine.wheel.clock();
  const props = p.properties;
  let properties = props;
  if (props !== undefined && props.topicAlias !== undefined) {
    // The alias is this connection's; it is not forwarded (§3.3.2).
    properties = { ...props };
    delete properties.topicAlias;
  }
  const expiry = props?.messageExpiryInterval;
  const msg = new Message(
    topic,
    p.payload,
    p.qos,
    p.retain,
    properties,
    now,
    expiry === undefined ? 0 : now + expiry * 1000,
    client.clientId,
  );
  // Without DUP and properties (so no topic alias), the PUBLISH as received is already the
  // encoding of its own variant: subscribers of that variant get these bytes, nothing is encoded.
  // The frame is a slice of a chunk read for this connection alone, like the payload it holds.
  if (properties === undefined && !p.dup) msg.adoptEncoding(conn.v5, p.qos, p.retain, receivedEncoding(frame));
  if (p.qos === 0) {
    publishAccepted(engine, client, conn.tenant, msg, undefined);
    return;
  }
  // QoS 1/2: acknowledged once what storage must keep is written (persistent subscribers'
  // inboxes, the retained message, our own QoS 2 packet id), in PUBLISH order.
  const ack = new PublishAck(conn, ackTypeFor(p.qos), p.packetId, topic);
  const matched = publishAccepted(engine, client, conn.tenant, msg, ack);
  const session = conn.session!;
  if (p.qos === 2) {
    session.inboundQoS2.add(p.packetId);
    if (session.persistent) ack.add(engine.persistence.addIncoming(session, p.packetId), session, 'incoming add');
  }
  ack.reasonCode = matched === 0 && conn.v5 ? RC.NoMatchingSubscribers : 0;
  conn.queueAck(ack);
}
