import type { IAuthPacket, IConnackPacket, IDisconnectPacket } from 'mqtt-packet';
import { RawClient } from '../support/raw-client';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 14, v5 enhanced authentication (AUTH packets through the SPI's extendedAuth: start,
 * continue, re-authentication) and server redirect through the client balancer. The fixture auth
 * plugin answers method TEST-CHALLENGE: start → continue with "challenge", data "pass" → success.
 */

async function connectWithMethod(port: number, method: string, clientId: string): Promise<RawClient> {
  const c = await RawClient.connect(port, 5);
  c.send(
    {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 5,
      clientId,
      clean: true,
      keepalive: 30,
      properties: { authenticationMethod: method },
    },
    5,
  );
  return c;
}

describe('14 enhanced authentication (v5)', () => {
  let tb: TestBroker;
  const raw: RawClient[] = [];
  beforeAll(async () => {
    tb = await startTestBroker('plugins:\n  auth: ["@fixtures/valid-auth"]');
  });
  afterEach(() => {
    for (const c of raw.splice(0)) c.destroy();
  });
  afterAll(() => tb.stop());

  it('runs CONNECT → AUTH 0x18 challenge → AUTH 0x18 answer → CONNACK success with the method (§4.12.0)', async () => {
    const c = await connectWithMethod(tb.port, 'TEST-CHALLENGE', 'ea-ok');
    raw.push(c);
    const challenge = (await c.next()) as IAuthPacket;
    expect(challenge.cmd).toBe('auth');
    expect(challenge.reasonCode).toBe(0x18);
    expect(challenge.properties?.authenticationData?.toString()).toBe('challenge');
    c.send(
      { cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'TEST-CHALLENGE', authenticationData: Buffer.from('pass') } },
      5,
    );
    const connack = (await c.next()) as IConnackPacket;
    expect(connack.cmd).toBe('connack');
    expect(connack.reasonCode).toBe(0);
    expect(connack.properties?.authenticationMethod).toBe('TEST-CHALLENGE');
  });

  it('refuses a wrong answer with CONNACK 0x86', async () => {
    const c = await connectWithMethod(tb.port, 'TEST-CHALLENGE', 'ea-bad');
    raw.push(c);
    expect(((await c.next()) as IAuthPacket).reasonCode).toBe(0x18);
    c.send(
      { cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'TEST-CHALLENGE', authenticationData: Buffer.from('nope') } },
      5,
    );
    expect(((await c.next()) as IConnackPacket).reasonCode).toBe(0x86);
    expect(await c.waitClosed()).toBe(true);
  });

  it('refuses an unknown method with CONNACK 0x8C', async () => {
    const c = await connectWithMethod(tb.port, 'SCRAM-NOPE', 'ea-unknown');
    raw.push(c);
    expect(((await c.next()) as IConnackPacket).reasonCode).toBe(0x8c);
    expect(await c.waitClosed()).toBe(true);
  });

  it('closes on an AUTH with another method during the exchange (protocol error)', async () => {
    const c = await connectWithMethod(tb.port, 'TEST-CHALLENGE', 'ea-switch');
    raw.push(c);
    expect(((await c.next()) as IAuthPacket).reasonCode).toBe(0x18);
    c.send({ cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'OTHER', authenticationData: Buffer.from('pass') } }, 5);
    expect(await c.waitClosed()).toBe(true);
  });

  it('re-authenticates a connected client (AUTH 0x19 → AUTH 0x00), and disconnects on a failed re-auth with 0x87 [MQTT-4.12.1-2]', async () => {
    const c = await connectWithMethod(tb.port, 'TEST-CHALLENGE', 'ea-reauth');
    raw.push(c);
    await c.next();
    c.send(
      { cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'TEST-CHALLENGE', authenticationData: Buffer.from('pass') } },
      5,
    );
    expect(((await c.next()) as IConnackPacket).reasonCode).toBe(0);
    c.send(
      { cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: 'TEST-CHALLENGE', authenticationData: Buffer.from('pass') } },
      5,
    );
    const ok = (await c.next()) as IAuthPacket;
    expect(ok.cmd).toBe('auth');
    expect(ok.reasonCode).toBe(0);
    c.send(
      { cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: 'TEST-CHALLENGE', authenticationData: Buffer.from('wrong') } },
      5,
    );
    const bye = (await c.next()) as IDisconnectPacket;
    expect(bye.cmd).toBe('disconnect');
    expect(bye.reasonCode).toBe(0x87);
    expect(await c.waitClosed()).toBe(true);
  });
});

describe('14 server redirect (client balancer)', () => {
  let tb: TestBroker;
  beforeAll(async () => {
    tb = await startTestBroker(
      'plugins:\n  auth: [{ use: "@fixtures/valid-auth", options: { tenantId: moved } }]\n  balancer: "@fixtures/valid-balancer"',
    );
  });
  afterAll(() => tb.stop());

  it('answers a v5 client with CONNACK 0x9D and the Server Reference (§4.11.0)', async () => {
    const c = await RawClient.connect(tb.port, 5);
    c.send(
      {
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 5,
        clientId: 'redir5',
        clean: true,
        keepalive: 30,
        username: 'u',
        password: Buffer.from('secret'),
      },
      5,
    );
    const connack = (await c.next()) as IConnackPacket;
    expect(connack.reasonCode).toBe(0x9d);
    expect(connack.properties?.serverReference).toBe('eu.example.com:1883');
    expect(await c.waitClosed()).toBe(true);
  });

  it('refuses a v3.1.1 client it cannot redirect with 0x03 server unavailable', async () => {
    const c = await RawClient.connect(tb.port, 4);
    c.send({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clientId: 'redir4',
      clean: true,
      keepalive: 30,
      username: 'u',
      password: Buffer.from('secret'),
    });
    expect(((await c.next()) as IConnackPacket).returnCode).toBe(3);
    expect(await c.waitClosed()).toBe(true);
  });
});

describe('14 server redirect of connected clients (periodic balancer check)', () => {
  let tb: TestBroker;
  const drain = new Set<string>();
  beforeAll(async () => {
    (globalThis as { __bifroBalancerDrain?: Set<string> }).__bifroBalancerDrain = drain;
    tb = await startTestBroker('mqtt: { redirectCheckIntervalMs: 200 }\nplugins:\n  balancer: "@fixtures/valid-balancer"');
  });
  afterAll(async () => {
    await tb.stop();
    delete (globalThis as { __bifroBalancerDrain?: Set<string> }).__bifroBalancerDrain;
  });

  async function connected(clientId: string, protocolVersion: 4 | 5): Promise<RawClient> {
    const c = await RawClient.connect(tb.port, protocolVersion);
    c.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion, clientId, clean: true, keepalive: 30 }, protocolVersion);
    expect((await c.next())?.cmd).toBe('connack');
    return c;
  }

  it('sends DISCONNECT 0x9C with the Server Reference to a v5 client the balancer moves, and leaves the others', async () => {
    const moving = await connected('live-move-5', 5);
    const staying = await connected('live-stay-5', 5);
    drain.add('live-move-5');
    const d = (await moving.next(3000)) as IDisconnectPacket | undefined;
    expect(d?.cmd).toBe('disconnect');
    expect(d?.reasonCode).toBe(0x9c);
    expect(d?.properties?.serverReference).toBe('other.example.com:1883');
    expect(await moving.waitClosed()).toBe(true);
    await new Promise((r) => setTimeout(r, 500));
    expect(staying.closed).toBe(false);
    staying.destroy();
  });

  it('disconnects a v3.1.1 client the balancer moves', async () => {
    const moving = await connected('live-move-4', 4);
    drain.add('live-move-4');
    expect(await moving.waitClosed(3000)).toBe(true);
  });
});
