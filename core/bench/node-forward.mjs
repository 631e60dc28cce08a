// The CPU reference of the benchmark: a bare Node.js `net` server doing the least an MQTT broker
// must for the fixed-rate scenarios, so `bench:compare --cpu-floor` can show how close a broker
// built on net.Socket streams gets to the floor of that design. It answers CONNECT (3.1, 3.1.1,
// 5.0), SUBSCRIBE, UNSUBSCRIBE and PINGREQ, and forwards every PUBLISH to each subscriber whose
// filter matches. Not a broker: no sessions, retained messages, wills, keepalive, auth, `$share`,
// flow control or redelivery.
//
//   node core/bench/node-forward.mjs --port <n>   prints "listening <port>" once ready
import { Buffer } from 'node:buffer';
import net from 'node:net';
import process from 'node:process';
import { setTimeout } from 'node:timers';

const HOST = '127.0.0.1';
const CONNACK_V3 = Buffer.from([0x20, 0x02, 0x00, 0x00]);
const CONNACK_V5 = Buffer.from([0x20, 0x03, 0x00, 0x00, 0x00]);
const PINGRESP = Buffer.from([0xd0, 0x00]);
/** Larger frames close the connection (the generator never sends them). */
const MAX_FRAME = 16 * 1024 * 1024;

const i = process.argv.indexOf('--port');
const port = i >= 0 ? Number(process.argv[i + 1]) : 0;
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid --port ${process.argv[i + 1]}`);

/** Filters without wildcards, by topic: most publishes find their subscribers with one lookup. */
const exact = new Map();
/** Filters with `+` or `#`, matched level by level. */
const wildcard = [];

class Conn {
  constructor(socket) {
    this.socket = socket;
    this.version = 4;
    this.connected = false;
    /** An incomplete frame carried over to the next chunk. */
    this.pending = null;
    /** This connection's subscriptions: filter → subscription. */
    this.subs = new Map();
    /** Packet ids of QoS 1 deliveries to this connection (its PUBACKs are read and dropped). */
    this.nextId = 0;
  }
}

function subscriptionsOf(topic) {
  const direct = exact.get(topic);
  if (wildcard.length === 0) return direct ?? [];
  const levels = topic.split('/');
  const out = direct === undefined ? [] : [...direct];
  for (const s of wildcard) if (matches(s.levels, levels, topic)) out.push(s);
  return out;
}

function matches(filter, levels, topic) {
  // A wildcard at the first level does not match `$` topics [MQTT-4.7.2-1].
  if (topic.charCodeAt(0) === 0x24 && (filter[0] === '+' || filter[0] === '#')) return false;
  for (let k = 0; k < filter.length; k++) {
    const f = filter[k];
    if (f === '#') return true; // also the parent level: `a/#` matches `a` [MQTT-4.7.1-2]
    if (k >= levels.length) return false;
    if (f !== '+' && f !== levels[k]) return false;
  }
  return filter.length === levels.length;
}

function writeVarInt(buf, pos, n) {
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    buf[pos++] = b;
  } while (n > 0);
  return pos;
}

function varIntSize(n) {
  return n < 128 ? 1 : n < 16384 ? 2 : n < 2097152 ? 3 : 4;
}

/** [value, bytes] of a variable byte integer at `pos`, or null when it runs past `end`. */
function readVarInt(buf, pos, end) {
  let value = 0;
  let mul = 1;
  for (let k = 0; k < 4; k++) {
    if (pos + k >= end) return null;
    const b = buf[pos + k];
    value += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) return [value, k + 1];
    mul *= 128;
  }
  throw new Error('malformed remaining length');
}

function onData(chunk) {
  const c = this.conn;
  let buf = chunk;
  if (c.pending !== null) {
    buf = Buffer.concat([c.pending, chunk]);
    c.pending = null;
  }
  let pos = 0;
  const end = buf.length;
  try {
    while (pos < end) {
      const length = readVarInt(buf, pos + 1, end);
      if (length === null) break;
      if (length[0] > MAX_FRAME) throw new Error('frame too large');
      const bodyStart = pos + 1 + length[1];
      const bodyEnd = bodyStart + length[0];
      if (bodyEnd > end) break;
      packet(c, buf, pos, bodyStart, bodyEnd);
      pos = bodyEnd;
    }
  } catch {
    this.destroy();
    return;
  }
  if (pos < end) c.pending = pos === 0 ? buf : buf.subarray(pos);
}

function packet(c, buf, start, body, end) {
  const first = buf[start];
  switch (first >> 4) {
    case 1: {
      // CONNECT: protocol name, then its level (3, 4 or 5).
      const nameLength = buf.readUInt16BE(body);
      c.version = buf[body + 2 + nameLength];
      c.connected = true;
      c.socket.write(c.version === 5 ? CONNACK_V5 : CONNACK_V3);
      return;
    }
    case 3:
      publish(c, buf, start, first, body, end);
      return;
    case 4: // PUBACK from a subscriber: nothing is kept in flight, so nothing to release.
    case 7: // PUBCOMP: not sent (QoS 2 is delivered at QoS 1 at most).
      return;
    case 6: // PUBREL of a QoS 2 publish (already forwarded on PUBLISH): complete it.
      c.socket.write(Buffer.from([0x70, 0x02, buf[body], buf[body + 1]]));
      return;
    case 8:
      subscribe(c, buf, body, end);
      return;
    case 10:
      unsubscribe(c, buf, body, end);
      return;
    case 12:
      c.socket.write(PINGRESP);
      return;
    case 14:
      c.socket.end();
      return;
    default:
  }
}

/** Where a PUBLISH body's parts start: packet id (or -1), properties (v5; or -1) and payload. */
function publishLayout(version, qos, buf, body, end) {
  let pos = body + 2 + buf.readUInt16BE(body);
  let id = -1;
  if (qos > 0) {
    id = pos;
    pos += 2;
  }
  let props = -1;
  if (version === 5) {
    props = pos;
    const v = readVarInt(buf, pos, end);
    if (v === null) throw new Error('malformed properties');
    pos += v[1] + v[0];
  }
  if (pos > end) throw new Error('malformed PUBLISH');
  return { id, props, payload: pos };
}

function publish(c, buf, start, first, body, end) {
  const qos = (first >> 1) & 3;
  if (qos === 3) throw new Error('QoS 3');
  const topicEnd = body + 2 + buf.readUInt16BE(body);
  const topic = buf.toString('utf8', body + 2, topicEnd);
  const layout = publishLayout(c.version, qos, buf, body, end);
  if (qos === 1) {
    // [MQTT-4.3.2-2] PUBACK to the publisher (v5: success needs no reason code).
    c.socket.write(Buffer.from([0x40, 0x02, buf[layout.id], buf[layout.id + 1]]));
  } else if (qos === 2) {
    c.socket.write(Buffer.from([0x50, 0x02, buf[layout.id], buf[layout.id + 1]]));
  }
  const subs = subscriptionsOf(topic);
  for (let k = 0; k < subs.length; k++) {
    const s = subs[k];
    if (s.conn.socket.destroyed) continue;
    deliver(s.conn, Math.min(qos, s.qos), c.version, buf, start, first, body, topicEnd, layout, end);
  }
}

/**
 * Sends one PUBLISH to a subscriber at `qos`. The same protocol and QoS 0: the publisher's bytes
 * as they came. The same protocol and QoS 1: a copy with this connection's packet id. Otherwise
 * the packet is rebuilt from its topic, properties and payload.
 */
function deliver(to, qos, fromVersion, buf, start, first, body, topicEnd, layout, end) {
  // [MQTT-3.3.1-9] RETAIN is 0 on a delivery to an established subscription; DUP is 0 on a new one [MQTT-3.3.1-3].
  const outFirst = 0x30 | (qos << 1);
  const sameVersion = (fromVersion === 5) === (to.version === 5);
  const pubQos = (first >> 1) & 3;
  if (sameVersion && qos === pubQos && qos === 0 && first === outFirst) {
    to.socket.write(buf.subarray(start, end));
    return;
  }
  let id = 0;
  if (qos > 0) {
    to.nextId = to.nextId === 65535 ? 1 : to.nextId + 1;
    id = to.nextId;
  }
  if (sameVersion && qos === pubQos) {
    const out = Buffer.from(buf.subarray(start, end));
    out[0] = outFirst;
    if (qos > 0) out.writeUInt16BE(id, layout.id - start);
    to.socket.write(out);
    return;
  }
  // Properties as the publisher gave them for a v5 subscriber (none from a v3 publisher); dropped for v3.
  const propsStart = layout.props === -1 ? layout.payload : layout.props;
  const props = to.version !== 5 ? 0 : layout.props === -1 ? 1 : layout.payload - layout.props;
  const remaining = topicEnd - body + (qos > 0 ? 2 : 0) + props + (end - layout.payload);
  const out = Buffer.allocUnsafe(1 + varIntSize(remaining) + remaining);
  out[0] = outFirst;
  let pos = writeVarInt(out, 1, remaining);
  pos += buf.copy(out, pos, body, topicEnd);
  if (qos > 0) pos = out.writeUInt16BE(id, pos);
  if (props === 1 && layout.props === -1) out[pos++] = 0;
  else if (props > 0) pos += buf.copy(out, pos, propsStart, layout.payload);
  buf.copy(out, pos, layout.payload, end);
  to.socket.write(out);
}

/** Where a SUBSCRIBE or UNSUBSCRIBE body's topic list starts: after the packet id and (v5) the properties. */
function topicListStart(c, buf, body, end) {
  let pos = body + 2;
  if (c.version === 5) {
    const v = readVarInt(buf, pos, end);
    if (v === null) throw new Error('malformed properties');
    pos += v[1] + v[0];
  }
  return pos;
}

function subscribe(c, buf, body, end) {
  const idHi = buf[body];
  const idLo = buf[body + 1];
  let pos = topicListStart(c, buf, body, end);
  const codes = [];
  while (pos + 2 < end) {
    const n = buf.readUInt16BE(pos);
    const filter = buf.toString('utf8', pos + 2, pos + 2 + n);
    // QoS 2 is granted as 1, which a server may do; deliveries then go at QoS ≤ 1 [MQTT-3.8.4-6].
    const qos = Math.min(buf[pos + 2 + n] & 3, 1);
    pos += 3 + n;
    addSubscription(c, filter, qos);
    codes.push(qos);
  }
  const props = c.version === 5 ? 1 : 0;
  const out = Buffer.allocUnsafe(2 + 2 + props + codes.length);
  out[0] = 0x90;
  out[1] = 2 + props + codes.length;
  out[2] = idHi;
  out[3] = idLo;
  if (props === 1) out[4] = 0;
  for (let k = 0; k < codes.length; k++) out[4 + props + k] = codes[k];
  c.socket.write(out);
}

function addSubscription(c, filter, qos) {
  const old = c.subs.get(filter);
  if (old !== undefined) {
    // [MQTT-3.8.4-3] a second SUBSCRIBE to the same filter replaces the first.
    old.qos = qos;
    return;
  }
  const s = { conn: c, filter, qos, levels: filter.split('/') };
  c.subs.set(filter, s);
  if (filter.includes('+') || filter.includes('#')) wildcard.push(s);
  else {
    const list = exact.get(filter);
    if (list === undefined) exact.set(filter, [s]);
    else list.push(s);
  }
}

function removeSubscription(s) {
  const list = s.levels.includes('+') || s.levels.includes('#') ? wildcard : exact.get(s.filter);
  if (list === undefined) return;
  const k = list.indexOf(s);
  if (k >= 0) list.splice(k, 1);
  if (list !== wildcard && list.length === 0) exact.delete(s.filter);
}

function unsubscribe(c, buf, body, end) {
  const idHi = buf[body];
  const idLo = buf[body + 1];
  let pos = topicListStart(c, buf, body, end);
  const codes = [];
  while (pos + 2 <= end) {
    const n = buf.readUInt16BE(pos);
    const filter = buf.toString('utf8', pos + 2, pos + 2 + n);
    pos += 2 + n;
    const s = c.subs.get(filter);
    if (s !== undefined) {
      c.subs.delete(filter);
      removeSubscription(s);
    }
    codes.push(s === undefined ? 0x11 : 0);
  }
  if (c.version !== 5) {
    c.socket.write(Buffer.from([0xb0, 0x02, idHi, idLo]));
    return;
  }
  c.socket.write(Buffer.from([0xb0, 3 + codes.length, idHi, idLo, 0, ...codes]));
}

function onClose() {
  for (const s of this.conn.subs.values()) removeSubscription(s);
  this.conn.subs.clear();
}

function ignore() {}

const server = net.createServer({ noDelay: true }, (socket) => {
  socket.conn = new Conn(socket);
  socket.on('data', onData);
  socket.on('close', onClose);
  socket.on('error', ignore);
});
server.listen(port, HOST, () => process.stdout.write(`listening ${server.address().port}\n`));
const shutdown = () => {
  server.close(() => process.exit(0));
  // Open client sockets keep close() waiting: end them.
  setTimeout(() => process.exit(0), 1000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
