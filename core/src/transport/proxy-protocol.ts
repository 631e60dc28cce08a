import { isIPv4, isIPv6 } from 'node:net';

/**
 * PROXY protocol header parser (HAProxy's spec, versions 1 and 2): a load balancer that
 * terminates or relays TCP writes one header naming the real client before the first byte of
 * the client's stream. Pure functions over a buffer; the listener feeds it what arrived so far.
 */

/** v2 starts with these 12 bytes ("\r\n\r\n\0\r\nQUIT\n"). */
export const PROXY_V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
/** v1 starts with "PROXY ". */
const V1_PREFIX = Buffer.from('PROXY ', 'ascii');
/** The longest v1 line, CRLF included (spec §2.1). */
export const PROXY_V1_MAX_BYTES = 107;
/** The largest header accepted: a v2 header with TLVs (TLS details, cloud endpoint ids) fits easily. */
export const PROXY_HEADER_MAX_BYTES = 4096;

const V2_FIXED = 16;

export interface ProxyAddress {
  readonly address: string;
  readonly port: number;
}

export interface ProxyHeader {
  readonly version: 1 | 2;
  /** `proxy`: the header relays a client; `local` (v2 only): the proxy's own connection, e.g. a health check. */
  readonly command: 'proxy' | 'local';
  /** `unknown`: no usable client address (v1 UNKNOWN, v2 LOCAL, UNSPEC or UNIX): use the socket's own. */
  readonly family: 'tcp4' | 'tcp6' | 'unknown';
  /** The client; present for tcp4 / tcp6. */
  readonly source?: ProxyAddress;
  /** The address the client connected to; present for tcp4 / tcp6. */
  readonly destination?: ProxyAddress;
}

export type ProxyParseResult =
  /** More bytes are needed. */
  | { readonly status: 'incomplete' }
  /** Not a PROXY header, or a malformed / oversize one. */
  | { readonly status: 'invalid'; readonly reason: string }
  /** A header of `length` bytes; what follows belongs to the client's stream. */
  | { readonly status: 'complete'; readonly header: ProxyHeader; readonly length: number };

const INCOMPLETE: ProxyParseResult = { status: 'incomplete' };

function invalid(reason: string): ProxyParseResult {
  return { status: 'invalid', reason };
}

/** True when `buf` agrees with `prefix` on their common length. */
function agreesWith(buf: Buffer, prefix: Buffer): boolean {
  const n = Math.min(buf.length, prefix.length);
  return buf.subarray(0, n).equals(prefix.subarray(0, n));
}

/**
 * Parse the PROXY header at the start of `buf` (everything received so far). Decides as early as
 * it can: a wrong first byte is invalid at once, and a header that would exceed `maxBytes` is
 * invalid without waiting for the rest.
 */
export function parseProxyHeader(buf: Buffer, maxBytes = PROXY_HEADER_MAX_BYTES): ProxyParseResult {
  if (buf.length === 0) return INCOMPLETE;
  if (buf[0] === V1_PREFIX[0]) return parseV1(buf, Math.min(maxBytes, PROXY_V1_MAX_BYTES));
  if (buf[0] === PROXY_V2_SIGNATURE[0]) return parseV2(buf, maxBytes);
  return invalid('no PROXY protocol signature');
}

// ------------------------------------------------------------------------------------- version 1

function parseV1(buf: Buffer, maxBytes: number): ProxyParseResult {
  if (!agreesWith(buf, V1_PREFIX)) return invalid('no PROXY protocol signature');
  const end = buf.subarray(0, maxBytes).indexOf('\r\n', 0, 'ascii');
  if (end < 0) return buf.length >= maxBytes ? invalid(`v1 header longer than ${maxBytes} bytes`) : INCOMPLETE;
  const line = buf.toString('latin1', 0, end);
  const length = end + 2;
  const parts = line.split(' ');
  const protocol = parts[1];
  // "PROXY UNKNOWN" may carry anything after it; the receiver ignores it (spec §2.1).
  if (protocol === 'UNKNOWN') return { status: 'complete', header: { version: 1, command: 'proxy', family: 'unknown' }, length };
  if (protocol !== 'TCP4' && protocol !== 'TCP6')
    return invalid(`v1 protocol ${JSON.stringify(protocol ?? '')} is not TCP4, TCP6 or UNKNOWN`);
  if (parts.length !== 6) return invalid('v1 header needs: PROXY TCP4|TCP6 <src> <dst> <srcport> <dstport>');
  const isIp = protocol === 'TCP4' ? isIPv4 : isIPv6;
  const [, , srcAddress, dstAddress, srcPort, dstPort] = parts as [string, string, string, string, string, string];
  if (!isIp(srcAddress) || !isIp(dstAddress)) return invalid(`v1 ${protocol} header has an invalid address`);
  const sport = parsePort(srcPort);
  const dport = parsePort(dstPort);
  if (sport === undefined || dport === undefined) return invalid('v1 header has an invalid port');
  return {
    status: 'complete',
    header: {
      version: 1,
      command: 'proxy',
      family: protocol === 'TCP4' ? 'tcp4' : 'tcp6',
      source: { address: srcAddress, port: sport },
      destination: { address: dstAddress, port: dport },
    },
    length,
  };
}

function parsePort(text: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,4})$/.test(text)) return undefined;
  const port = Number(text);
  return port <= 65535 ? port : undefined;
}

// ------------------------------------------------------------------------------------- version 2

const CMD_LOCAL = 0x0;
const CMD_PROXY = 0x1;
const AF_UNSPEC = 0x0;
const AF_INET = 0x1;
const AF_INET6 = 0x2;
const AF_UNIX = 0x3;
const PROTO_STREAM = 0x1;

function parseV2(buf: Buffer, maxBytes: number): ProxyParseResult {
  if (!agreesWith(buf, PROXY_V2_SIGNATURE)) return invalid('no PROXY protocol signature');
  if (buf.length < V2_FIXED) return INCOMPLETE;
  const versionCommand = buf[12]!;
  if (versionCommand >> 4 !== 2) return invalid(`v2 header has version ${versionCommand >> 4}`);
  const command = versionCommand & 0x0f;
  if (command !== CMD_LOCAL && command !== CMD_PROXY) return invalid(`v2 header has unknown command ${command}`);
  const family = buf[13]! >> 4;
  const transport = buf[13]! & 0x0f;
  const length = V2_FIXED + buf.readUInt16BE(14);
  if (length > maxBytes) return invalid(`v2 header of ${length} bytes is longer than ${maxBytes}`);
  if (buf.length < length) return INCOMPLETE;
  // LOCAL: the proxy speaks for itself; the address block (if any) is ignored (spec §2.2).
  if (command === CMD_LOCAL) return { status: 'complete', header: { version: 2, command: 'local', family: 'unknown' }, length };
  if (family === AF_UNSPEC || family === AF_UNIX) {
    return { status: 'complete', header: { version: 2, command: 'proxy', family: 'unknown' }, length };
  }
  if (family !== AF_INET && family !== AF_INET6) return invalid(`v2 header has unknown address family ${family}`);
  if (transport !== PROTO_STREAM) return invalid('v2 header relays a non-stream (UDP) connection');
  const body = buf.subarray(V2_FIXED, length);
  if (family === AF_INET) {
    if (body.length < 12) return invalid('v2 TCP4 address block is shorter than 12 bytes');
    return {
      status: 'complete',
      header: {
        version: 2,
        command: 'proxy',
        family: 'tcp4',
        source: { address: formatIPv4(body, 0), port: body.readUInt16BE(8) },
        destination: { address: formatIPv4(body, 4), port: body.readUInt16BE(10) },
      },
      length,
    };
  }
  if (body.length < 36) return invalid('v2 TCP6 address block is shorter than 36 bytes');
  return {
    status: 'complete',
    header: {
      version: 2,
      command: 'proxy',
      family: 'tcp6',
      source: { address: formatIPv6(body.subarray(0, 16)), port: body.readUInt16BE(32) },
      destination: { address: formatIPv6(body.subarray(16, 32)), port: body.readUInt16BE(34) },
    },
    length,
  };
}

function formatIPv4(buf: Buffer, offset: number): string {
  return `${buf[offset]}.${buf[offset + 1]}.${buf[offset + 2]}.${buf[offset + 3]}`;
}

/** RFC 5952 text form (lower case, longest zero run as "::"); IPv4-mapped as ::ffff:a.b.c.d like Node prints it. */
export function formatIPv6(bytes: Buffer): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i));
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return `::ffff:${formatIPv4(bytes, 12)}`;
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
