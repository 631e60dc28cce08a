import mqtt from 'mqtt-packet';
import { FrameSplitter, PacketType, publishPacketId, publishPayloadStart, readVarInt } from '../../bench/src/frame-splitter';
import { encodePublish } from '../../bench/src/packets';

interface Seen {
  type: number;
  body: Buffer;
}

function splitter(): { s: FrameSplitter; seen: Seen[] } {
  const seen: Seen[] = [];
  const s = new FrameSplitter((first, buf, start, end) => seen.push({ type: first >> 4, body: Buffer.from(buf.subarray(start, end)) }));
  return { s, seen };
}

const connack = mqtt.generate({ cmd: 'connack', returnCode: 0, sessionPresent: false }, { protocolVersion: 4 });
const suback = mqtt.generate({ cmd: 'suback', messageId: 7, granted: [1] }, { protocolVersion: 4 });
const puback = mqtt.generate({ cmd: 'puback', messageId: 9 }, { protocolVersion: 4 });
const qos0 = encodePublish('a/b', Buffer.alloc(10, 1), 0);
/** A payload over 127 bytes makes the remaining length take two bytes. */
const qos1Big = encodePublish('t', Buffer.alloc(300, 2), 1, 4242);

describe('FrameSplitter', () => {
  const stream = Buffer.concat([connack, suback, qos0, puback, qos1Big, qos0, puback]);

  it('counts PUBLISH and PUBACK and hands over the other frames when they arrive in one chunk', () => {
    const { s, seen } = splitter();
    s.push(stream);
    expect(s.publishes).toBe(3);
    expect(s.pubacks).toBe(2);
    expect(seen.map((f) => f.type)).toEqual([PacketType.CONNACK, PacketType.SUBACK, PacketType.PUBLISH]);
    expect(seen[2]!.body.length).toBe(2 + 1 + 2 + 300);
    expect(s.pendingBytes).toBe(0);
  });

  it('gives the same result for every split point and byte by byte', () => {
    for (let cut = 1; cut < stream.length; cut++) {
      const { s, seen } = splitter();
      s.push(stream.subarray(0, cut));
      s.push(stream.subarray(cut));
      expect([s.publishes, s.pubacks, seen.length]).toEqual([3, 2, 3]);
    }
    const { s, seen } = splitter();
    for (let i = 0; i < stream.length; i++) s.push(stream.subarray(i, i + 1));
    expect([s.publishes, s.pubacks, seen.length, s.pendingBytes]).toEqual([3, 2, 3, 0]);
  });

  it('reads the packet id of a QoS 1 PUBLISH split across chunks', () => {
    const { s, seen } = splitter();
    s.push(qos1Big.subarray(0, 2));
    expect(s.pendingBytes).toBe(2);
    s.push(qos1Big.subarray(2, 100));
    s.push(qos1Big.subarray(100));
    expect(seen).toHaveLength(1);
    expect(publishPacketId(seen[0]!.body, 0)).toBe(4242);
  });

  it('rejects a remaining length of more than four bytes and a frame over the limit', () => {
    expect(() => splitter().s.push(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01]))).toThrow(/malformed remaining length/);
    const small = new FrameSplitter(() => undefined, 100);
    expect(() => small.push(Buffer.from([0x30, 0xc8, 0x01]))).toThrow(/exceeds the limit/);
  });

  it('counts PUBCOMP and hands over every PUBLISH when asked to', () => {
    const pubcomp = mqtt.generate({ cmd: 'pubcomp', messageId: 3 }, { protocolVersion: 4 });
    const { s, seen } = splitter();
    s.inspectPublishes = true;
    s.push(Buffer.concat([pubcomp, qos0, pubcomp]));
    expect([s.pubcomps, s.publishes]).toEqual([2, 1]);
    expect(seen.map((f) => f.type)).toEqual([PacketType.PUBLISH]);
  });

  it('finds the payload of a PUBLISH in every version', () => {
    const payload = Buffer.from('payload!');
    for (const [version, qos] of [
      [4, 0],
      [4, 1],
      [5, 0],
      [5, 2],
      [3, 1],
    ] as const) {
      const packet = encodePublish('a/b', payload, qos, qos === 0 ? undefined : 12, version);
      const seen: number[] = [];
      const s = new FrameSplitter((first, buf, start, end) => {
        const at = publishPayloadStart(first, buf, start, end, version);
        seen.push(at);
        expect(buf.subarray(at, end).toString()).toBe('payload!');
      });
      s.inspectPublishes = true;
      s.push(packet);
      expect(seen).toHaveLength(1);
    }
  });

  it('reads variable byte integers', () => {
    expect(readVarInt(Buffer.from([0x00]), 0, 1)).toEqual([0, 1]);
    expect(readVarInt(Buffer.from([0xc8, 0x01]), 0, 2)).toEqual([200, 2]);
    expect(readVarInt(Buffer.from([0xc8]), 0, 1)).toBeNull();
  });
});
