import mqttPacket, { type IPublishPacket } from 'mqtt-packet';
import { Message } from '../../src/session/message';
import type { Delivery } from '../../src/session/session';
import { encodeV5Publish, type OutboundAliases } from '../../src/protocol/outbound-aliases';

/** Outbound topic aliases (§3.3.2.3.4) alone: which alias each PUBLISH carries and when a mapping counts. */

function delivery(topic: string, payload = 'x'): Delivery {
  return {
    msg: new Message(topic, Buffer.from(payload), 1, false, undefined, 0, 0, 'pub'),
    qos: 1,
    retain: false,
    subscriptionIds: undefined,
  };
}

function parse(buf: Buffer): IPublishPacket {
  const parser = mqttPacket.parser({ protocolVersion: 5 });
  let packet: IPublishPacket | undefined;
  parser.on('packet', (p) => (packet = p as IPublishPacket));
  parser.on('error', (err) => {
    throw err;
  });
  parser.parse(buf);
  return packet!;
}

const NO_LIMIT = Number.MAX_SAFE_INTEGER;

describe('encodeV5Publish', () => {
  it('without aliases sends the topic and the expiry and subscription ids', () => {
    const d = { ...delivery('a/b'), subscriptionIds: [3] };
    const p = parse(encodeV5Publish(d, 9, false, 60, undefined, 0, NO_LIMIT));
    expect(p.topic).toBe('a/b');
    expect(p.messageId).toBe(9);
    expect(p.properties).toEqual({ messageExpiryInterval: 60, subscriptionIdentifier: 3 });
  });

  it('gives a new topic the next alias with its topic, then sends the alias alone', () => {
    const aliases: OutboundAliases = new Map();
    const first = parse(encodeV5Publish(delivery('a/b'), 1, false, undefined, aliases, 2, NO_LIMIT));
    expect([first.topic, first.properties?.topicAlias]).toEqual(['a/b', 1]);
    const second = parse(encodeV5Publish(delivery('c/d'), 2, false, undefined, aliases, 2, NO_LIMIT));
    expect([second.topic, second.properties?.topicAlias]).toEqual(['c/d', 2]);
    const again = parse(encodeV5Publish(delivery('a/b'), 3, true, undefined, aliases, 2, NO_LIMIT));
    expect([again.topic, again.properties?.topicAlias, again.dup]).toEqual(['', 1, true]);
    expect([...aliases]).toEqual([
      ['a/b', 1],
      ['c/d', 2],
    ]);
  });

  it('re-binds the oldest mapping to a new topic once every alias is in use', () => {
    const aliases: OutboundAliases = new Map([
      ['a/b', 1],
      ['c/d', 2],
    ]);
    const p = parse(encodeV5Publish(delivery('e/f'), 1, false, undefined, aliases, 2, NO_LIMIT));
    expect([p.topic, p.properties?.topicAlias]).toEqual(['e/f', 1]);
    expect([...aliases]).toEqual([
      ['c/d', 2],
      ['e/f', 1],
    ]);
  });

  it('records no mapping for a packet over the client Maximum Packet Size (it is dropped, never seen)', () => {
    const aliases: OutboundAliases = new Map([['a/b', 1]]);
    const buf = encodeV5Publish(delivery('c/d', 'x'.repeat(100)), 1, false, undefined, aliases, 1, 50);
    expect(buf.length).toBeGreaterThan(50);
    expect([...aliases]).toEqual([['a/b', 1]]);
  });
});
