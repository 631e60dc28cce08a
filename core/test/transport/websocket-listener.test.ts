import net from 'node:net';
import { WebSocket, type ClientOptions } from 'ws';
import type { ListenerConfig } from '../../src/base/config-types';
import { proxyV1Tcp4, proxyV2Tcp4 } from '../../../test/support/proxy-headers';
import { createTestCerts, type TestCerts } from '../../../test/support/tls-certs';
import { closedWithin, listenerConfig, readAll, startHarness, startProxyRelay, tcpConnect, type Harness } from './harness';

let certs: TestCerts;
beforeAll(() => {
  certs = createTestCerts();
});
afterAll(() => certs.remove());

interface Opened {
  readonly ws: WebSocket;
  readonly messages: Buffer[];
  readonly closed: Promise<{ code: number; reason: string }>;
}

/** Open a WebSocket; resolves once open, or rejects with the HTTP status when the upgrade was refused. */
function openWs(url: string, protocols: string[] | undefined, options: ClientOptions = {}): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, options);
    const messages: Buffer[] = [];
    ws.on('message', (data: Buffer) => messages.push(data));
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.once('close', (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.once('open', () => resolve({ ws, messages, closed }));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

/** Send a raw HTTP request and read the status line of the answer. */
async function httpStatus(port: number, request: string): Promise<string> {
  const socket = await tcpConnect(port);
  socket.write(request);
  const answer = await readAll(socket, 2000);
  socket.destroy();
  return answer.split('\r\n')[0] ?? '';
}

function upgradeRequest(path: string, extra = ''): string {
  return (
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`
  );
}

describe('ws listener', () => {
  let h: Harness;
  let url: string;
  beforeAll(async () => {
    h = await startHarness(listenerConfig({ type: 'ws' }), { handshakeTimeoutMs: 1000 });
    url = `ws://127.0.0.1:${h.listener.port}/mqtt`;
  });
  afterAll(() => h.close());

  it('upgrades /mqtt with subprotocol mqtt and hands over a byte stream with the socket address', async () => {
    const c = await openWs(url, ['mqtt']);
    expect(c.ws.protocol).toBe('mqtt');
    const a = await h.nextAccepted();
    expect(a.origin).toEqual({
      listener: 'test-ws',
      remoteAddress: '127.0.0.1',
      remotePort: expect.any(Number),
      clientCertificate: undefined,
    });
    c.ws.close();
  });

  it.each([
    [['mqttv3.1'], 'mqttv3.1'],
    [['foo', 'mqtt'], 'mqtt'],
    [undefined, ''],
  ])('negotiates %j as %j', async (offered, chosen) => {
    const c = await openWs(url, offered);
    expect(c.ws.protocol).toBe(chosen);
    await h.nextAccepted();
    c.ws.close();
  });

  it('refuses a client that offers only other subprotocols with 400', async () => {
    await expect(openWs(url, ['wamp'])).rejects.toThrow('HTTP 400');
    expect(await httpStatus(h.listener.port, upgradeRequest('/mqtt', 'Sec-WebSocket-Protocol: wamp, stomp\r\n'))).toBe(
      'HTTP/1.1 400 Bad Request',
    );
  });

  it('answers 404 on other paths (upgrade or not) and 426 to a plain GET of the MQTT path', async () => {
    await expect(openWs(`ws://127.0.0.1:${h.listener.port}/other`, ['mqtt'])).rejects.toThrow('HTTP 404');
    expect(await httpStatus(h.listener.port, upgradeRequest('/mqtt/x'))).toBe('HTTP/1.1 404 Not Found');
    expect(await httpStatus(h.listener.port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n')).toBe('HTTP/1.1 404 Not Found');
    expect(await httpStatus(h.listener.port, 'GET /mqtt HTTP/1.1\r\nHost: x\r\n\r\n')).toBe('HTTP/1.1 426 Upgrade Required');
    expect(h.listener.stats.httpRefusals).toBeGreaterThanOrEqual(4);
  });

  it('accepts the path with a query string', async () => {
    const c = await openWs(`${url}?token=1`, ['mqtt']);
    await h.nextAccepted();
    c.ws.close();
  });

  it('feeds binary frames as one byte stream, whatever the framing', async () => {
    const c = await openWs(url, ['mqtt']);
    const a = await h.nextAccepted();
    // One packet split over three frames, then two packets in one frame.
    c.ws.send(Buffer.from([0xc0]));
    c.ws.send(Buffer.from([0x00, 0xc0]));
    c.ws.send(Buffer.from([0x00, 0xe0, 0x00]));
    expect(await a.waitBytes(6)).toEqual(Buffer.from([0xc0, 0x00, 0xc0, 0x00, 0xe0, 0x00]));
    c.ws.close();
  });

  it('sends what the MQTT layer writes as binary frames, coalescing writes of one turn', async () => {
    const c = await openWs(url, ['mqtt']);
    const a = await h.nextAccepted();
    for (let i = 0; i < 10; i++) a.stream.write(Buffer.from([0xd0, 0x00]));
    const deadline = Date.now() + 2000;
    while (Buffer.concat(c.messages).length < 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(Buffer.concat(c.messages)).toEqual(Buffer.alloc(20, Buffer.from([0xd0, 0x00])));
    expect(c.messages.length).toBeLessThan(10);
    c.ws.close();
  });

  it('closes the connection with 1003 on a text frame [MQTT-6.0.0-1]', async () => {
    const c = await openWs(url, ['mqtt']);
    const a = await h.nextAccepted();
    c.ws.send('CONNECT');
    expect(await c.closed).toMatchObject({ code: 1003 });
    await a.closed;
    expect(a.received().length).toBe(0);
  });

  it('ending the stream closes the WebSocket normally; a client close closes the stream', async () => {
    const c = await openWs(url, ['mqtt']);
    const a = await h.nextAccepted();
    a.stream.end(Buffer.from([0x20, 0x02, 0x00, 0x00]));
    expect(await c.closed).toMatchObject({ code: 1000 });
    expect(Buffer.concat(c.messages)).toEqual(Buffer.from([0x20, 0x02, 0x00, 0x00]));
    await a.closed;

    const d = await openWs(url, ['mqtt']);
    const b = await h.nextAccepted();
    d.ws.close();
    await b.closed;
    const e = await openWs(url, ['mqtt']);
    const f = await h.nextAccepted();
    e.ws.terminate();
    await f.closed;
  });

  it('destroying the stream drops the connection', async () => {
    const c = await openWs(url, ['mqtt']);
    const a = await h.nextAccepted();
    a.stream.destroy();
    expect((await c.closed).code).toBe(1006);
  });

  it('drops a connection that never sends its HTTP request', async () => {
    const before = h.listener.stats.handshakeTimeouts;
    const raw = await tcpConnect(h.listener.port);
    expect(await closedWithin(raw, 4000)).toBe(true);
    expect(h.listener.stats.handshakeTimeouts).toBe(before + 1);
  });

  it('close() drops pending HTTP connections and resolves once accepted ones are closed', async () => {
    const other = await startHarness(listenerConfig({ type: 'ws' }));
    const idle = await tcpConnect(other.listener.port);
    const c = await openWs(`ws://127.0.0.1:${other.listener.port}/mqtt`, ['mqtt']);
    await other.nextAccepted();
    await other.close();
    expect(await closedWithin(idle, 1000)).toBe(true);
    expect((await c.closed).code).toBe(1006);
  });
});

describe('ws listener on a configured path with PROXY protocol', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(listenerConfig({ type: 'ws', path: '/ws', proxyProtocol: true }));
  });
  afterAll(() => h.close());

  it('reads the header before HTTP, in the same segment as the request', async () => {
    const relay = await startProxyRelay(h.listener.port, proxyV2Tcp4('203.0.113.20', 42000, '10.0.0.1', 8083));
    const c = await openWs(`ws://127.0.0.1:${relay.port}/ws`, ['mqtt']);
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '203.0.113.20', remotePort: 42000 });
    c.ws.send(Buffer.from([0xc0, 0x00]));
    expect(await a.waitBytes(2)).toEqual(Buffer.from([0xc0, 0x00]));
    c.ws.close();
    await relay.close();
  });

  it('reads the header sent on its own before the request', async () => {
    const c = await openWs(`ws://127.0.0.1:${h.listener.port}/ws`, ['mqtt'], {
      createConnection: () => {
        const socket = net.connect(h.listener.port, '127.0.0.1');
        socket.write(proxyV1Tcp4('198.51.100.20', 42001, '10.0.0.1', 8083));
        return socket;
      },
    });
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '198.51.100.20', remotePort: 42001 });
    c.ws.close();
  });

  it('the default path is not served when another is configured', async () => {
    const relay = await startProxyRelay(h.listener.port, proxyV1Tcp4('198.51.100.21', 1, '10.0.0.1', 2));
    await expect(openWs(`ws://127.0.0.1:${relay.port}/mqtt`, ['mqtt'])).rejects.toThrow('HTTP 404');
    await relay.close();
  });
});

describe('wss listener', () => {
  let h: Harness;
  function wssConfig(requestCert: boolean): ListenerConfig {
    return listenerConfig({
      type: 'wss',
      tls: { cert: certs.server.cert, key: certs.server.key, ca: certs.ca.cert, requestCert, rejectUnauthorized: true },
    });
  }
  beforeAll(async () => {
    h = await startHarness(wssConfig(true));
  });
  afterAll(() => h.close());

  it('upgrades over TLS and puts the client certificate into the origin', async () => {
    const c = await openWs(`wss://127.0.0.1:${h.listener.port}/mqtt`, ['mqtt'], {
      ca: certs.ca.certPem,
      cert: certs.client.certPem,
      key: certs.client.keyPem,
    });
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({
      listener: 'test-wss',
      remoteAddress: '127.0.0.1',
      clientCertificate: { subject: { CN: 'device-17' }, authorized: true },
    });
    c.ws.send(Buffer.from([0xc0, 0x00]));
    expect(await a.waitBytes(2)).toEqual(Buffer.from([0xc0, 0x00]));
    c.ws.close();
    await a.closed;
  });

  it('refuses a certificate from another CA', async () => {
    const accepted = h.accepted.length;
    await expect(
      openWs(`wss://127.0.0.1:${h.listener.port}/mqtt`, ['mqtt'], {
        ca: certs.ca.certPem,
        cert: certs.rogueClient.certPem,
        key: certs.rogueClient.keyPem,
      }),
    ).rejects.toThrow();
    expect(h.accepted.length).toBe(accepted);
  });

  it('answers 404 on other paths over TLS', async () => {
    await expect(
      openWs(`wss://127.0.0.1:${h.listener.port}/nope`, ['mqtt'], {
        ca: certs.ca.certPem,
        cert: certs.client.certPem,
        key: certs.client.keyPem,
      }),
    ).rejects.toThrow('HTTP 404');
  });
});
