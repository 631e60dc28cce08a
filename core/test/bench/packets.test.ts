import mqtt, { type Packet } from 'mqtt-packet';
import {
  AckByte,
  encodeAcks,
  encodeConnect,
  encodePubacks,
  encodePublish,
  encodePublishBatch,
  encodePublishCycle,
  encodeSubscribe,
} from '../../bench/src/packets';

function decode(buf: Buffer, protocolVersion: 3 | 4 | 5 = 4): Packet[] {
  const parser = mqtt.parser({ protocolVersion });
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

  it('encodes CONNECT for MQTT 3.1 (MQIsdp, level 3) and 5.0 (level 5, properties)', () => {
    const v3 = encodeConnect('c3', 0, true, 3);
    expect(v3.subarray(2, 11).toString('latin1')).toBe('\u0000\u0006MQIsdp\u0003');
    expect(decode(v3, 3)[0]).toMatchObject({ cmd: 'connect', protocolId: 'MQIsdp', protocolVersion: 3, clientId: 'c3' });
    const v5 = encodeConnect('c5', 0, true, 5);
    expect(v5.subarray(2, 9).toString('latin1')).toBe('\u0000\u0004MQTT\u0005');
    expect(decode(v5, 5)[0]).toMatchObject({ cmd: 'connect', protocolVersion: 5, clientId: 'c5', clean: true });
    // A persistent MQTT 5 session needs a session expiry, or it would end with the connection.
    expect(decode(encodeConnect('p5', 0, false, 5), 5)[0]).toMatchObject({ clean: false, properties: { sessionExpiryInterval: 300 } });
  });

  it("puts the run's credentials in CONNECT (a broker with an auth plugin)", () => {
    const c = decode(encodeConnect('u1', 0, true, 4, { username: 'bench', password: 's3cret' }))[0] as {
      username?: string;
      password?: Buffer;
    };
    expect(c.username).toBe('bench');
    expect(c.password?.toString()).toBe('s3cret');
    expect(decode(encodeConnect('u2', 0, true, 5, { username: 'only' }), 5)[0]).toMatchObject({ username: 'only' });
    expect((decode(encodeConnect('u3'))[0] as { username?: string }).username).toBeUndefined();
  });

  it('writes the MQTT 5 property length in SUBSCRIBE and PUBLISH', () => {
    const sub = encodeSubscribe(2, 't', 1, 5);
    expect(decode(sub, 5)[0]).toMatchObject({ cmd: 'subscribe', messageId: 2, subscriptions: [{ topic: 't', qos: 1 }] });
    // fixed header (2), packet id (2), property length 0
    expect(sub[4]).toBe(0);
    const pub = encodePublish('t', Buffer.from('x'), 1, 7, 5);
    // fixed header (2), topic (3), packet id (2), property length 0, payload
    expect([...pub.subarray(7)]).toEqual([0, 0x78]);
    expect(decode(pub, 5)[0]).toMatchObject({ cmd: 'publish', qos: 1, messageId: 7, topic: 't' });
    expect(decode(encodePublish('t', Buffer.from('x'), 2, 9, 4))[0]).toMatchObject({ qos: 2, messageId: 9 });
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

  it('writes mixed acknowledgements into one buffer', () => {
    expect(decode(encodeAcks([AckByte.PUBREC, 5, AckByte.PUBREL, 6, AckByte.PUBCOMP, 7]))).toEqual([
      expect.objectContaining({ cmd: 'pubrec', messageId: 5 }),
      expect.objectContaining({ cmd: 'pubrel', messageId: 6 }),
      expect.objectContaining({ cmd: 'pubcomp', messageId: 7 }),
    ]);
  });

  it('writes PUBACKs for several ids into one buffer', () => {
    expect(decode(encodePubacks([1, 300, 65535]))).toEqual(
      [1, 300, 65535].map((messageId) => expect.objectContaining({ cmd: 'puback', messageId })),
    );
  });
});
