import net from 'node:net';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import mqttPacket, { type IConnackPacket } from 'mqtt-packet';
import { RawClient } from '../support/raw-client';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 01, CONNECT: the wiring CONNECT → auth chain (plugin host managers) → CONNACK over real
 * sockets with MQTT.js and raw bytes.
 */

/** Connect with MQTT.js; resolves with the CONNACK (or the error MQTT.js raised for a refusal). */
function connect(
  port: number,
  opts: IClientOptions,
): Promise<{ client: MqttClient; connack?: IConnackPacket; error?: Error & { code?: number } }> {
  return new Promise((resolve) => {
    const client = mqtt.connect({ host: '127.0.0.1', port, reconnectPeriod: 0, connectTimeout: 5000, ...opts });
    client.once('connect', (connack) => resolve({ client, connack }));
    client.once('error', (error) => resolve({ client, error }));
  });
}

describe('01 connect: auth chain', () => {
  let tb: TestBroker;
  const clients: MqttClient[] = [];

  beforeAll(async () => {
    tb = await startTestBroker(
      [
        'plugins:',
        '  callTimeoutMs: 300',
        '  auth:',
        '    - { use: "@fixtures/valid-auth", options: { tenantId: acme } }',
        '    - "@fixtures/auth-accept-second"',
        'mqtt:',
        '  connectTimeoutMs: 400',
      ].join('\n'),
    );
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.end(true);
  });
  afterAll(() => tb.stop());

  it.each([4, 5] as const)('accepts good credentials (v%s) with CONNACK success', async (protocolVersion) => {
    const r = await connect(tb.port, { protocolVersion, clientId: `ok-${protocolVersion}`, username: 'alice', password: 'secret' });
    clients.push(r.client);
    expect(r.error).toBeUndefined();
    expect(r.connack?.sessionPresent).toBe(false);
    if (protocolVersion === 5) expect(r.connack?.reasonCode).toBe(0);
    else expect(r.connack?.returnCode).toBe(0);
  });

  it('asks the next provider when the first defers', async () => {
    const r = await connect(tb.port, { protocolVersion: 5, clientId: 'deferred', username: 'defer', password: 'x' });
    clients.push(r.client);
    expect(r.error).toBeUndefined();
    expect(r.connack?.reasonCode).toBe(0);
    expect(tb.logs.some((l) => l.msg === 'client connected' && l.tenantId === 'second' && l.clientId === 'deferred')).toBe(true);
  });

  it.each([
    [5, 'wrong', 0x86],
    [4, 'wrong', 4],
    [3, 'wrong', 4],
    [5, 'boom', 0x80],
    [4, 'boom', 3],
    [5, 'slow', 0x80],
    [4, 'slow', 3],
  ] as const)('v%s user %s is refused with CONNACK code %s', async (protocolVersion, username, code) => {
    const client = await RawClient.connect(tb.port, protocolVersion);
    client.send(
      {
        cmd: 'connect',
        protocolId: protocolVersion === 3 ? 'MQIsdp' : 'MQTT',
        protocolVersion,
        clientId: `refused-${username}`,
        clean: true,
        keepalive: 30,
        username,
        password: Buffer.from('nope'),
      },
      protocolVersion,
    );
    const connack = (await client.next(3000)) as IConnackPacket | undefined;
    expect(connack?.cmd).toBe('connack');
    expect(protocolVersion === 5 ? connack?.reasonCode : connack?.returnCode).toBe(code);
    expect(await client.waitClosed()).toBe(true);
  });

  it('assigns a client identifier to a v5 client that sent none', async () => {
    const r = await connect(tb.port, { protocolVersion: 5, clientId: '', username: 'alice', password: 'secret' });
    clients.push(r.client);
    const assigned = r.connack?.properties?.assignedClientIdentifier;
    expect(assigned).toMatch(/^[0-9a-zA-Z]{1,23}$/);
  });

  it('refuses an empty client id with clean session 0 on v3.1.1 (identifier rejected) [MQTT-3.1.3-8]', async () => {
    const client = await RawClient.connect(tb.port);
    // MQTT.js and mqtt-packet refuse to encode this, so clear the clean-session flag by hand.
    const bytes = mqttPacket.generate({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clientId: '',
      clean: true,
      keepalive: 30,
      username: 'alice',
      password: Buffer.from('secret'),
    });
    const flags = 2 + 6 + 1; // fixed header (1-byte remaining length), protocol name, level
    expect(bytes[flags]! & 0x02).toBe(0x02);
    bytes[flags] = bytes[flags]! & ~0x02;
    client.write(bytes);
    const connack = (await client.next()) as IConnackPacket | undefined;
    expect(connack?.returnCode).toBe(2);
    expect(await client.waitClosed()).toBe(true);
  });

  it.each([4, 5] as const)(
    'handles packets sent right after CONNECT, in the same write, once CONNACK is out (v%s, §3.1.4)',
    async (protocolVersion) => {
      const client = await RawClient.connect(tb.port, protocolVersion);
      const opts = { protocolVersion };
      client.write(
        Buffer.concat([
          mqttPacket.generate(
            {
              cmd: 'connect',
              protocolId: 'MQTT',
              protocolVersion,
              clientId: `pipelined-${protocolVersion}`,
              clean: true,
              keepalive: 30,
              username: 'alice',
              password: Buffer.from('secret'),
            },
            opts,
          ),
          mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'pipe/t', qos: 1 }] }, opts),
          mqttPacket.generate(
            { cmd: 'publish', topic: 'pipe/t', payload: Buffer.from('early'), qos: 1, messageId: 2, retain: false, dup: false },
            opts,
          ),
          mqttPacket.generate({ cmd: 'pingreq' }, opts),
        ]),
      );
      const cmds: string[] = [];
      for (let i = 0; i < 5; i++) {
        const p = await client.next();
        if (p === undefined) break;
        cmds.push(p.cmd === 'publish' ? `publish:${Buffer.from(p.payload).toString()}` : p.cmd);
      }
      // CONNACK first [MQTT-3.2.0-1]; then the answers in order (the delivery of the message to its own publisher may come before or after the PUBACK).
      expect(cmds[0]).toBe('connack');
      expect(cmds[1]).toBe('suback');
      expect([...cmds.slice(2)].sort()).toEqual(['pingresp', 'puback', 'publish:early']);
      expect(cmds.indexOf('pingresp')).toBeGreaterThan(cmds.indexOf('puback'));
      client.destroy();
    },
  );

  /** Every byte the broker sends on one raw socket after `bytes`, until it closes or `ms` pass. */
  async function replyBytes(bytes: Buffer, ms = 1500): Promise<Buffer> {
    const socket = net.connect(tb.port, '127.0.0.1');
    const got: Buffer[] = [];
    socket.on('data', (d: Buffer) => got.push(d));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      socket.on('close', () => {
        clearTimeout(t);
        resolve();
      });
      socket.write(bytes);
    });
    socket.destroy();
    return Buffer.concat(got);
  }

  it('never sets the session-present bit in an MQTT 3.1 CONNACK (3.1 has none: the byte is reserved)', async () => {
    const connect = mqttPacket.generate(
      {
        cmd: 'connect',
        protocolId: 'MQIsdp',
        protocolVersion: 3,
        clientId: 'v31-present',
        clean: false,
        keepalive: 30,
        username: 'u',
        password: Buffer.from('secret'),
      },
      { protocolVersion: 3 },
    );
    const first = await replyBytes(connect, 300);
    expect([...first.subarray(0, 4)]).toEqual([0x20, 0x02, 0x00, 0x00]);
    // The session exists now; 3.1.1 would answer session present = 1, 3.1 keeps the byte 0.
    const again = await replyBytes(connect, 300);
    expect([...again.subarray(0, 4)]).toEqual([0x20, 0x02, 0x00, 0x00]);
  });

  it("keeps a v5 CONNACK within the client's Maximum Packet Size: the Reason String is left out [MQTT-3.1.2-24][MQTT-3.2.2-19]", async () => {
    const connect = (maximumPacketSize: number): Buffer =>
      mqttPacket.generate(
        {
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: 5,
          clientId: 'small-mps',
          clean: true,
          keepalive: 30,
          username: 'u',
          password: Buffer.from('wrong'),
          properties: { maximumPacketSize },
        },
        { protocolVersion: 5 },
      );
    const roomy = await replyBytes(connect(1000));
    expect(roomy[0]).toBe(0x20);
    expect(roomy.length).toBeGreaterThan(8); // 0x86 with the reason string "wrong password"
    const tight = await replyBytes(connect(8));
    expect([...tight]).toEqual([0x20, 0x03, 0x00, 0x86, 0x00]);
  });

  it('answers PINGREQ with PINGRESP and closes on DISCONNECT', async () => {
    const client = await RawClient.connect(tb.port);
    client.send({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clientId: 'pinger',
      clean: true,
      keepalive: 30,
      username: 'alice',
      password: Buffer.from('secret'),
    });
    expect((await client.next())?.cmd).toBe('connack');
    client.send({ cmd: 'pingreq' });
    expect((await client.next())?.cmd).toBe('pingresp');
    client.send({ cmd: 'disconnect' });
    expect(await client.waitClosed()).toBe(true);
  });

  it('closes a silent client after 1.5 × keep alive, not before [MQTT-3.1.2-24]', async () => {
    const client = await RawClient.connect(tb.port);
    client.send({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clientId: 'sleepy',
      clean: true,
      keepalive: 1,
      username: 'alice',
      password: Buffer.from('secret'),
    });
    expect((await client.next())?.cmd).toBe('connack');
    const started = Date.now();
    expect(await client.waitClosed(4000)).toBe(true);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(1500);
    expect(elapsed).toBeLessThan(2600);
  });

  it('closes a connection whose first packet is not CONNECT [MQTT-3.1.0-1]', async () => {
    const client = await RawClient.connect(tb.port);
    client.send({ cmd: 'pingreq' });
    expect(await client.waitClosed()).toBe(true);
    expect(client.packets).toEqual([]);
  });

  it('closes a connection that sends nothing within the connect timeout', async () => {
    const client = await RawClient.connect(tb.port);
    const started = Date.now();
    expect(await client.waitClosed(3000)).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
  });

  it('closes on malformed bytes and keeps serving others', async () => {
    const bad = await RawClient.connect(tb.port);
    bad.write([0x10, 0xff, 0xff, 0xff, 0xff, 0x7f]); // remaining length longer than four bytes
    expect(await bad.waitClosed()).toBe(true);
    const r = await connect(tb.port, { protocolVersion: 4, clientId: 'after-bad', username: 'alice', password: 'secret' });
    clients.push(r.client);
    expect(r.connack?.returnCode).toBe(0);
  });
});
