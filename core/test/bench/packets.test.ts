import mqtt, { type Packet } from 'mqtt-packet';
import { encodeConnect, encodePubacks, encodePublishBatch, encodePublishCycle, encodeSubscribe } from '../../bench/src/packets';

function decode(buf: Buffer): Packet[] {
  const parser = mqtt.parser({ protocolVersion: 4 });
  const out: Packet[] = [];
  parser.on('packet', (p: Packet) => out.push(p));
  parser.parse(buf);
  return out;
}

describe('pre-encoded packets', () => {
  it('encodes CONNECT and SUBSCRIBE as MQTT 3.1.1', () => {
    expect(decode(encodeConnect('c1', 30))[0]).toMatchObject({
      cmd: 'connect',
      clientId: 'c1',
      keepalive: 30,
      clean: true,
      protocolVersion: 4,
    });
    expect(decode(encodeSubscribe(3, 'a/+', 1))[0]).toMatchObject({
      cmd: 'subscribe',
      messageId: 3,
      subscriptions: [{ topic: 'a/+', qos: 1 }],
    });
  });

  it('puts a whole batch of QoS 0 PUBLISH packets in one buffer', () => {
    const packets = decode(encodePublishBatch('x/y', Buffer.from('hi'), 5));
    expect(packets).toHaveLength(5);
    for (const p of packets) expect(p).toMatchObject({ cmd: 'publish', topic: 'x/y', qos: 0 });
  });

  it('encodes one QoS 1 PUBLISH per packet id of the cycle', () => {
    const cycle = encodePublishCycle('q', Buffer.from('p'), 4);
    expect(cycle.map((b) => decode(b)[0])).toEqual(
      [1, 2, 3, 4].map((messageId) => expect.objectContaining({ cmd: 'publish', qos: 1, messageId })),
    );
    expect(() => encodePublishCycle('q', Buffer.from('p'), 0)).toThrow();
  });

  it('writes PUBACKs for several ids into one buffer', () => {
    expect(decode(encodePubacks([1, 300, 65535]))).toEqual(
      [1, 300, 65535].map((messageId) => expect.objectContaining({ cmd: 'puback', messageId })),
    );
  });
});
