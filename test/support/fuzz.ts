import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  ack,
  auth,
  cat,
  connect,
  disconnect,
  frame,
  PID,
  PINGREQ,
  prop,
  publish,
  str,
  subscribe,
  TYPE,
  unsubscribe,
  vbi,
  type Version,
} from './mqtt-bytes';
import { USERS } from './isolation';

/**
 * The generator and mutator behind test/e2e/26-fuzz: valid packet sequences (a CONNECT that logs
 * in, then SUBSCRIBE, PUBLISH QoS 0/1/2, acks, UNSUBSCRIBE, PINGREQ, AUTH, DISCONNECT), corrupted
 * while they are built (random or duplicated properties, lying lengths, ill-formed UTF-8, QoS 3,
 * wildcards in topic names) and then as bytes (bit flips, truncation, Remaining Length
 * corruption, inserted and deleted bytes, packets duplicated or swapped), and cut into random
 * chunks for the writes. Everything derives from a seeded PRNG: (seed, index) names a case.
 */

/** mulberry32: a small, fast 32-bit PRNG; the same seed gives the same sequence everywhere. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  float(): number {
    return this.next();
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** An integer in [a, b]. */
  range(a: number, b: number): number {
    return a + this.int(b - a + 1);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)]!;
  }
  bytes(n: number): Buffer {
    return Buffer.from(Array.from({ length: n }, () => this.int(256)));
  }
}

/** The seed of case `index` of a run with `seed` (so one case replays without the ones before it). */
export function caseSeed(seed: number, index: number): number {
  let h = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

export interface FuzzCase {
  seed: number;
  index: number;
  v: Version;
  user: keyof typeof USERS;
  /** The writes, in order. */
  chunks: Buffer[];
  /** What was done to the valid sequence (for the report). */
  notes: string[];
}

export function streamOf(c: { chunks: Buffer[] }): Buffer {
  return Buffer.concat(c.chunks);
}

/**
 * How the broker must see the bytes: `complete` (every frame whole: it has to answer or close),
 * `partial` (the last frame is cut: it may wait for the rest), `invalid` (a Remaining Length of
 * more than four bytes: it has to close, §1.5.5).
 */
export function frameStatus(stream: Buffer): 'complete' | 'partial' | 'invalid' {
  let pos = 0;
  while (pos < stream.length) {
    let len = 0;
    let mul = 1;
    let i = pos + 1;
    let n = 0;
    for (;;) {
      if (i >= stream.length) return 'partial';
      const b = stream[i++]!;
      len += (b & 0x7f) * mul;
      mul *= 128;
      n++;
      if ((b & 0x80) === 0) break;
      if (n === 4) return 'invalid';
    }
    if (stream.length - i < len) return 'partial';
    pos = i + len;
  }
  return 'complete';
}

// ---------------------------------------------------------------------------------------------
// Valid sequences, with corruption while building

const BAD_STRINGS = ['610062', 'c0af', 'eda080', 'ff', 'e282', 'f888808080', 'f4908080'].map((h) => Buffer.from(h, 'hex'));

class Gen {
  readonly notes: string[] = [];
  constructor(
    readonly rng: Rng,
    readonly v: Version,
    /** Probability of each structural corruption. */
    public evil: number,
  ) {}

  /** Sometimes an ill-formed string instead of `s`. */
  s(s: string, what: string): Buffer {
    if (this.rng.chance(this.evil)) {
      const bad = cat(Buffer.from(s.slice(0, 3)), this.rng.pick(BAD_STRINGS));
      this.notes.push(`ill-formed UTF-8 in ${what}`);
      return bad;
    }
    return Buffer.from(s);
  }

  /** A length-prefixed field whose length sometimes lies. */
  field(b: Buffer, what: string): Buffer {
    if (this.rng.chance(this.evil / 2)) {
      const lie = this.rng.pick([0xffff, b.length + 1, b.length + this.rng.range(2, 300), Math.max(0, b.length - 1), 0]);
      this.notes.push(`${what} length ${lie} instead of ${b.length}`);
      return cat(lie >> 8, lie & 0xff, b);
    }
    return str(b);
  }

  topicName(base: string): Buffer {
    if (this.rng.chance(this.evil)) {
      const t = this.rng.pick(['+', '#', `${base}/+`, `${base}/#`, '', 'a/#/b', '$SYS/x', '/', '//']);
      this.notes.push(`topic name ${JSON.stringify(t)}`);
      return Buffer.from(t);
    }
    return this.s(base, 'topic');
  }

  filter(base: string): Buffer {
    if (this.rng.chance(this.evil)) {
      const f = this.rng.pick(['', 'a/#/b', 'a+', '#a', '$share//x', '$share/g', '$share/g+/x', '++', `${base}/#`, '#', '+/+/+']);
      this.notes.push(`filter ${JSON.stringify(f)}`);
      return Buffer.from(f);
    }
    return this.s(base, 'filter');
  }

  /** A v5 property block from `valid` property makers, sometimes with random, duplicated or lying ones. */
  props(valid: (() => Buffer)[]): Buffer {
    const list: Buffer[] = valid.filter(() => this.rng.chance(0.5)).map((f) => f());
    if (this.rng.chance(this.evil) && list.length > 0) {
      list.push(this.rng.pick(list));
      this.notes.push('a property twice');
    }
    if (this.rng.chance(this.evil)) {
      const id = this.rng.int(0x80);
      list.splice(this.rng.int(list.length + 1), 0, cat(id, this.rng.bytes(this.rng.int(7))));
      this.notes.push(`random property id 0x${id.toString(16)}`);
    }
    if (this.rng.chance(this.evil)) {
      const id = this.rng.pick([
        PID.reasonString,
        PID.contentType,
        PID.responseTopic,
        PID.userProperty,
        PID.authMethod,
        PID.correlationData,
      ]);
      list.push(cat(id, 0xff, 0xff, this.rng.bytes(4)));
      this.notes.push(`property 0x${id.toString(16)} with length 65535`);
    }
    const body = Buffer.concat(list);
    if (this.rng.chance(this.evil / 2)) {
      const lie = this.rng.pick([body.length + 1, body.length + 200, 0x0fffffff, Math.max(0, body.length - 1)]);
      this.notes.push(`property length ${lie} instead of ${body.length}`);
      return cat(vbi(lie), body);
    }
    return cat(vbi(body.length), body);
  }

  userProps(): Buffer {
    return prop.pair(PID.userProperty, this.s('k', 'user property'), 'v');
  }

  /** The CONNECT is corrupted less often than the rest, so most cases get past the login. */
  connect(clientId: string, user: keyof typeof USERS): Buffer {
    const evil = this.evil;
    this.evil = evil / 4;
    try {
      return this.connectPacket(clientId, user);
    } finally {
      this.evil = evil;
    }
  }

  private connectPacket(clientId: string, user: keyof typeof USERS): Buffer {
    const { rng, v } = this;
    const will = rng.chance(0.4)
      ? {
          topic: this.topicName(`fz/will/${clientId}`),
          payload: rng.bytes(rng.int(20)),
          qos: rng.chance(this.evil) ? 3 : rng.int(3),
          retain: rng.chance(0.2),
          ...(v === 5
            ? {
                props: this.props([
                  () => prop.u32(PID.willDelay, rng.int(3)),
                  () => prop.byte(PID.payloadFormat, rng.chance(this.evil) ? rng.int(256) : 0),
                  () => prop.u32(PID.messageExpiry, 60),
                  () => prop.str(PID.contentType, this.s('text/plain', 'content type')),
                  () => prop.str(PID.responseTopic, this.topicName('fz/resp')),
                  () => prop.str(PID.correlationData, rng.bytes(4)),
                  () => this.userProps(),
                ]),
              }
            : {}),
        }
      : undefined;
    const c = connect({
      v,
      clientId: this.s(clientId, 'client id'),
      username: this.s(user, 'user name'),
      password: USERS[user].password,
      ...(will ? { will } : {}),
      clean: rng.chance(0.8),
      keepalive: rng.pick([0, 5, 30, 60]),
      ...(v === 5
        ? {
            props: this.props([
              () => prop.u32(PID.sessionExpiry, rng.pick([0, 0, 10])),
              () => prop.u16(PID.receiveMaximum, rng.chance(this.evil) ? 0 : rng.range(1, 100)),
              () => prop.u32(PID.maximumPacketSize, rng.chance(this.evil) ? 0 : rng.range(1000, 1 << 20)),
              () => prop.u16(PID.topicAliasMaximum, rng.int(10)),
              () => prop.byte(PID.requestResponseInfo, rng.chance(this.evil) ? 2 : rng.int(2)),
              () => prop.byte(PID.requestProblemInfo, rng.chance(this.evil) ? 2 : rng.int(2)),
              () => this.userProps(),
            ]),
          }
        : {}),
    });
    if (rng.chance(this.evil)) {
      // Flags that contradict the payload: reserved bit, will bits without will, password without user name.
      const flagsAt = rlStart(c).bodyAt + 2 + (v === 3 ? 6 : 4) + 1;
      const f = rng.pick([0x01, 0x08, 0x18, 0x20, 0x40, 0x80, 0x04]);
      if (flagsAt < c.length) c[flagsAt] = c[flagsAt]! ^ f;
      this.notes.push(`CONNECT flags ^ 0x${f.toString(16)}`);
    }
    return c;
  }

  publishProps(): Buffer {
    const { rng } = this;
    return this.props([
      () => prop.byte(PID.payloadFormat, rng.chance(this.evil) ? rng.int(256) : rng.int(2)),
      () => prop.u32(PID.messageExpiry, rng.range(1, 100)),
      () => prop.u16(PID.topicAlias, rng.chance(this.evil) ? rng.pick([0, 0xffff, 11]) : rng.range(1, 3)),
      () => prop.str(PID.responseTopic, this.topicName('fz/resp')),
      () => prop.str(PID.correlationData, rng.bytes(rng.int(8))),
      () => prop.str(PID.contentType, this.s('application/json', 'content type')),
      () => this.userProps(),
      () => (rng.chance(this.evil * 4) ? prop.vbi(PID.subscriptionId, rng.int(5)) : this.userProps()),
    ]);
  }

  op(kind: string, id: number, base: string): Buffer {
    const { rng, v } = this;
    const v5 = v === 5;
    switch (kind) {
      case 'subscribe': {
        const n = rng.range(1, 3);
        const subs: [Buffer, number][] = Array.from({ length: n }, (_, i) => [
          this.filter(`${base}/${i}/#`),
          rng.chance(this.evil) ? rng.int(256) : v5 ? rng.int(3) | (rng.int(2) << 2) | (rng.int(2) << 3) | (rng.int(3) << 4) : rng.int(3),
        ]);
        const p = v5
          ? this.props([() => prop.vbi(PID.subscriptionId, rng.chance(this.evil) ? 0 : rng.range(1, 1000)), () => this.userProps()])
          : undefined;
        return subscribe(
          v,
          rng.chance(this.evil) ? 0 : id,
          subs.map(([f, o]) => [f, o]),
          p,
          rng.chance(this.evil) ? 0x80 | rng.int(16) : 0x82,
        );
      }
      case 'unsubscribe': {
        const p = v5 ? this.props([() => this.userProps()]) : undefined;
        return unsubscribe(
          v,
          rng.chance(this.evil) ? 0 : id,
          [this.filter(`${base}/0/#`)],
          p,
          rng.chance(this.evil) ? 0xa0 | rng.int(16) : 0xa2,
        );
      }
      case 'publish0':
      case 'publish1':
      case 'publish2': {
        let qos = Number(kind.slice(-1));
        if (rng.chance(this.evil)) {
          qos = 3;
          this.notes.push('PUBLISH QoS 3');
        }
        const dup = rng.chance(0.1);
        return publish(v, {
          topic: this.topicName(`${base}/0/x`),
          qos,
          dup,
          retain: rng.chance(0.1),
          id: rng.chance(this.evil) ? 0 : id,
          ...(v5 ? { props: this.publishProps() } : {}),
          payload: rng.bytes(rng.pick([0, 1, 10, 100, 1000])),
        });
      }
      case 'puback':
      case 'pubrec':
      case 'pubrel':
      case 'pubcomp': {
        const t = { puback: TYPE.PUBACK, pubrec: TYPE.PUBREC, pubrel: TYPE.PUBREL, pubcomp: TYPE.PUBCOMP }[kind];
        if (!v5) return ack(t, id);
        const rc = rng.chance(this.evil) ? rng.int(256) : rng.pick([0x00, 0x10, 0x80, 0x92]);
        const form = rng.int(3);
        return form === 0
          ? ack(t, id)
          : form === 1
            ? ack(t, id, rc)
            : ack(t, id, rc, this.props([() => prop.str(PID.reasonString, this.s('why', 'reason string')), () => this.userProps()]));
      }
      case 'pingreq':
        return rng.chance(this.evil) ? frame(0xc0 | rng.int(16), rng.bytes(rng.int(3))) : PINGREQ;
      case 'auth':
        return auth(
          rng.pick([0x00, 0x18, 0x19, rng.int(256)]),
          this.props([() => prop.str(PID.authMethod, this.s('SCRAM-SHA-1', 'auth method')), () => prop.str(PID.authData, rng.bytes(8))]),
        );
      case 'disconnect':
        if (!v5) return rng.chance(this.evil) ? frame(0xe0 | rng.int(16), rng.bytes(rng.int(2))) : disconnect();
        return disconnect(
          rng.chance(this.evil) ? rng.int(256) : rng.pick([0x00, 0x04]),
          this.props([
            () => prop.u32(PID.sessionExpiry, rng.int(2)),
            () => prop.str(PID.reasonString, this.s('bye', 'reason string')),
            () => this.userProps(),
          ]),
        );
      default:
        throw new Error(`unknown op ${kind}`);
    }
  }
}

const OPS = ['subscribe', 'unsubscribe', 'publish0', 'publish1', 'publish2', 'puback', 'pubrec', 'pubrel', 'pubcomp', 'pingreq', 'auth'];

// ---------------------------------------------------------------------------------------------
// Byte-level mutations

function rlStart(p: Buffer): { bodyAt: number } {
  let i = 1;
  while (i < p.length && i < 5 && p[i]! & 0x80) i++;
  return { bodyAt: Math.min(p.length, i + 1) };
}

function withBody(p: Buffer, body: Buffer, fixLength: boolean): Buffer {
  if (!fixLength) return cat(p.subarray(0, rlStart(p).bodyAt), body);
  return cat(p[0]!, vbi(body.length), body);
}

type Mutator = (rng: Rng, p: Buffer) => [Buffer[], string];

const MUTATORS: Record<string, Mutator> = {
  bitflip: (rng, p) => {
    const b = Buffer.from(p);
    const n = rng.range(1, 4);
    for (let i = 0; i < n; i++) {
      const at = rng.int(b.length);
      b[at] = b[at]! ^ (1 << rng.int(8));
    }
    return [[b], `${n} bit flips`];
  },
  byte: (rng, p) => {
    const b = Buffer.from(p);
    const at = rng.int(b.length);
    b[at] = rng.pick([0x00, 0xff, 0x7f, 0x80, rng.int(256)]);
    return [[b], `byte ${at} = 0x${b[at]!.toString(16)}`];
  },
  truncate: (rng, p) => {
    const { bodyAt } = rlStart(p);
    const body = p.subarray(bodyAt);
    const keep = rng.int(Math.max(1, body.length));
    const fix = rng.chance(0.7);
    return [
      [withBody(p, body.subarray(0, keep), fix)],
      `body cut to ${keep} of ${body.length} bytes${fix ? '' : ', Remaining Length kept'}`,
    ];
  },
  remainingLength: (rng, p) => {
    const { bodyAt } = rlStart(p);
    const body = p.subarray(bodyAt);
    const choice = rng.int(5);
    if (choice === 0) return [[cat(p[0]!, 0xff, 0xff, 0xff, 0xff, 0x7f, body)], 'Remaining Length of five bytes'];
    if (choice === 1) return [[cat(p[0]!, vbi(0x0fffffff), body)], 'Remaining Length 268435455'];
    if (choice === 2) {
      // Non-minimal encoding of the right value.
      const v = vbi(body.length);
      const padded = v.length < 4 ? cat(...Array.from(v.subarray(0, -1)).map((x) => x | 0x80), v[v.length - 1]! | 0x80, 0x00) : v;
      return [[cat(p[0]!, padded, body)], 'Remaining Length not minimally encoded'];
    }
    const lie = Math.max(0, body.length + rng.pick([-3, -2, -1, 1, 2, 100, 70000]));
    return [[cat(p[0]!, vbi(lie), body)], `Remaining Length ${lie} instead of ${body.length}`];
  },
  insert: (rng, p) => {
    const { bodyAt } = rlStart(p);
    const body = p.subarray(bodyAt);
    const at = rng.int(body.length + 1);
    const extra = rng.bytes(rng.range(1, 8));
    const fix = rng.chance(0.7);
    return [
      [withBody(p, cat(body.subarray(0, at), extra, body.subarray(at)), fix)],
      `${extra.length} bytes inserted at ${at}${fix ? '' : ', Remaining Length kept'}`,
    ];
  },
  delete: (rng, p) => {
    const { bodyAt } = rlStart(p);
    const body = p.subarray(bodyAt);
    if (body.length === 0) return [[p], 'nothing to delete'];
    const at = rng.int(body.length);
    const n = rng.range(1, Math.min(4, body.length - at));
    const fix = rng.chance(0.7);
    return [
      [withBody(p, cat(body.subarray(0, at), body.subarray(at + n)), fix)],
      `${n} bytes deleted at ${at}${fix ? '' : ', Remaining Length kept'}`,
    ];
  },
  type: (rng, p) => {
    const b = Buffer.from(p);
    b[0] = rng.int(256);
    return [[b], `first byte 0x${b[0]!.toString(16)}`];
  },
  duplicate: (_rng, p) => [[p, p], 'packet sent twice'],
  garbage: (rng, p) => [[p, rng.bytes(rng.range(1, 40))], 'random bytes after the packet'],
};
const MUTATOR_NAMES = Object.keys(MUTATORS);

// ---------------------------------------------------------------------------------------------
// Cases

export function generateCase(seed: number, index: number): FuzzCase {
  const rng = new Rng(caseSeed(seed, index));
  const v = rng.pick([3, 4, 4, 5, 5, 5] as const);
  const user = rng.pick(['alice', 'bob'] as const);
  const clientId = `fz${(seed >>> 0).toString(36)}-${index.toString(36)}`;
  const g = new Gen(rng, v, rng.pick([0, 0.03, 0.08, 0.15]));
  const packets: Buffer[] = [g.connect(clientId, user)];
  const n = rng.range(0, 7);
  let id = rng.range(1, 5);
  const ops = v === 5 ? OPS : OPS.filter((o) => o !== 'auth');
  for (let i = 0; i < n; i++) packets.push(g.op(rng.pick(ops), id++, `fz/${clientId}`));
  if (rng.chance(0.2)) packets.push(g.op('disconnect', 0, ''));
  const notes = [`v${v === 4 ? '3.1.1' : v === 5 ? '5' : '3.1'} as ${user}`, ...g.notes];

  let mutations = rng.pick([0, 1, 1, 1, 2, 3]);
  if (mutations === 0 && g.notes.length === 0) mutations = 1;
  for (let m = 0; m < mutations; m++) {
    const at = packets.length > 1 && !rng.chance(0.15) ? rng.range(1, packets.length - 1) : 0;
    const name = rng.chance(0.1) && packets.length > 2 ? 'swap' : rng.pick(MUTATOR_NAMES);
    if (name === 'swap') {
      const j = at === packets.length - 1 ? at - 1 : at + 1;
      [packets[at], packets[j]] = [packets[j]!, packets[at]!];
      notes.push(`packets ${at} and ${j} swapped`);
      continue;
    }
    const [out, note] = MUTATORS[name]!(rng, packets[at]!);
    packets.splice(at, 1, ...out);
    notes.push(`packet ${at}: ${note}`);
  }

  // How the bytes are written: all at once, packet by packet, random chunk sizes, or byte by byte.
  const stream = Buffer.concat(packets);
  const mode = rng.pick(['whole', 'packets', 'random', 'random', stream.length < 400 ? 'bytes' : 'random']);
  let chunks: Buffer[];
  if (mode === 'whole') chunks = [stream];
  else if (mode === 'packets') chunks = packets;
  else {
    chunks = [];
    const max = mode === 'bytes' ? 1 : rng.pick([2, 7, 16, 64, 300]);
    for (let pos = 0; pos < stream.length;) {
      const k = rng.range(1, max);
      chunks.push(stream.subarray(pos, pos + k));
      pos += k;
    }
  }
  notes.push(`${chunks.length} write${chunks.length === 1 ? '' : 's'} (${mode})`);
  return { seed, index, v, user, chunks, notes };
}

// ---------------------------------------------------------------------------------------------
// Corpus: test/fixtures/fuzz-corpus/*.hex

export const CORPUS_DIR = path.resolve(__dirname, '..', 'fixtures', 'fuzz-corpus');

export interface CorpusEntry {
  file: string;
  headers: Record<string, string>;
  chunks: Buffer[];
}

/** `# key: value` header lines, then one hex line per write (spaces allowed); blank lines ignored. */
export function parseCorpusFile(text: string, file = ''): CorpusEntry {
  const headers: Record<string, string> = {};
  const chunks: Buffer[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^#\s*([\w-]+):\s*(.*)$/.exec(line);
      if (m) headers[m[1]!.toLowerCase()] = m[2]!;
      continue;
    }
    const h = line.replace(/\s+/g, '');
    if (!/^([0-9a-fA-F]{2})+$/.test(h)) throw new Error(`${file}: not a hex line: ${line.slice(0, 40)}`);
    chunks.push(Buffer.from(h, 'hex'));
  }
  if (chunks.length === 0) throw new Error(`${file}: no bytes`);
  return { file, headers, chunks };
}

export function readCorpus(dir = CORPUS_DIR): CorpusEntry[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.hex'))
    .sort()
    .map((f) => parseCorpusFile(readFileSync(path.join(dir, f), 'utf8'), f));
}

/** Writes a failing case to the corpus; returns the file path. */
export function writeCorpusCase(c: FuzzCase, failure: string, extra: string[] = [], dir = CORPUS_DIR): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `found-${c.seed.toString(16)}-${c.index}.hex`);
  const lines = [
    `# seed: ${c.seed}`,
    `# index: ${c.index}`,
    `# reproduce: BIFRO_FUZZ_SEED=${c.seed}:${c.index} npx jest test/e2e/26-fuzz.test.ts --runInBand`,
    `# failed: ${failure.replace(/\s+/g, ' ')}`,
    `# found: ${new Date().toISOString()}`,
    ...c.notes.map((n) => `# note: ${n}`),
    ...extra.map((n) => `# note: ${n}`),
    ...c.chunks.map((b) => b.toString('hex')),
    '',
  ];
  writeFileSync(file, lines.join('\n'));
  return file;
}

/** `<seed>` or `<seed>:<index>` (decimal or 0x hex) from `value` (an environment variable or option called `what`); undefined when empty. */
export function parseSeed(value: string | undefined, what: string): { seed: number; index?: number } | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const m = /^\s*(0x[0-9a-f]+|\d+)\s*(?::\s*(\d+))?\s*$/i.exec(value);
  if (m === null) throw new Error(`${what} must be <seed> or <seed>:<index>, got ${value}`);
  const seed = Number(m[1]) >>> 0;
  return m[2] === undefined ? { seed } : { seed, index: Number(m[2]) };
}

/** One seed's share of a seeded run's time budget; `only`: that one case. */
export interface SeedRun {
  readonly seed: number;
  readonly seconds: number;
  readonly only?: number;
}

/**
 * How a seeded standing defence (the fuzzer, the delivery checker) spends its budget: the seed
 * given (`env`), all of it, or just case `index`; otherwise 40 % a fixed seed (the same cases in
 * every run) and 60 % a random one (new cases, printed for a replay).
 */
export function seedRuns(
  env: { seed: number; index?: number } | undefined,
  budgetSeconds: number,
  fixedSeed: number,
  randomSeed: number,
): SeedRun[] {
  if (env !== undefined)
    return [
      { seed: env.seed, seconds: env.index !== undefined ? 0 : budgetSeconds, ...(env.index !== undefined ? { only: env.index } : {}) },
    ];
  return [
    { seed: fixedSeed, seconds: budgetSeconds * 0.4 },
    { seed: randomSeed, seconds: budgetSeconds * 0.6 },
  ];
}

/** The seeds a run uses, printed at its start: `<seed>[:<index>] (<s> s), …`. */
export function describeSeedRuns(runs: readonly SeedRun[]): string {
  return runs.map((r) => `${r.seed}${r.only !== undefined ? `:${r.only}` : ''} (${r.seconds.toFixed(0)} s)`).join(', ');
}
