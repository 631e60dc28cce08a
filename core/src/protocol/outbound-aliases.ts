import type { Delivery } from '../session/session';
import { encodePublish } from '../codec/publish-codec';

/**
 * The topic aliases the broker has told a v5 client (§3.3.2.3.4): topic → alias, in the order the
 * mappings were made (the oldest first). A connection allocates it at its first aliased PUBLISH.
 */
export type OutboundAliases = Map<string, number>;

/**
 * Encode a v5 PUBLISH with its Message Expiry Interval, Subscription Identifiers and, when the
 * client accepts topic aliases (`aliases` given, up to `maximum`), a topic alias: a known topic
 * goes as its alias alone; a new one gets the next alias, or, when every alias is in use, the
 * oldest mapping is re-bound to it (the PUBLISH carries topic and alias, which tells the client).
 * A mapping counts only once a PUBLISH carrying it was sent: not when the packet is over the
 * client's Maximum Packet Size (`maxPacketSize`), as the connection then drops it.
 */
export function encodeV5Publish(
  d: Delivery,
  packetId: number,
  dup: boolean,
  expiry: number | undefined,
  aliases: OutboundAliases | undefined,
  maximum: number,
  maxPacketSize: number,
): Buffer {
  const msg = d.msg;
  let topicAlias: number | undefined;
  let omitTopic = false;
  let newAlias = false;
  let replaced: string | undefined;
  if (aliases !== undefined) {
    topicAlias = aliases.get(msg.topic);
    if (topicAlias !== undefined) omitTopic = true;
    else if (aliases.size < maximum) {
      topicAlias = aliases.size + 1;
      newAlias = true;
    } else {
      replaced = aliases.keys().next().value as string;
      topicAlias = aliases.get(replaced);
      newAlias = true;
    }
  }
  const buf = encodePublish(msg, {
    qos: d.qos,
    retain: d.retain,
    dup,
    packetId,
    v5: true,
    messageExpiryInterval: expiry,
    subscriptionIds: d.subscriptionIds,
    topicAlias,
    omitTopic,
  }).buf;
  if (newAlias && buf.length <= maxPacketSize) {
    if (replaced !== undefined) aliases!.delete(replaced);
    aliases!.set(msg.topic, topicAlias!);
  }
  return buf;
}
