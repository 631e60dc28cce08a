import net from 'node:net';
import { HOST } from './mqtt-helpers';
import { USERS } from './isolation';
import { PACKET } from '../../core/src/codec/packet-types';

/**
 * MQTT packets as bytes, for tests that must send what no client library would: small builders
 * (every length computed, or overridden on purpose), a socket that records the raw bytes the
 * broker answers with, and the one way the hostile-input suites (test/e2e/25, 26) run a case and
 * judge what came back. Every wait is bounded.
 */

export type Version = 3 | 4 | 5;

/** `'10 12 00 04'` → bytes; spaces and newlines are ignored. */
export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

export function toHex(b: Buffer): string {
  return b.toString('hex');
}

type Part = Buffer | number[] | number;

/** Concatenate parts: a Buffer, an array of byte values, or one byte value. */
export function cat(...parts: Part[]): Buffer {
  return Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(typeof p === 'number' ? [p] : p))));
}

/** Variable Byte Integer, minimal encoding (§1.5.5). */
export function vbi(n: number): Buffer {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}

export function u16(n: number): Buffer {
  return Buffer.from([(n >> 8) & 0xff, n & 0xff]);
}

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

/** A two-byte-length-prefixed string or binary field (§1.5.4, §1.5.6); bytes are taken as they are. */
export function str(s: string | Buffer): Buffer {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8');
  return cat(u16(b.length), b);
}

/** Fixed header byte + minimal Remaining Length + body. */
export function frame(first: number, ...body: Part[]): Buffer {
  const b = cat(...body);
  return cat(first, vbi(b.length), b);
}

/** A property block: its VBI length, then the properties. */
export function props(...p: Buffer[]): Buffer {
  const b = Buffer.concat(p);
  return cat(vbi(b.length), b);
}

/** One property of each data type (§2.2.2.2). */
export const prop = {
  byte: (id: number, v: number): Buffer => cat(id, v),
  u16: (id: number, v: number): Buffer => cat(id, u16(v)),
  u32: (id: number, v: number): Buffer => cat(id, u32(v)),
  vbi: (id: number, v: number): Buffer => cat(id, vbi(v)),
  str: (id: number, s: string | Buffer): Buffer => cat(id, str(s)),
  pair: (id: number, k: string | Buffer, v: string | Buffer): Buffer => cat(id, str(k), str(v)),
};

/** Property identifiers (MQTT 5 Table 2-4). */
export const PID = {
  payloadFormat: 0x01,
  messageExpiry: 0x02,
  contentType: 0x03,
  responseTopic: 0x08,
  correlationData: 0x09,
  subscriptionId: 0x0b,
  sessionExpiry: 0x11,
  assignedClientId: 0x12,
  serverKeepAlive: 0x13,
  authMethod: 0x15,
  authData: 0x16,
  requestProblemInfo: 0x17,
  willDelay: 0x18,
  requestResponseInfo: 0x19,
  responseInfo: 0x1a,
  serverReference: 0x1c,
  reasonString: 0x1f,
  receiveMaximum: 0x21,
  topicAliasMaximum: 0x22,
  topicAlias: 0x23,
  maximumQoS: 0x24,
  retainAvailable: 0x25,
  userProperty: 0x26,
  maximumPacketSize: 0x27,
  wildcardAvailable: 0x28,
  subIdAvailable: 0x29,
  sharedAvailable: 0x2a,
} as const;

// ---------------------------------------------------------------------------------------------
// Packet builders (client → server)

export interface WillSpec {
  topic: string | Buffer;
  payload?: string | Buffer;
  qos?: number;
  retain?: boolean;
  /** v5 will properties, a whole block (length included); an empty block by default. */
  props?: Buffer;
}

export interface ConnectSpec {
  v: Version;
  clientId: string | Buffer;
  username?: string | Buffer;
  password?: string | Buffer;
  will?: WillSpec;
  clean?: boolean;
  keepalive?: number;
  /** v5 CONNECT properties, a whole block; an empty block by default. */
  props?: Buffer;
  /** Replace the protocol name field (the length-prefixed string) with these bytes. */
  protocolName?: Buffer;
  level?: number;
  /** Force the connect flags byte (after the flags were computed from the fields). */
  flags?: number;
  /** Bytes appended after the payload, inside the Remaining Length. */
  trailing?: Buffer;
}

/** CONNECT with flags computed from the fields present (§3.1.2.3). */
export function connect(c: ConnectSpec): Buffer {
  const name = c.protocolName ?? str(c.v === 3 ? 'MQIsdp' : 'MQTT');
  let flags = c.clean === false ? 0 : 0x02;
  if (c.will !== undefined) flags |= 0x04 | ((c.will.qos ?? 0) << 3) | (c.will.retain ? 0x20 : 0);
  if (c.password !== undefined) flags |= 0x40;
  if (c.username !== undefined) flags |= 0x80;
  if (c.flags !== undefined) flags = c.flags;
  const v5 = c.v === 5;
  const payload: Buffer[] = [str(c.clientId)];
  if (c.will !== undefined) {
    if (v5) payload.push(c.will.props ?? props());
    payload.push(str(c.will.topic), str(c.will.payload ?? 'will'));
  }
  if (c.username !== undefined) payload.push(str(c.username));
  if (c.password !== undefined) payload.push(str(c.password));
  return frame(0x10, name, c.level ?? c.v, flags, u16(c.keepalive ?? 30), v5 ? (c.props ?? props()) : [], ...payload, c.trailing ?? []);
}

/** CONNECT that logs in with the user's own password (alice or bob of the user-table fixture). */
export function loginConnect(v: Version, clientId: string, user: keyof typeof USERS, extra: Partial<ConnectSpec> = {}): Buffer {
  return connect({ v, clientId, username: user, password: USERS[user].password, ...extra });
}

export interface PublishSpec {
  qos?: number;
  dup?: boolean;
  retain?: boolean;
  topic: string | Buffer;
  /** Packet id, for QoS > 0 (default 1). */
  id?: number;
  /** v5 properties block; an empty block by default. */
  props?: Buffer;
  payload?: string | Buffer;
  /** Force the first byte. */
  first?: number;
}

export function publish(v: Version, p: PublishSpec): Buffer {
  const qos = p.qos ?? 0;
  const first = p.first ?? 0x30 | (p.dup ? 0x08 : 0) | (qos << 1) | (p.retain ? 0x01 : 0);
  const hasId = ((first >> 1) & 0x03) > 0;
  return frame(first, str(p.topic), hasId ? u16(p.id ?? 1) : [], v === 5 ? (p.props ?? props()) : [], Buffer.from(p.payload ?? 'x'));
}

/** SUBSCRIBE with `[filter, options byte]` pairs. */
export function subscribe(v: Version, id: number, subs: [string | Buffer, number][], p?: Buffer, first = 0x82): Buffer {
  return frame(first, u16(id), v === 5 ? (p ?? props()) : [], ...subs.map(([f, o]) => cat(str(f), o)));
}

export function unsubscribe(v: Version, id: number, filters: (string | Buffer)[], p?: Buffer, first = 0xa2): Buffer {
  return frame(first, u16(id), v === 5 ? (p ?? props()) : [], ...filters.map((f) => str(f)));
}

/** The packet types, as the broker names them (core/src/protocol/packet-types.ts). */
export const TYPE = PACKET;

export const TYPE_NAME: Record<number, string> = Object.fromEntries(Object.entries(TYPE).map(([k, v]) => [v, k]));

/** PUBACK/PUBREC/PUBREL/PUBCOMP: id, then (v5) an optional reason code and optional properties block. */
export function ack(type: number, id: number, rc?: number, p?: Buffer): Buffer {
  const first = (type << 4) | (type === TYPE.PUBREL ? 0x02 : 0);
  return frame(first, u16(id), rc === undefined ? [] : rc, p ?? []);
}

export const PINGREQ = hex('c000');

export function disconnect(rc?: number, p?: Buffer): Buffer {
  return frame(0xe0, rc === undefined ? [] : rc, p ?? []);
}

export function auth(rc?: number, p?: Buffer): Buffer {
  return frame(0xf0, rc === undefined ? [] : rc, p ?? []);
}

// ---------------------------------------------------------------------------------------------
// What the broker sends back

export interface Frame {
  type: number;
  flags: number;
  body: Buffer;
}

/** Splits complete frames off the front of `buf`; returns them and the bytes left over. */
export function splitFrames(buf: Buffer): { frames: Frame[]; rest: Buffer } {
  const frames: Frame[] = [];
  let pos = 0;
  for (;;) {
    if (buf.length - pos < 2) break;
    let len = 0;
    let mul = 1;
    let i = pos + 1;
    let complete = false;
    for (let n = 0; n < 4 && i < buf.length; n++, i++) {
      len += (buf[i]! & 0x7f) * mul;
      mul *= 128;
      if ((buf[i]! & 0x80) === 0) {
        complete = true;
        i++;
        break;
      }
    }
    if (!complete || buf.length - i < len) break;
    frames.push({ type: buf[pos]! >> 4, flags: buf[pos]! & 0x0f, body: buf.subarray(i, i + len) });
    pos = i + len;
  }
  return { frames, rest: buf.subarray(pos) };
}

/** The reason code of a CONNACK (v3 return code or v5 reason code: the second body byte). */
export function connackCode(f: Frame): number | undefined {
  return f.body[1];
}

/** The reason code of a DISCONNECT (0x00 when the body is empty, §3.14.2.1). */
export function disconnectCode(f: Frame): number {
  return f.body.length === 0 ? 0 : f.body[0]!;
}

/** Reads one property value of a CONNACK (v5) body: a u16 property by id, if present. */
export function connackU16Property(f: Frame, id: number): number | undefined {
  const b = f.body;
  let pos = 2;
  let len = 0;
  let mul = 1;
  for (let n = 0; n < 4 && pos < b.length; n++) {
    const x = b[pos++]!;
    len += (x & 0x7f) * mul;
    mul *= 128;
    if ((x & 0x80) === 0) break;
  }
  const end = Math.min(b.length, pos + len);
  const size: Record<number, number> = {
    0x01: 1,
    0x02: 4,
    0x11: 4,
    0x13: 2,
    0x17: 1,
    0x19: 1,
    0x21: 2,
    0x22: 2,
    0x23: 2,
    0x24: 1,
    0x25: 1,
    0x27: 4,
  };
  size[0x28] = size[0x29] = size[0x2a] = 1;
  while (pos < end) {
    const pid = b[pos++]!;
    if (pid === id) return b.readUInt16BE(pos);
    if (size[pid] !== undefined) pos += size[pid]!;
    else if (pid === 0x0b) while (pos < end && b[pos++]! & 0x80);
    else if (pid === 0x26) pos += 2 + b.readUInt16BE(pos) + 2 + b.readUInt16BE(pos + 2 + b.readUInt16BE(pos));
    else pos += 2 + b.readUInt16BE(pos);
  }
  return undefined;
}

/** The code a reply carries: CONNACK's reason code, the last SUBACK/UNSUBACK code, an ack's reason code (0x00 when omitted). */
export function replyCode(f: Frame): number {
  if (f.type === TYPE.CONNACK) return connackCode(f) ?? -1;
  if (f.type === TYPE.SUBACK || f.type === TYPE.UNSUBACK) return f.body.length > 2 ? f.body[f.body.length - 1]! : -1;
  return f.body.length > 2 ? f.body[2]! : 0;
}

export function describeFrame(f: Frame): string {
  const name = TYPE_NAME[f.type] ?? `type ${f.type}`;
  if (f.type === TYPE.CONNACK) return `CONNACK 0x${hex2(connackCode(f) ?? 0)}`;
  if (f.type === TYPE.DISCONNECT) return `DISCONNECT 0x${hex2(disconnectCode(f))}`;
  if (f.type === TYPE.SUBACK || f.type === TYPE.UNSUBACK) return `${name} ${f.body.toString('hex')}`;
  if (f.type >= TYPE.PUBACK && f.type <= TYPE.PUBCOMP) return `${name} ${f.body.toString('hex')}`;
  return name;
}

export function hex2(n: number): string {
  return n.toString(16).padStart(2, '0');
}

/** A socket that keeps every byte the broker sends and knows when it closed. */
export class ByteConn {
  private buf: Buffer = Buffer.alloc(0);
  readonly frames: Frame[] = [];
  closed = false;
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      const { frames, rest } = splitFrames(Buffer.concat([this.buf, d]));
      this.buf = rest;
      this.frames.push(...frames);
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  static open(port: number, timeoutMs = 3000): Promise<ByteConn> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, HOST);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('TCP connect timed out'));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.setNoDelay(true);
        resolve(new ByteConn(socket));
      });
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  write(b: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(b);
  }

  /** Waits until `done()` holds, the socket closed, or the time ran out; resolves `done()`. */
  async until(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done() && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return done();
  }

  /** Unparsed bytes left (a partial frame when the broker closed mid-packet). */
  get leftover(): Buffer {
    return this.buf;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

// ---------------------------------------------------------------------------------------------
// Expected outcomes and how a case is judged

/**
 * - `close`: the broker closes the connection and sends nothing at all (v3.1/3.1.1 after CONNACK).
 * - `disconnect`: DISCONNECT with one of `codes`, then close, nothing else (v5 after CONNACK).
 * - `refuse`: for a CONNECT: the connection is closed; a CONNACK before the close is `forbidden`
 *   (v3.1.1 [MQTT-3.1.4-1]), `optional` (v5 §4.13.1: MAY, and then with one of `codes`), or
 *   `required` (e.g. unsupported protocol level [MQTT-3.1.2-2]).
 * - `open`: the input is valid: the connection stays open, a PINGREQ sent after it is answered,
 *   no DISCONNECT; `reply` (a packet type) must come first when given.
 */
export type Expect =
  | { t: 'close' }
  | { t: 'disconnect'; codes: readonly number[] }
  | { t: 'refuse'; connack: 'forbidden' | 'optional' | 'required'; codes: readonly number[] }
  | { t: 'open'; reply?: number; replyCodes?: readonly number[] };

export function describeExpect(e: Expect): string {
  const codes = (cs: readonly number[]): string => cs.map((c) => `0x${hex2(c)}`).join('|');
  switch (e.t) {
    case 'close':
      return 'close, nothing sent';
    case 'disconnect':
      return `DISCONNECT ${codes(e.codes)} + close`;
    case 'refuse':
      return e.connack === 'forbidden'
        ? 'close without CONNACK'
        : e.connack === 'required'
          ? `CONNACK ${codes(e.codes)} + close`
          : `close (CONNACK ${codes(e.codes)} allowed first)`;
    case 'open':
      return e.reply === undefined
        ? 'stays open'
        : `stays open, answers ${TYPE_NAME[e.reply]}${e.replyCodes ? ` ${codes(e.replyCodes)}` : ''}`;
  }
}

export interface Observed {
  closed: boolean;
  frames: Frame[];
  /** Bytes of a partial frame the broker left when it closed. */
  leftover: Buffer;
  /** Whether a PINGREQ probe was sent after the case's bytes. */
  probed: boolean;
}

export function describeObserved(o: Observed): string {
  const sent = o.frames.map(describeFrame);
  if (o.leftover.length > 0) sent.push(`partial frame ${o.leftover.toString('hex')}`);
  return `${sent.length === 0 ? 'sent nothing' : `sent ${sent.join(', ')}`}; ${o.closed ? 'closed' : 'did not close'}${o.probed ? ' (PINGREQ probe sent)' : ''}`;
}

/** The problems with `o` against `e`; empty when the outcome is the expected one. */
export function judge(e: Expect, o: Observed): string[] {
  const problems: string[] = [];
  const types = o.frames.map((f) => f.type);
  const codes = (cs: readonly number[]): string => cs.map((c) => `0x${hex2(c)}`).join('|');
  if (o.leftover.length > 0) problems.push('sent a partial frame');
  switch (e.t) {
    case 'close':
      if (!o.closed) problems.push('did not close');
      if (o.frames.length > 0) problems.push(`sent ${o.frames.map(describeFrame).join(', ')} (must send nothing)`);
      break;
    case 'disconnect': {
      if (!o.closed) problems.push('did not close');
      const d = o.frames.find((f) => f.type === TYPE.DISCONNECT);
      if (d === undefined) problems.push(`no DISCONNECT (expected ${codes(e.codes)})`);
      else if (!e.codes.includes(disconnectCode(d))) problems.push(`DISCONNECT 0x${hex2(disconnectCode(d))}, expected ${codes(e.codes)}`);
      const other = o.frames.filter((f) => f.type !== TYPE.DISCONNECT);
      if (other.length > 0) problems.push(`also sent ${other.map(describeFrame).join(', ')}`);
      if (types.filter((t) => t === TYPE.DISCONNECT).length > 1) problems.push('more than one DISCONNECT');
      break;
    }
    case 'refuse': {
      if (!o.closed) problems.push('did not close');
      const acks = o.frames.filter((f) => f.type === TYPE.CONNACK);
      const other = o.frames.filter((f) => f.type !== TYPE.CONNACK);
      if (other.length > 0) problems.push(`sent ${other.map(describeFrame).join(', ')}`);
      if (acks.length > 1) problems.push('more than one CONNACK');
      const ack0 = acks[0];
      if (ack0 !== undefined && connackCode(ack0) === 0) problems.push('accepted the CONNECT (CONNACK 0x00)');
      else if (e.connack === 'forbidden' && ack0 !== undefined) problems.push(`sent ${describeFrame(ack0)} (must close without CONNACK)`);
      else if (e.connack === 'required' && ack0 === undefined) problems.push(`no CONNACK (expected ${codes(e.codes)})`);
      else if (ack0 !== undefined && e.connack !== 'forbidden' && !e.codes.includes(connackCode(ack0) ?? -1))
        problems.push(`${describeFrame(ack0)}, expected ${codes(e.codes)}`);
      break;
    }
    case 'open': {
      if (o.closed) problems.push('closed the connection');
      const d = o.frames.find((f) => f.type === TYPE.DISCONNECT);
      if (d !== undefined) problems.push(`sent ${describeFrame(d)}`);
      if (!types.includes(TYPE.PINGRESP)) problems.push('no PINGRESP to the PINGREQ sent after the input');
      if (e.reply !== undefined) {
        const r = o.frames.find((f) => f.type === e.reply);
        if (r === undefined) problems.push(`no ${TYPE_NAME[e.reply]}`);
        else if (e.replyCodes !== undefined) {
          const rc = replyCode(r);
          if (!e.replyCodes.includes(rc)) problems.push(`${describeFrame(r)}: code 0x${hex2(rc)}, expected ${codes(e.replyCodes)}`);
        }
      }
      break;
    }
  }
  return problems;
}

export interface RunOptions {
  /** Log in (as `user`, with its own password) before writing the bytes; otherwise the bytes are the first thing sent. */
  login?: { v: Version; user: keyof typeof USERS; clientId: string; extra?: Partial<ConnectSpec> };
  /** How long to wait for the close before sending a PINGREQ probe (post-login cases), ms. */
  probeAfterMs?: number;
  /** Overall bound for the outcome, ms. */
  timeoutMs?: number;
  /** Write the bytes in these chunk sizes (in turn, each in its own write). */
  chunks?: number[];
}

export interface RunResult {
  observed: Observed;
  /** A problem before the case's bytes were even sent (login failed). */
  setupError?: string;
  /** The v5 Topic Alias Maximum the broker announced in the login CONNACK (0 if none). */
  topicAliasMaximum: number;
}

/**
 * Opens a connection, optionally logs in, writes `bytes` (computed after the login, from what the
 * CONNACK announced), and watches the outcome for `expect`:
 * a `refuse` or pre-login case waits for the close (a CONNACK 0x00 ends the wait at once);
 * otherwise the close is awaited for `probeAfterMs`, and then a PINGREQ probe is written so that
 * a broker that ignored the input answers at once (a PINGRESP, which the judge reports), instead
 * of the test waiting out the whole timeout.
 */
export async function runBytes(
  port: number,
  bytes: Buffer | ((ctx: { topicAliasMaximum: number }) => Buffer),
  expect: Expect,
  opts: RunOptions = {},
): Promise<RunResult> {
  const timeoutMs = opts.timeoutMs ?? 1500;
  const conn = await ByteConn.open(port);
  let topicAliasMaximum = 0;
  const observed = (probed: boolean): Observed => ({ closed: conn.closed, frames: [...conn.frames], leftover: conn.leftover, probed });
  try {
    if (opts.login !== undefined) {
      const { v, user, clientId, extra } = opts.login;
      conn.write(loginConnect(v, clientId, user, extra));
      await conn.until(() => conn.frames.length > 0, 3000);
      const ack0 = conn.frames.shift();
      if (ack0?.type !== TYPE.CONNACK || connackCode(ack0) !== 0)
        return {
          observed: observed(false),
          setupError: `login failed: ${ack0 ? describeFrame(ack0) : conn.closed ? 'closed' : 'no CONNACK'}`,
          topicAliasMaximum,
        };
      if (v === 5) topicAliasMaximum = connackU16Property(ack0, PID.topicAliasMaximum) ?? 0;
    }
    const b = typeof bytes === 'function' ? bytes({ topicAliasMaximum }) : bytes;
    if (opts.chunks !== undefined && opts.chunks.length > 0) {
      let pos = 0;
      for (let i = 0; pos < b.length; i++) {
        const n = Math.max(1, opts.chunks[i % opts.chunks.length]!);
        conn.write(b.subarray(pos, pos + n));
        pos += n;
        if (i % 4 === 3) await new Promise<void>((r) => setImmediate(r));
      }
    } else conn.write(b);

    if (expect.t === 'open') {
      // A CONNECT that should be accepted: wait for its CONNACK before the probe.
      if (opts.login === undefined) await conn.until(() => conn.frames.some((f) => f.type === TYPE.CONNACK), timeoutMs);
      conn.write(PINGREQ);
      const want = (): boolean =>
        conn.frames.some((f) => f.type === TYPE.PINGRESP) &&
        (expect.reply === undefined || conn.frames.some((f) => f.type === expect.reply));
      await conn.until(() => want() || conn.frames.some((f) => f.type === TYPE.DISCONNECT), timeoutMs);
      return { observed: observed(true), topicAliasMaximum };
    }
    if (opts.login === undefined || expect.t === 'refuse') {
      await conn.until(() => conn.frames.some((f) => f.type === TYPE.CONNACK && connackCode(f) === 0), timeoutMs);
      return { observed: observed(false), topicAliasMaximum };
    }
    // close / disconnect after a login: a broker that reacts sends DISCONNECT and closes quickly.
    const probeAfter = Math.min(opts.probeAfterMs ?? 150, timeoutMs);
    const answered = (): boolean => conn.frames.some((f) => f.type !== TYPE.DISCONNECT);
    await conn.until(answered, probeAfter);
    if (conn.closed || answered()) return { observed: observed(false), topicAliasMaximum };
    conn.write(PINGREQ);
    await conn.until(answered, timeoutMs - probeAfter);
    return { observed: observed(true), topicAliasMaximum };
  } finally {
    conn.destroy();
  }
}
