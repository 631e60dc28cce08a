import mqtt from 'mqtt-packet';
import { FrameReader, type FrameSink } from '../../src/codec/frame-reader';
import {
  decodePublish,
  encodeAck,
  encodePublish,
  MALFORMED,
  patchPacketId,
  PROTOCOL_ERROR,
  receivedEncoding,
} from '../../src/codec/publish-codec';

class Frames implements FrameSink {
  frames: { header: number; body: Buffer; frame: Buffer }[] = [];
  malformed = 0;
  oversize: number[] = [];
  onFrame(header: number, body: Buffer, frame: Buffer): void {
    this.frames.push({ header, body: Buffer.from(body), frame: Buffer.from(frame) });
  }
  onMalformedLength(): void {
    this.malformed++;
  }
  onOversize(size: number): void {
    this.oversize.push(size);
  }
}

const publish = (topic: string, payload: Buffer, qos: 0 | 1 | 2 = 0, messageId = 1): Buffer =>
  mqtt.generate({ cmd: 'publish', topic, payload, qos, retain: false, dup: false, messageId });

describe('FrameReader', () => {
  const packets = [
    publish('a/b', Buffer.alloc(10, 1)),
    publish('c', Buffer.alloc(300, 2), 1, 7),
    Buffer.from([0xc0, 0x00]),
    publish('d', Buffer.alloc(20000, 3), 2, 9),
  ];
  const stream = Buffer.concat(packets);

  it('splits merged packets without changing them', () => {
    const sink = new Frames();
    new FrameReader(sink, 1 << 20).push(stream);
    expect(sink.frames.map((f) => f.frame)).toEqual(packets);
    expect(sink.frames[2]!.header).toBe(0xc0);
  });

  it.each([1, 2, 3, 7, 64, 1000])('gathers packets split into %i-byte chunks', (size) => {
    const sink = new Frames();
    const reader = new FrameReader(sink, 1 << 20);
    for (let i = 0; i < stream.length; i += size) reader.push(stream.subarray(i, i + size));
    expect(sink.frames.map((f) => f.frame)).toEqual(packets);
  });

  it('reports a remaining length longer than four bytes as malformed [MQTT-1.5.5-1]', () => {
    const sink = new Frames();
    new FrameReader(sink, 1 << 20).push(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x7f]));
    expect(sink.malformed).toBe(1);
    expect(sink.frames).toEqual([]);
  });

  it('reports an oversize packet from its header, before buffering its body', () => {
    const sink = new Frames();
    const reader = new FrameReader(sink, 100);
    reader.push(publish('t', Buffer.alloc(500)).subarray(0, 10));
    expect(sink.oversize).toEqual([506]); // 1 + 2 length bytes + 2 + 1 topic + 500 payload
    reader.push(Buffer.alloc(100));
    expect(sink.frames).toEqual([]);
  });

  it('tells since when a packet is partly received (partialSince, for mqtt.packetTimeoutMs), 0 when none is', () => {
    const sink = new Frames();
    const reader = new FrameReader(sink, 1 << 20);
    const [a, b] = [packets[1]!, packets[3]!];
    reader.push(a.subarray(0, 1), 100); // only the first header byte
    expect(reader.partialSince).toBe(100);
    reader.push(a.subarray(1, 50), 200); // the same packet goes on: its first byte still counts
    expect(reader.partialSince).toBe(100);
    reader.push(Buffer.concat([a.subarray(50), b.subarray(0, 3)]), 300); // a completes, b begins
    expect(sink.frames.length).toBe(1);
    expect(reader.partialSince).toBe(300);
    reader.push(b.subarray(3), 400);
    expect(sink.frames.length).toBe(2);
    expect(reader.partialSince).toBe(0);
    reader.push(Buffer.concat([a, b.subarray(0, 2)]), 500); // a whole packet, then b begins in the same chunk
    expect(reader.partialSince).toBe(500);
    reader.stop();
    expect(reader.partialSince).toBe(0);
  });
});

describe('PUBLISH codec', () => {
  it('round-trips a v5 PUBLISH keeping user property order across names', () => {
    const { buf } = encodePublish(
      {
        topic: 'a/ü',
        payload: Buffer.from('hi'),
        properties: {
          payloadFormatIndicator: true,
          contentType: 'text/plain',
          responseTopic: 'r/1',
          correlationData: Buffer.from([1, 2, 3]),
          userProperties: [
            ['a', '1'],
            ['b', '2'],
            ['a', '3'],
          ],
        },
      },
      { qos: 1, retain: true, dup: false, packetId: 42, v5: true, messageExpiryInterval: 9, subscriptionIds: [3, 300] },
    );
    const parsed: mqtt.IPublishPacket[] = [];
    const parser = mqtt.parser({ protocolVersion: 5 });
    parser.on('packet', (p: mqtt.Packet) => parsed.push(p as mqtt.IPublishPacket));
    parser.parse(buf);
    expect(parsed[0]).toMatchObject({ topic: 'a/ü', qos: 1, retain: true, messageId: 42, payload: Buffer.from('hi') });
    expect(parsed[0]!.properties).toMatchObject({
      payloadFormatIndicator: true,
      contentType: 'text/plain',
      messageExpiryInterval: 9,
      subscriptionIdentifier: [3, 300],
    });

    // Our decoder sees the pairs in order (mqtt-packet folds them into an object). Subscription ids
    // are server-to-client only, so encode again without them before decoding as a server.
    const inbound = encodePublish(
      {
        topic: 'a/ü',
        payload: Buffer.from('hi'),
        properties: {
          userProperties: [
            ['a', '1'],
            ['b', '2'],
            ['a', '3'],
          ],
        },
      },
      { qos: 1, retain: false, dup: false, packetId: 42, v5: true },
    ).buf;
    const decoded = decodePublish(inbound[0]!, inbound.subarray(2), true);
    expect(typeof decoded).toBe('object');
    if (typeof decoded === 'number') return;
    expect(decoded.properties?.userProperties).toEqual([
      ['a', '1'],
      ['b', '2'],
      ['a', '3'],
    ]);
  });

  it.each([
    ['3.1.1', false],
    ['5.0', true],
  ])('takes a received MQTT %s PUBLISH without DUP and properties as the encoding of its variant', (_name, v5) => {
    // Sizes around the remaining length's 1/2/3-byte boundaries, an ASCII and a non-ASCII topic.
    for (const size of [0, 100, 130, 16300, 16400])
      for (const topic of ['a/b', 'capteurs/température/€'])
        for (const qos of [0, 1, 2] as const)
          for (const retain of [false, true]) {
            const payload = Buffer.alloc(size, 7);
            const frame = mqtt.generate(
              { cmd: 'publish', topic, payload, qos, retain, dup: false, messageId: 513 },
              { protocolVersion: v5 ? 5 : 4 },
            );
            const header = frame[0]!;
            // The body starts with the topic's two length bytes.
            const body = frame.subarray(frame.indexOf(Buffer.from(topic)) - 2);
            const decoded = decodePublish(header, body, v5);
            if (typeof decoded === 'number') throw new Error(`refused: ${decoded}`);
            expect(decoded.properties).toBeUndefined();
            const encoded = encodePublish(decoded, { qos, retain, dup: false, packetId: 0, v5 });
            const received = receivedEncoding(frame);
            expect(received.packetIdOffset).toBe(encoded.packetIdOffset);
            // The packet ids differ (513 received, 0 in the template): compare once patched alike.
            const patch = (e: { buf: Buffer; packetIdOffset: number }): Buffer =>
              qos === 0 ? e.buf : patchPacketId(e.buf, e.packetIdOffset, 9, false);
            expect(patch(received)).toEqual(patch(encoded));
          }
  });

  it('patches packet id and DUP into a copy of a shared template', () => {
    const { buf, packetIdOffset } = encodePublish(
      { topic: 't', payload: Buffer.from('x'), properties: undefined },
      { qos: 2, retain: false, dup: false, packetId: 0, v5: false },
    );
    const copy = patchPacketId(buf, packetIdOffset, 513, true);
    expect(buf.readUInt16BE(packetIdOffset)).toBe(0);
    expect(copy.readUInt16BE(packetIdOffset)).toBe(513);
    expect(copy[0]! & 0x08).toBe(0x08);
    expect(
      mqtt.generate({ cmd: 'publish', topic: 't', payload: Buffer.from('x'), qos: 2, messageId: 513, dup: true, retain: false }),
    ).toEqual(copy);
  });

  const body = (bytes: number[]): Buffer => Buffer.from(bytes);
  it.each([
    ['QoS 3 [MQTT-3.3.1-4]', 0x36, body([0, 1, 0x61, 0, 1]), false, MALFORMED],
    ['DUP with QoS 0 [MQTT-3.3.1-2]', 0x38, body([0, 1, 0x61]), false, MALFORMED],
    ['packet id 0 [MQTT-2.2.1-3]', 0x32, body([0, 1, 0x61, 0, 0]), false, MALFORMED],
    ['invalid UTF-8 topic [MQTT-1.5.4-1]', 0x30, body([0, 2, 0xc3, 0x28]), false, MALFORMED],
    ['U+0000 in topic [MQTT-1.5.4-2]', 0x30, body([0, 2, 0x61, 0x00]), false, MALFORMED],
    ['truncated topic', 0x30, body([0, 9, 0x61]), false, MALFORMED],
    ['subscription id from a client [MQTT-3.3.4-6]', 0x30, body([0, 1, 0x61, 2, 0x0b, 1]), true, PROTOCOL_ERROR],
    ['two payload format indicators', 0x30, body([0, 1, 0x61, 4, 0x01, 1, 0x01, 1]), true, PROTOCOL_ERROR],
    ['properties longer than the packet', 0x30, body([0, 1, 0x61, 9, 0x01, 1]), true, MALFORMED],
  ] as const)('refuses %s', (_name, header, b, v5, expected) => {
    expect(decodePublish(header, b, v5)).toBe(expected);
  });

  it('encodes acknowledgements with v5 reason codes only when not success', () => {
    expect(encodeAck(4, 7, 0, true)).toEqual(Buffer.from([0x40, 2, 0, 7]));
    expect(encodeAck(5, 7, 0x87, true)).toEqual(Buffer.from([0x50, 3, 0, 7, 0x87]));
    expect(encodeAck(6, 7, 0x92, false)).toEqual(Buffer.from([0x62, 2, 0, 7]));
  });
});
