import pino from 'pino';
import { BifroError } from '../../src/base/errors';
import { bindListener } from '../../src/transport/listeners';
import { proxyV1Tcp4, proxyV2Local, proxyV2Tcp4 } from '../../../test/support/proxy-headers';
import { closedWithin, listenerConfig, startHarness, tcpConnect, type Harness } from './harness';

describe('tcp listener', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(listenerConfig({ type: 'tcp' }));
  });
  afterAll(() => h.close());

  it('hands over the socket with its address, both ways', async () => {
    const client = await tcpConnect(h.listener.port);
    const a = await h.nextAccepted();
    expect(a.origin).toEqual({
      listener: 'test-tcp',
      remoteAddress: '127.0.0.1',
      remotePort: client.localPort,
      clientCertificate: undefined,
    });
    client.write('ping');
    expect((await a.waitBytes(4)).toString()).toBe('ping');
    const echoed = new Promise<string>((resolve) => client.once('data', (d: Buffer) => resolve(d.toString())));
    a.stream.write('pong');
    expect(await echoed).toBe('pong');
    client.destroy();
    await a.closed;
    expect(h.listener.stats.accepted).toBe(1);
  });

  it('reports the real port when 0 was configured and refuses a taken port with BIFRO_LISTENER_BIND_FAILED', async () => {
    expect(h.listener.port).toBeGreaterThan(0);
    const err = await bindListener(listenerConfig({ type: 'tcp', name: 'again', port: h.listener.port }), () => undefined).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(BifroError);
    expect((err as BifroError).code).toBe('BIFRO_LISTENER_BIND_FAILED');
    expect((err as BifroError).message).toContain('"again"');
  });
});

describe('tcp listener with PROXY protocol', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(listenerConfig({ type: 'tcp', proxyProtocol: true }), { proxyHeaderTimeoutMs: 300 });
  });
  afterAll(() => h.close());

  it('v1: takes the client address from the header; bytes after it in the same segment reach the stream', async () => {
    const client = await tcpConnect(h.listener.port);
    client.write(Buffer.concat([proxyV1Tcp4('192.0.2.33', 40001, '10.0.0.1', 1883), Buffer.from('CONNECT')]));
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '192.0.2.33', remotePort: 40001 });
    expect((await a.waitBytes(7)).toString()).toBe('CONNECT');
    client.write('+more');
    expect((await a.waitBytes(12)).toString()).toBe('CONNECT+more');
    client.destroy();
  });

  it('v1 arriving in pieces, the payload separately', async () => {
    const client = await tcpConnect(h.listener.port);
    const header = proxyV1Tcp4('198.51.100.7', 5555, '10.0.0.1', 1883);
    for (const piece of [header.subarray(0, 3), header.subarray(3, 20), header.subarray(20)]) {
      client.write(piece);
      await new Promise((r) => setTimeout(r, 20));
    }
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '198.51.100.7', remotePort: 5555 });
    client.write('abc');
    expect((await a.waitBytes(3)).toString()).toBe('abc');
    client.destroy();
  });

  it('v2 TCP4', async () => {
    const client = await tcpConnect(h.listener.port);
    client.write(Buffer.concat([proxyV2Tcp4('203.0.113.9', 60000, '10.0.0.1', 1883), Buffer.from([0x10, 0x00])]));
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '203.0.113.9', remotePort: 60000 });
    expect(await a.waitBytes(2)).toEqual(Buffer.from([0x10, 0x00]));
    client.destroy();
  });

  it('v2 LOCAL keeps the socket address', async () => {
    const client = await tcpConnect(h.listener.port);
    client.write(proxyV2Local());
    const a = await h.nextAccepted();
    expect(a.origin).toMatchObject({ remoteAddress: '127.0.0.1', remotePort: client.localPort });
    client.destroy();
  });

  it('closes a connection without a header, counts it and accepts nothing', async () => {
    const before = h.listener.stats.proxyHeaderFailures;
    const accepted = h.accepted.length;
    const client = await tcpConnect(h.listener.port);
    client.write(Buffer.from([0x10, 0x0c, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54]));
    expect(await closedWithin(client, 2000)).toBe(true);
    expect(h.listener.stats.proxyHeaderFailures).toBe(before + 1);
    expect(h.accepted.length).toBe(accepted);
  });

  it('closes a connection whose header is too long', async () => {
    const client = await tcpConnect(h.listener.port);
    client.write(`PROXY UNKNOWN ${'x'.repeat(200)}`);
    expect(await closedWithin(client, 2000)).toBe(true);
  });

  it('closes a connection whose header does not arrive in time', async () => {
    const before = h.listener.stats.proxyHeaderFailures;
    const client = await tcpConnect(h.listener.port);
    client.write('PROXY TCP4 1.2.3.4');
    expect(await closedWithin(client, 2000)).toBe(true);
    expect(h.listener.stats.proxyHeaderFailures).toBe(before + 1);
  });

  it('logs refused headers at debug on the logger it is given', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const other = await startHarness(listenerConfig({ type: 'tcp', proxyProtocol: true }), { logger });
    const client = await tcpConnect(other.listener.port);
    client.write('GET / HTTP/1.1\r\n');
    expect(await closedWithin(client, 2000)).toBe(true);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 20,
        msg: 'PROXY protocol header refused',
        listener: 'test-tcp',
        reason: 'no PROXY protocol signature',
      }),
    );
    await other.close();
  });

  it('close() drops connections still waiting for their header', async () => {
    const other = await startHarness(listenerConfig({ type: 'tcp', proxyProtocol: true }));
    const client = await tcpConnect(other.listener.port);
    client.write('PROX');
    await new Promise((r) => setTimeout(r, 50));
    const closing = other.close();
    expect(await closedWithin(client, 2000)).toBe(true);
    await closing;
  });
});
