import { formatIPv6, parseProxyHeader, PROXY_V2_SIGNATURE, type ProxyParseResult } from '../../src/transport/proxy-protocol';

/** A v2 header: version/command byte, family/transport byte, address block. */
function v2(versionCommand: number, familyTransport: number, body: Buffer): Buffer {
  const fixed = Buffer.alloc(4);
  fixed[0] = versionCommand;
  fixed[1] = familyTransport;
  fixed.writeUInt16BE(body.length, 2);
  return Buffer.concat([PROXY_V2_SIGNATURE, fixed, body]);
}

function ipv4Block(src: number[], dst: number[], sport: number, dport: number): Buffer {
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(sport, 0);
  ports.writeUInt16BE(dport, 2);
  return Buffer.concat([Buffer.from(src), Buffer.from(dst), ports]);
}

function ipv6Block(src: Buffer, dst: Buffer, sport: number, dport: number): Buffer {
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(sport, 0);
  ports.writeUInt16BE(dport, 2);
  return Buffer.concat([src, dst, ports]);
}

/** Feed `bytes` one byte at a time, as a slow network would: every strict prefix must be `incomplete`. */
function byteByByte(bytes: Buffer): ProxyParseResult {
  for (let n = 1; n < bytes.length; n++) {
    const partial = parseProxyHeader(bytes.subarray(0, n));
    if (partial.status !== 'incomplete') return partial;
  }
  return parseProxyHeader(bytes);
}

describe('PROXY protocol v1', () => {
  it('parses TCP4 and reports the header length, leaving the payload', () => {
    const header = 'PROXY TCP4 192.0.2.10 198.51.100.1 56324 1883\r\n';
    const r = parseProxyHeader(Buffer.concat([Buffer.from(header), Buffer.from([0x10, 0x0c])]));
    expect(r).toEqual({
      status: 'complete',
      length: header.length,
      header: {
        version: 1,
        command: 'proxy',
        family: 'tcp4',
        source: { address: '192.0.2.10', port: 56324 },
        destination: { address: '198.51.100.1', port: 1883 },
      },
    });
  });

  it('parses TCP6', () => {
    const r = parseProxyHeader(Buffer.from('PROXY TCP6 2001:db8::1 2001:db8::2 40000 8883\r\n'));
    expect(r.status === 'complete' && r.header).toMatchObject({ family: 'tcp6', source: { address: '2001:db8::1', port: 40000 } });
  });

  it('accepts UNKNOWN with or without addresses (the socket address then stands)', () => {
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n'))).toEqual({
      status: 'complete',
      length: 15,
      header: { version: 1, command: 'proxy', family: 'unknown' },
    });
    const withJunk = parseProxyHeader(Buffer.from('PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n'));
    expect(withJunk.status === 'complete' && withJunk.header.family).toBe('unknown');
  });

  it('is incomplete until the CRLF arrives, byte by byte', () => {
    const bytes = Buffer.from('PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n');
    const r = byteByByte(bytes);
    expect(r.status === 'complete' && r.header.source).toEqual({ address: '10.0.0.1', port: 1 });
  });

  it.each([
    ['wrong protocol', 'PROXY UDP4 10.0.0.1 10.0.0.2 1 2\r\n'],
    ['IPv6 address under TCP4', 'PROXY TCP4 ::1 10.0.0.2 1 2\r\n'],
    ['bad address', 'PROXY TCP4 10.0.0.256 10.0.0.2 1 2\r\n'],
    ['port out of range', 'PROXY TCP4 10.0.0.1 10.0.0.2 65536 2\r\n'],
    ['port with a leading zero', 'PROXY TCP4 10.0.0.1 10.0.0.2 01 2\r\n'],
    ['missing port', 'PROXY TCP4 10.0.0.1 10.0.0.2 1\r\n'],
    ['double space', 'PROXY TCP4  10.0.0.1 10.0.0.2 1 2\r\n'],
    ['lower case', 'proxy TCP4 10.0.0.1 10.0.0.2 1 2\r\n'],
  ])('refuses %s', (_name, line) => {
    expect(parseProxyHeader(Buffer.from(line)).status).toBe('invalid');
  });

  it('refuses a line longer than 107 bytes without waiting for its end', () => {
    const long = Buffer.from(`PROXY UNKNOWN ${'x'.repeat(120)}`);
    const r = parseProxyHeader(long);
    expect(r.status).toBe('invalid');
    expect(r.status === 'invalid' && r.reason).toMatch(/longer than 107/);
    expect(parseProxyHeader(long.subarray(0, 106)).status).toBe('incomplete');
  });
});

describe('PROXY protocol v2', () => {
  it('parses PROXY TCP4 and leaves what follows', () => {
    const header = v2(0x21, 0x11, ipv4Block([203, 0, 113, 7], [10, 1, 2, 3], 51000, 1883));
    const r = parseProxyHeader(Buffer.concat([header, Buffer.from('MQTT bytes')]));
    expect(r).toEqual({
      status: 'complete',
      length: 28,
      header: {
        version: 2,
        command: 'proxy',
        family: 'tcp4',
        source: { address: '203.0.113.7', port: 51000 },
        destination: { address: '10.1.2.3', port: 1883 },
      },
    });
  });

  it('parses PROXY TCP6 and skips TLVs after the addresses', () => {
    const src = Buffer.from('20010db8000000000000000000000042', 'hex');
    const dst = Buffer.from('20010db8000000000000000000000001', 'hex');
    const tlv = Buffer.from([0x04, 0x00, 0x03, 0x61, 0x62, 0x63]); // PP2_TYPE_NOOP "abc"
    const header = v2(0x21, 0x21, Buffer.concat([ipv6Block(src, dst, 443, 8883), tlv]));
    const r = parseProxyHeader(header);
    expect(r.status === 'complete' && r.length).toBe(header.length);
    expect(r.status === 'complete' && r.header).toMatchObject({ family: 'tcp6', source: { address: '2001:db8::42', port: 443 } });
  });

  it('is incomplete until the whole address block arrived, byte by byte', () => {
    const header = v2(0x21, 0x11, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2));
    const r = byteByByte(header);
    expect(r.status === 'complete' && r.header.source).toEqual({ address: '1.2.3.4', port: 1 });
  });

  it('LOCAL ignores any address block: the socket address stands', () => {
    const r = parseProxyHeader(v2(0x20, 0x11, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)));
    expect(r).toEqual({ status: 'complete', length: 28, header: { version: 2, command: 'local', family: 'unknown' } });
    expect(parseProxyHeader(v2(0x20, 0x00, Buffer.alloc(0)))).toMatchObject({ status: 'complete', length: 16 });
  });

  it('UNSPEC and UNIX families relay no usable address', () => {
    expect(parseProxyHeader(v2(0x21, 0x00, Buffer.alloc(0)))).toMatchObject({ status: 'complete', header: { family: 'unknown' } });
    expect(parseProxyHeader(v2(0x21, 0x31, Buffer.alloc(216)))).toMatchObject({ status: 'complete', header: { family: 'unknown' } });
  });

  it.each([
    ['version 1 in the binary form', v2(0x11, 0x11, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['unknown command', v2(0x22, 0x11, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['UDP', v2(0x21, 0x12, ipv4Block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2))],
    ['unknown family', v2(0x21, 0x41, Buffer.alloc(12))],
    ['short TCP4 block', v2(0x21, 0x11, Buffer.alloc(8))],
    ['short TCP6 block', v2(0x21, 0x21, Buffer.alloc(20))],
  ])('refuses %s', (_name, bytes) => {
    expect(parseProxyHeader(bytes).status).toBe('invalid');
  });

  it('refuses an oversize header from its length field, before the body arrives', () => {
    const fixed = Buffer.from([0x21, 0x11, 0xff, 0xff]);
    const r = parseProxyHeader(Buffer.concat([PROXY_V2_SIGNATURE, fixed]));
    expect(r.status).toBe('invalid');
    expect(r.status === 'invalid' && r.reason).toMatch(/longer than 4096/);
    expect(parseProxyHeader(v2(0x21, 0x11, Buffer.alloc(100)), 64).status).toBe('invalid');
  });
});

describe('signatures', () => {
  it.each([
    ['an MQTT CONNECT', Buffer.from([0x10, 0x0c, 0x00, 0x04])],
    ['a TLS ClientHello', Buffer.from([0x16, 0x03, 0x01])],
    ['an HTTP request', Buffer.from('GET /mqtt HTTP/1.1\r\n')],
    [
      'a v2 signature with one wrong byte',
      Buffer.concat([Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x55]), Buffer.alloc(8)]),
    ],
    ['"PROXX"', Buffer.from('PROXX TCP4')],
  ])('refuses %s at once', (_name, bytes) => {
    expect(parseProxyHeader(bytes).status).toBe('invalid');
  });

  it('waits on an empty buffer and on a correct partial signature', () => {
    expect(parseProxyHeader(Buffer.alloc(0)).status).toBe('incomplete');
    expect(parseProxyHeader(Buffer.from('PRO')).status).toBe('incomplete');
    expect(parseProxyHeader(PROXY_V2_SIGNATURE.subarray(0, 7)).status).toBe('incomplete');
  });
});

describe('formatIPv6', () => {
  it.each([
    ['00000000000000000000000000000001', '::1'],
    ['00000000000000000000000000000000', '::'],
    ['20010db8000000010000000000000001', '2001:db8:0:1::1'],
    ['20010db8000000000001000000000001', '2001:db8::1:0:0:1'],
    ['20010db8000100020003000400050006', '2001:db8:1:2:3:4:5:6'],
    ['00000000000000000000ffffc0000201', '::ffff:192.0.2.1'],
  ])('%s → %s', (hex, text) => {
    expect(formatIPv6(Buffer.from(hex, 'hex'))).toBe(text);
  });
});
