import type { IAuthPacket, IConnackPacket, IDisconnectPacket } from 'mqtt-packet';
import { RawClient } from '../support/raw-client';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Credentials with a lifetime (SPI 1.2.0 `AuthOk.expiresAt`, e.g. a JWT's exp): the broker ends the
 * connection when they expire — v5 DISCONNECT 0xA0 Maximum connect time, v3 closed, a `byServer`
 * event — unless an MQTT 5 re-authentication (AUTH 0x19) moved the deadline. Time is the broker's
 * clock, moved forward by the test. The fixture plugin test/fixtures/plugins/auth-expiring takes
 * "ttl:<ms>" as password or authentication data.
 */

async function connect(tb: TestBroker, version: 4 | 5, password: string, clientId: string): Promise<RawClient> {
  const c = await RawClient.connect(tb.port, version);
  c.send(
    {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: version,
      clientId,
      clean: true,
      keepalive: 0,
      username: 'dev',
      password: Buffer.from(password),
    },
    version,
  );
  return c;
}

describe('34 credentials that expire end the connection', () => {
  let tb: TestBroker;
  const raw: RawClient[] = [];
  // A broker per test: the plugin stamps expiresAt from the real clock, each test moves the broker's from zero.
  beforeEach(async () => {
    tb = await startTestBroker(
      'plugins:\n  auth: ["@fixtures/auth-expiring"]\n  events:\n    - { use: "@fixtures/recording-events", options: { sink: expiry, eventTypes: [byServer] } }',
    );
  });
  afterEach(async () => {
    for (const c of raw.splice(0)) c.destroy();
    await tb.stop();
  });

  it('v5: DISCONNECT 0xA0 when the credentials expire, not before; other clients stay', async () => {
    const c = await connect(tb, 5, 'ttl:5000', 'exp-v5');
    const other = await connect(tb, 5, 'ttl:none', 'exp-forever');
    raw.push(c, other);
    expect(((await c.next()) as IConnackPacket).reasonCode).toBe(0);
    expect(((await other.next()) as IConnackPacket).reasonCode).toBe(0);
    await tb.clock.advance(3000);
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next())?.cmd).toBe('pingresp');
    await tb.clock.advance(3000);
    const bye = (await c.next()) as IDisconnectPacket;
    expect(bye.cmd).toBe('disconnect');
    expect(bye.reasonCode).toBe(0xa0);
    expect(await c.waitClosed()).toBe(true);
    other.send({ cmd: 'pingreq' }, 5);
    expect((await other.next())?.cmd).toBe('pingresp');
    const recorded = (
      globalThis as { __bifroRecordedEvents?: Record<string, { type: string; clientId?: string; detail: Record<string, unknown> }[]> }
    ).__bifroRecordedEvents!.expiry!;
    expect(recorded.filter((e) => e.clientId === 'exp-v5')).toEqual([
      expect.objectContaining({ type: 'byServer', detail: expect.objectContaining({ reasonCode: 0xa0, reason: 'credentials expired' }) }),
    ]);
    expect(recorded.some((e) => e.clientId === 'exp-forever')).toBe(false);
  });

  it('v3: the connection is closed when the credentials expire', async () => {
    const c = await connect(tb, 4, 'ttl:2000', 'exp-v3');
    raw.push(c);
    expect(((await c.next()) as IConnackPacket).returnCode).toBe(0);
    await tb.clock.advance(2500);
    expect(await c.waitClosed()).toBe(true);
  });

  it('v5 re-authentication (AUTH 0x19) with new credentials moves the deadline; without a lifetime they no longer expire', async () => {
    const c = await RawClient.connect(tb.port, 5);
    raw.push(c);
    c.send(
      {
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 5,
        clientId: 'exp-reauth',
        clean: true,
        keepalive: 0,
        properties: { authenticationMethod: 'EXPIRING', authenticationData: Buffer.from('ttl:2000') },
      },
      5,
    );
    expect(((await c.next()) as IConnackPacket).reasonCode).toBe(0);
    c.send(
      { cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: 'EXPIRING', authenticationData: Buffer.from('ttl:10000') } },
      5,
    );
    expect(((await c.next()) as IAuthPacket).reasonCode).toBe(0);
    await tb.clock.advance(3000); // past the first lifetime
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next())?.cmd).toBe('pingresp');
    c.send(
      { cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: 'EXPIRING', authenticationData: Buffer.from('ttl:none') } },
      5,
    );
    expect(((await c.next()) as IAuthPacket).reasonCode).toBe(0);
    await tb.clock.advance(15000); // past the second one too: replaced by credentials without a lifetime
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next())?.cmd).toBe('pingresp');
  });

  it('an expiresAt that is not a time is an invalid answer: the client is refused (0x80) and the others stay', async () => {
    const bad = await connect(tb, 5, 'bad-expiry', 'exp-bad');
    const good = await connect(tb, 5, 'ttl:none', 'exp-good');
    raw.push(bad, good);
    expect(((await bad.next()) as IConnackPacket).reasonCode).toBe(0x80);
    expect(((await good.next()) as IConnackPacket).reasonCode).toBe(0);
  });
});
