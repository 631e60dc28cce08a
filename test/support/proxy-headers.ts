/** PROXY protocol headers as a load balancer writes them, for tests. */

const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

/** A v1 (text) TCP4 header. */
export function proxyV1Tcp4(src: string, sport: number, dst: string, dport: number): Buffer {
  return Buffer.from(`PROXY TCP4 ${src} ${dst} ${sport} ${dport}\r\n`, 'ascii');
}

/** A PROXY v2 PROXY TCP4 header. */
export function proxyV2Tcp4(src: string, sport: number, dst: string, dport: number): Buffer {
  const header = Buffer.alloc(28);
  V2_SIGNATURE.copy(header, 0);
  header[12] = 0x21;
  header[13] = 0x11;
  header.writeUInt16BE(12, 14);
  Buffer.from(src.split('.').map(Number)).copy(header, 16);
  Buffer.from(dst.split('.').map(Number)).copy(header, 20);
  header.writeUInt16BE(sport, 24);
  header.writeUInt16BE(dport, 26);
  return header;
}

/** A PROXY v2 LOCAL header (a health check from the proxy itself). */
export function proxyV2Local(): Buffer {
  const header = Buffer.alloc(16);
  V2_SIGNATURE.copy(header, 0);
  header[12] = 0x20;
  return header;
}
