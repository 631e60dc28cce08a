import net from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import mqttPacket, { type IConnackPacket, type Packet } from 'mqtt-packet';
import { createWebSocketStream, WebSocket } from 'ws';
import type { ClientCertificate } from '@bifro/spi';
import { proxyV1Tcp4, proxyV2Tcp4 } from '../support/proxy-headers';
import { FIXTURE_PLUGINS, startTestBroker, type TestBroker } from '../support/test-broker';
import { createTestCerts, type TestCerts } from '../support/tls-certs';

/**
 * Area 13, transports: the same MQTT conversation over tcp, tls (with and without a client
 * certificate), ws and wss, with MQTT.js and with raw packets; and PROXY protocol v1/v2 in front of
 * tcp. Each transport is one entry of `transports` with a function that opens an MQTT.js client
 * and one that opens a raw byte stream, so later areas can reuse the table.
 */

/** What the fixture auth plugin saw for one CONNECT. */
interface AuthRecord {
  readonly clientId: string;
  readonly userId: string;
  readonly listener: string;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly clientCertificate?: ClientCertificate;
}

// The broker loads this very module (same process, same module registry) and pushes into it; an
// import would need type declarations for a plain-JS fixture, so require it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { records } = require(path.join(FIXTURE_PLUGINS, 'auth-records-origin')) as { records: AuthRecord[] };

interface Transport {
  readonly name: string;
  /** The broker listener it talks to. */
  readonly listener: string;
  /** CN of the client certificate presented, if any. */
  readonly certificateCn?: string;
  /** Open an MQTT.js client; resolves at CONNACK success, with the refusal error, or at close. */
  connect(opts: IClientOptions): Promise<Connected>;
  /** Open a raw byte stream to the broker. */
  raw(): Promise<Duplex>;
}

interface Connected {
  readonly client: MqttClient;
  readonly connack?: IConnackPacket;
  readonly error?: Error & { code?: number };
}

let tb: TestBroker;
let certs: TestCerts;
const clients: MqttClient[] = [];
const streams: Duplex[] = [];

function portOf(listener: string): number {
  const found = tb.listeners.find((l) => l.name === listener);
  if (found === undefined) throw new Error(`no listener ${listener}`);
  return found.port;
}

function mqttConnect(opts: IClientOptions): Promise<Connected> {
  return new Promise((resolve) => {
    const client = mqtt.connect({ host: '127.0.0.1', reconnectPeriod: 0, connectTimeout: 5000, ...opts });
    clients.push(client);
    client.once('connect', (connack) => resolve({ client, connack }));
    client.once('error', (error) => resolve({ client, error }));
    // A connection dropped below MQTT (TLS refused) ends with a close and neither of the above.
    client.once('close', () => resolve({ client }));
  });
}

function tcpStream(port: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

function tlsStream(port: number, withCert: boolean): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      ca: certs.ca.certPem,
      ...(withCert ? { cert: certs.client.certPem, key: certs.client.keyPem } : {}),
    });
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', reject);
  });
}

function wsStream(url: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['mqtt'], { ca: certs.ca.certPem });
    ws.once('open', () => resolve(createWebSocketStream(ws)));
    ws.once('error', reject);
  });
}

const transports: Transport[] = [
  {
    name: 'tcp',
    listener: 'tcp',
    connect: (opts) => mqttConnect({ protocol: 'mqtt', port: portOf('tcp'), ...opts }),
    raw: () => tcpStream(portOf('tcp')),
  },
  {
    name: 'tls',
    listener: 'tls',
    connect: (opts) => mqttConnect({ protocol: 'mqtts', port: portOf('tls'), ca: certs.ca.certPem, rejectUnauthorized: true, ...opts }),
    raw: () => tlsStream(portOf('tls'), false),
  },
  {
    name: 'tls with a client certificate',
    listener: 'mtls',
    certificateCn: 'device-17',
    connect: (opts) =>
      mqttConnect({
        protocol: 'mqtts',
        port: portOf('mtls'),
        ca: certs.ca.certPem,
        cert: certs.client.certPem,
        key: certs.client.keyPem,
        rejectUnauthorized: true,
        ...opts,
      }),
    raw: () => tlsStream(portOf('mtls'), true),
  },
  {
    name: 'ws',
    listener: 'ws',
    connect: (opts) => mqttConnect({ protocol: 'ws', port: portOf('ws'), path: '/mqtt', ...opts }),
    raw: () => wsStream(`ws://127.0.0.1:${portOf('ws')}/mqtt`),
  },
  {
    name: 'wss',
    listener: 'wss',
    connect: (opts) =>
      mqttConnect({ protocol: 'wss', port: portOf('wss'), path: '/mqtt', ca: certs.ca.certPem, rejectUnauthorized: true, ...opts }),
    raw: () => wsStream(`wss://127.0.0.1:${portOf('wss')}/mqtt`),
  },
];

/** Reads MQTT packets from a raw stream. */
class PacketReader {
  private readonly packets: Packet[] = [];
  private closed = false;
  private wake: (() => void) | undefined;

  constructor(stream: Duplex, protocolVersion: 4 | 5) {
    const parser = mqttPacket.parser({ protocolVersion });
    parser.on('packet', (p: Packet) => {
      this.packets.push(p);
      this.wake?.();
    });
    stream.on('data', (d: Buffer) => parser.parse(d));
    stream.on('error', () => undefined);
    stream.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
  }

  async next(timeoutMs = 3000): Promise<Packet | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (this.packets.length === 0 && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, deadline - Date.now());
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    return this.packets.shift();
  }
}

function connectPacket(clientId: string, protocolVersion: 4 | 5, username = 'someone'): Buffer {
  return mqttPacket.generate(
    { cmd: 'connect', protocolId: 'MQTT', protocolVersion, clientId, clean: true, keepalive: 30, username },
    { protocolVersion },
  );
}

function recordOf(clientId: string): AuthRecord | undefined {
  return records.find((r) => r.clientId === clientId);
}

beforeAll(async () => {
  certs = createTestCerts();
  const tlsFiles = (requestCert: boolean): string =>
    `tls: { cert: ${JSON.stringify(certs.server.cert)}, key: ${JSON.stringify(certs.server.key)}, ca: ${JSON.stringify(certs.ca.cert)}, requestCert: ${requestCert}, rejectUnauthorized: true }`;
  tb = await startTestBroker(['plugins:', '  auth:', '    - "@fixtures/auth-records-origin"'].join('\n'), {
    listeners: [
      '{ name: tcp-proxy, type: tcp, host: 127.0.0.1, port: 0, proxyProtocol: true }',
      `{ name: tls, type: tls, host: 127.0.0.1, port: 0, ${tlsFiles(false)} }`,
      `{ name: mtls, type: tls, host: 127.0.0.1, port: 0, ${tlsFiles(true)} }`,
      '{ name: ws, type: ws, host: 127.0.0.1, port: 0 }',
      `{ name: wss, type: wss, host: 127.0.0.1, port: 0, path: /mqtt, ${tlsFiles(false)} }`,
    ],
  });
});

afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
  for (const s of streams.splice(0)) s.destroy();
});

afterAll(async () => {
  await tb.stop();
  certs.remove();
});

describe.each(transports)('13 transports: $name', (transport) => {
  it.each([4, 5] as const)('CONNECT → CONNACK success with MQTT.js (v%s); the auth chain sees the origin', async (protocolVersion) => {
    const clientId = `${transport.listener}-ok-${protocolVersion}`;
    const r = await transport.connect({ protocolVersion, clientId });
    expect(r.error).toBeUndefined();
    if (protocolVersion === 5) expect(r.connack?.reasonCode).toBe(0);
    else expect(r.connack?.returnCode).toBe(0);
    const record = recordOf(clientId);
    expect(record).toMatchObject({
      listener: transport.listener,
      remoteAddress: '127.0.0.1',
      userId: `127.0.0.1|${transport.certificateCn ?? '-'}`,
    });
    expect(record?.remotePort).toBeGreaterThan(0);
    expect(tb.logs.some((l) => l.msg === 'client connected' && l.tenantId === 'origin' && l.clientId === clientId)).toBe(true);
  });

  it.each([
    [5, 0x86],
    [4, 4],
  ] as const)('a refused login (v%s) gets CONNACK code %s', async (protocolVersion, code) => {
    const r = await transport.connect({
      protocolVersion,
      clientId: `${transport.listener}-refused-${protocolVersion}`,
      // One login per case: the same login refused on every transport would be backed off (security.loginFailures).
      username: `refuse-${transport.listener}-${protocolVersion}`,
    });
    expect(r.connack).toBeUndefined();
    expect(r.error?.code).toBe(code);
  });

  it.each([0, 1, 2] as const)('publishes and receives at QoS %s, in order, with a retained message on subscribe (v5)', async (qos) => {
    const topic = `t13/${transport.listener}/q${qos}`;
    const sub = await transport.connect({ protocolVersion: 5, clientId: `${transport.listener}-sub-${qos}` });
    const pub = await transport.connect({ protocolVersion: 5, clientId: `${transport.listener}-pub-${qos}` });
    expect(sub.error ?? pub.error).toBeUndefined();
    await pub.client.publishAsync(`${topic}/kept`, 'retained', { qos, retain: true });
    const received: { topic: string; payload: string; retain: boolean; qos: number }[] = [];
    sub.client.on('message', (t, payload, packet) =>
      received.push({ topic: t, payload: payload.toString(), retain: packet.retain, qos: packet.qos }),
    );
    await sub.client.subscribeAsync(`${topic}/#`, { qos });
    for (let i = 0; i < 50; i++) await pub.client.publishAsync(`${topic}/live`, `m${i}`, { qos });
    const deadline = Date.now() + 5000;
    while (received.length < 51 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(received[0]).toEqual({ topic: `${topic}/kept`, payload: 'retained', retain: true, qos });
    expect(received.slice(1).map((m) => m.payload)).toEqual(Array.from({ length: 50 }, (_, i) => `m${i}`));
    expect(received.slice(1).every((m) => !m.retain && m.qos === qos)).toBe(true);
  });

  it('answers PINGREQ with PINGRESP on a raw stream', async () => {
    const stream = await transport.raw();
    streams.push(stream);
    const reader = new PacketReader(stream, 4);
    stream.write(connectPacket(`${transport.listener}-raw`, 4));
    expect(await reader.next()).toMatchObject({ cmd: 'connack', returnCode: 0 });
    stream.write(mqttPacket.generate({ cmd: 'pingreq' }));
    expect(await reader.next()).toMatchObject({ cmd: 'pingresp' });
  });
});

describe('13 transports: client certificate', () => {
  it('reaches the auth chain with its fields', async () => {
    const r = await transports[2]!.connect({ protocolVersion: 5, clientId: 'cert-fields' });
    expect(r.error).toBeUndefined();
    const cert = recordOf('cert-fields')?.clientCertificate;
    expect(cert).toMatchObject({
      subject: { CN: 'device-17', O: 'Acme' },
      issuer: { CN: 'Bifro Test CA' },
      serialNumber: '2002',
      authorized: true,
    });
    expect(cert?.fingerprint256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(Buffer.from(cert!.raw).length).toBeGreaterThan(100);
  });

  it('is absent on a listener that does not request one', async () => {
    await transports[1]!.connect({ protocolVersion: 5, clientId: 'no-cert' });
    expect(recordOf('no-cert')).toBeDefined();
    expect(recordOf('no-cert')?.clientCertificate).toBeUndefined();
  });

  it('from another CA is refused before MQTT', async () => {
    const r = await mqttConnect({
      protocol: 'mqtts',
      port: portOf('mtls'),
      ca: certs.ca.certPem,
      cert: certs.rogueClient.certPem,
      key: certs.rogueClient.keyPem,
      clientId: 'rogue',
      connectTimeout: 2000,
    });
    expect(r.connack).toBeUndefined();
    expect(recordOf('rogue')).toBeUndefined();
  });
});

describe('13 transports: PROXY protocol over tcp', () => {
  it.each([
    ['v1', proxyV1Tcp4('192.0.2.77', 50001, '10.0.0.1', 1883)],
    ['v2', proxyV2Tcp4('203.0.113.78', 50002, '10.0.0.1', 1883)],
  ])('%s: the auth chain sees the address from the header', async (version, header) => {
    const stream = await tcpStream(portOf('tcp-proxy'));
    streams.push(stream);
    const reader = new PacketReader(stream, 5);
    const clientId = `proxied-${version}`;
    stream.write(Buffer.concat([header, connectPacket(clientId, 5)]));
    expect(await reader.next()).toMatchObject({ cmd: 'connack', reasonCode: 0 });
    const expected =
      version === 'v1' ? { remoteAddress: '192.0.2.77', remotePort: 50001 } : { remoteAddress: '203.0.113.78', remotePort: 50002 };
    expect(recordOf(clientId)).toMatchObject({ listener: 'tcp-proxy', ...expected, userId: `${expected.remoteAddress}|-` });
  });

  it('a client without a header is dropped before MQTT', async () => {
    const stream = await tcpStream(portOf('tcp-proxy'));
    streams.push(stream);
    const reader = new PacketReader(stream, 4);
    stream.write(connectPacket('unproxied', 4));
    expect(await reader.next()).toBeUndefined();
    expect(recordOf('unproxied')).toBeUndefined();
  });
});
