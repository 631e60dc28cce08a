import { decodeFrame, encodeGroups, encodeMessage, frame, FrameError, NO_GROUPS_BYTES } from '../../src/cluster/forward-frame';
import type { ForwardMessage } from '../../src/cluster/cluster-view';

const NOW = 1_700_000_000_000;

function message(over: Partial<ForwardMessage> = {}): ForwardMessage {
  return {
    topic: 'a/b',
    payload: Buffer.from('hello'),
    qos: 1,
    retain: false,
    properties: undefined,
    expiresAt: 0,
    publisherClientId: 'pub-1',
    ...over,
  };
}

function oneFrame(tenant: string, msg: ForwardMessage): Buffer {
  const m = encodeMessage(tenant, msg, NOW);
  return frame(1, [m], m.length);
}

describe('forwarded frame codec', () => {
  it('round-trips messages with every property, in order', () => {
    const full = message({
      topic: 'sensors/ü/temp',
      payload: Buffer.from([0, 1, 2, 255]),
      qos: 2,
      retain: true,
      expiresAt: NOW + 12_345,
      publisherClientId: 'client-ß',
      properties: {
        payloadFormatIndicator: false,
        contentType: 'application/json',
        responseTopic: 'reply/here',
        correlationData: Buffer.from([9, 8, 7]),
        userProperties: [
          ['k', 'v1'],
          ['k', 'v2'],
          ['', ''],
        ],
      },
    });
    const bare = message({ qos: 0, payload: Buffer.alloc(0), publisherClientId: '' });
    const parts = [encodeMessage('tenant-a', full, NOW), encodeMessage('', bare, NOW)];
    const decoded = decodeFrame(frame(2, parts, parts[0]!.length + parts[1]!.length));
    expect(decoded).toEqual([
      {
        tenantId: 'tenant-a',
        topic: 'sensors/ü/temp',
        payload: Buffer.from([0, 1, 2, 255]),
        qos: 2,
        retain: true,
        publisherClientId: 'client-ß',
        expiryMs: 12_345,
        payloadFormatIndicator: false,
        contentType: 'application/json',
        responseTopic: 'reply/here',
        correlationData: Buffer.from([9, 8, 7]),
        userProperties: [
          ['k', 'v1'],
          ['k', 'v2'],
          ['', ''],
        ],
        groups: [],
      },
      {
        tenantId: '',
        topic: 'a/b',
        payload: Buffer.alloc(0),
        qos: 0,
        retain: false,
        publisherClientId: '',
        expiryMs: undefined,
        payloadFormatIndicator: undefined,
        contentType: undefined,
        responseTopic: undefined,
        correlationData: undefined,
        userProperties: undefined,
        groups: [],
      },
    ]);
  });

  it('carries the copy id of a message its sender may send again (a will), and none otherwise', () => {
    const m = encodeMessage('t', message({ qos: 2, properties: { userProperties: [['k', 'v']] } }), NOW, 'node-a:1:7');
    const [got] = decodeFrame(frame(1, [m], m.length));
    expect(got!.copyId).toBe('node-a:1:7');
    expect(got!.userProperties).toEqual([['k', 'v']]);
    expect(got!.payload.toString()).toBe('hello');
    expect(decodeFrame(oneFrame('t', message()))[0]!.copyId).toBeUndefined();
    // Cut inside the id: refused like any truncation.
    expect(() => decodeFrame(frame(1, [m.subarray(0, m.length - 8)], m.length - 8))).toThrow(FrameError);
  });

  it('carries the expiry as the time left, never negative', () => {
    expect(decodeFrame(oneFrame('t', message({ expiresAt: NOW - 5000 })))[0]!.expiryMs).toBe(0);
    expect(decodeFrame(oneFrame('t', message({ properties: { payloadFormatIndicator: true } })))[0]!.payloadFormatIndicator).toBe(true);
  });

  it('refuses every truncation of a valid frame', () => {
    const whole = oneFrame('t1', message({ properties: { contentType: 'x', userProperties: [['a', 'b']] } }));
    for (let n = 0; n < whole.length; n++) expect(() => decodeFrame(whole.subarray(0, n))).toThrow(FrameError);
  });

  it('refuses malformed frames: version, count, QoS 3, unknown flags, trailing bytes, bad UTF-8, lengths past the end', () => {
    const whole = oneFrame('t1', message());
    const patched = (at: number, byte: number): Buffer => {
      const b = Buffer.from(whole);
      b[at] = byte;
      return b;
    };
    expect(() => decodeFrame(patched(0, 1))).toThrow(/version/);
    expect(() => decodeFrame(patched(4, 200))).toThrow(/count/);
    // After the header (5 bytes), the message's group count (2), then its flags.
    expect(() => decodeFrame(patched(7, 3))).toThrow(/QoS 3/);
    expect(() => decodeFrame(patched(8, 8))).toThrow(/flags/);
    expect(() => decodeFrame(Buffer.concat([whole, Buffer.of(0)]))).toThrow(/after the last/);
    // The tenant string is at byte 9 (u16 length) and 11: an invalid UTF-8 byte in it.
    expect(() => decodeFrame(patched(11, 0xff))).toThrow(/UTF-8/);
    // A string length far past the end.
    expect(() => decodeFrame(patched(9, 0xff))).toThrow(/truncated/);
    // A group count with no groups behind it.
    expect(() => decodeFrame(patched(6, 9))).toThrow(FrameError);
    const huge = Buffer.from(whole);
    huge.writeUInt32BE(0xffffffff, huge.length - 9);
    expect(() => decodeFrame(huge)).toThrow(FrameError);
    expect(() => decodeFrame(Buffer.alloc(0))).toThrow(FrameError);
  });

  it('carries the shared groups one destination is to serve in front of the message encoded once', () => {
    const body = encodeMessage('t1', message({ topic: 's/1' }), NOW);
    const groups = encodeGroups([
      { shareKind: 'share', group: 'g', topicFilter: 's/+' },
      { shareKind: 'oshare', group: 'ö', topicFilter: '#' },
    ]);
    const withGroups = [groups, body.subarray(NO_GROUPS_BYTES)];
    const bytes = groups.length + body.length - NO_GROUPS_BYTES;
    // Two messages of one frame: the same encoding, one naming groups, one not.
    const decoded = decodeFrame(frame(2, [...withGroups, body], bytes + body.length));
    expect(decoded.map((m) => m.groups)).toEqual([
      [
        { shareKind: 'share', group: 'g', topicFilter: 's/+' },
        { shareKind: 'oshare', group: 'ö', topicFilter: '#' },
      ],
      [],
    ]);
    expect(decoded[0]).toEqual({ ...decoded[1], groups: decoded[0]!.groups });
    // A share kind other than 0 and 1 is refused.
    const bad = frame(1, withGroups, bytes);
    bad[7] = 2;
    expect(() => decodeFrame(bad)).toThrow(/share kind/);
    for (let n = 0; n < bad.length; n++) expect(() => decodeFrame(frame(1, withGroups, bytes).subarray(0, n))).toThrow(FrameError);
  });

  it('survives random garbage: every input decodes or throws FrameError', () => {
    let seed = 42;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const base = oneFrame('tenant', message({ properties: { responseTopic: 'r', correlationData: Buffer.of(1) } }));
    for (let i = 0; i < 2000; i++) {
      const b = Buffer.from(base);
      for (let k = 0; k < 3; k++) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
      try {
        decodeFrame(b);
      } catch (err) {
        expect(err).toBeInstanceOf(FrameError);
      }
    }
  });
});
