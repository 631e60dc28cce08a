import { useBrokerUnderTest } from '../support/broker-under-test';
import { expectPacket, uniqueName, withClients, type ProtocolVersion, type RawSession } from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 07, keep alive: a silent client is disconnected, PINGREQ keeps it alive, keep alive 0
 * disables the timeout, v5 Server Keep Alive. Standard MQTT runs against the broker under test
 * (Bifro, or mosquitto with BIFRO_E2E_TARGET=mosquitto); the last describe checks Bifro's exact
 * timing, its Server Keep Alive policy and its connect timeout on Bifro.
 */

jest.setTimeout(15000);

const VERSIONS: ProtocolVersion[] = [4, 5];

/** Resolves how long after the call the broker closed the connection, or undefined if it did not within `timeoutMs`. */
async function closedAfter(s: RawSession, timeoutMs: number): Promise<number | undefined> {
  const started = Date.now();
  return (await s.raw.waitClosed(timeoutMs)) ? Date.now() - started : undefined;
}

/** Sends PINGREQ every `everyMs` of the broker's time (`passTime`) for `forMs`, expecting a PINGRESP to each. */
async function keepPinging(s: RawSession, passTime: (ms: number) => Promise<void>, everyMs: number, forMs: number): Promise<number> {
  let pongs = 0;
  for (let passed = 0; passed < forMs; passed += everyMs) {
    s.send({ cmd: 'pingreq' });
    await expectPacket(s.raw, 'pingresp', 1000);
    pongs += 1;
    await passTime(everyMs);
  }
  return pongs;
}

describe('07 keepalive', () => {
  const broker = useBrokerUnderTest();
  const clients = broker.clients;

  describe.each(VERSIONS)('v%s', (protocolVersion) => {
    it('disconnects a client silent beyond 1.5 × keep alive, not before the keep alive [MQTT-3.1.2-24]', async () => {
      const s = await clients.raw({ protocolVersion, clientId: uniqueName(`ka-silent-v${protocolVersion}`), keepalive: 1 });
      // Time passes for the broker (its clock moved; mosquitto sleeps): open at the keep alive...
      await broker.passTime(1000);
      expect(s.raw.closed).toBe(false);
      // ...closed past 1.5 × keep alive. Mosquitto 2.0.11 checks keep alives coarsely and takes up
      // to ~6 s, so this only bounds it loosely (Bifro's exact timing is checked below).
      await broker.passTime(1000);
      expect(await closedAfter(s, 9000)).toBeDefined();
      // v5: a DISCONNECT before the close, if any, says Keep Alive timeout.
      for (const p of s.raw.packets) expect(p.cmd === 'disconnect' && p.reasonCode === 0x8d).toBe(true);
    });

    it('keeps a client that sends PINGREQ alive across 3 × keep alive [MQTT-3.1.2-23][MQTT-3.12.4-1]', async () => {
      const s = await clients.raw({ protocolVersion, clientId: uniqueName(`ka-ping-v${protocolVersion}`), keepalive: 1 });
      expect(await keepPinging(s, broker.passTime, 600, 3000)).toBeGreaterThanOrEqual(5);
      expect(s.raw.closed).toBe(false);
    });
  });

  it('keep alive 0 turns the mechanism off: silent clients stay connected (v3.1.1 and v5) [MQTT-3.1.2-23]', async () => {
    const sessions = await Promise.all(
      VERSIONS.map((protocolVersion) =>
        clients.raw({ protocolVersion, clientId: uniqueName(`ka-zero-v${protocolVersion}`), keepalive: 0 }),
      ),
    );
    await broker.passTime(3000);
    for (const s of sessions) {
      expect(s.raw.closed).toBe(false);
      s.send({ cmd: 'pingreq' });
      await expectPacket(s.raw, 'pingresp');
    }
  });

  it('v5: CONNACK has no Server Keep Alive, or the client’s own value, when the broker keeps it [MQTT-3.2.2-21] (v5)', async () => {
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('ka-server-v5'), keepalive: 30 });
    expect([undefined, 30]).toContain(s.connack.properties?.serverKeepAlive);
  });
});

/**
 * Bifro-only: exact keep alive timing (mosquitto is looser, see above), Bifro's Server Keep Alive
 * policy (sent only when MinKeepAliveSeconds raises the client's value) and the connect timeout
 * (Bifro's default is 10 s, too long for a test, so this broker sets 500 ms).
 */
describe('07 keepalive (Bifro)', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    tb = await startTestBroker(
      [
        'plugins:',
        '  settings: { use: "@fixtures/valid-settings", options: { values: { kafloor: { MinKeepAliveSeconds: 5 } } } }',
        'mqtt:',
        '  connectTimeoutMs: 500',
      ].join('\n'),
    );
  });
  afterAll(() => tb?.stop());

  it.each(VERSIONS)(
    'v%s: closes a silent keep-alive-1 client between 1.5 s and 2.6 s, in real time [MQTT-3.1.2-24]',
    async (protocolVersion) => {
      // The broker's clock is not moved here: the deadline fires from the timer wheel ticking in real time.
      const s = await clients.raw({ protocolVersion, clientId: uniqueName(`bka-silent-v${protocolVersion}`), keepalive: 1 });
      const elapsed = await closedAfter(s, 4000);
      expect(elapsed).toBeDefined();
      expect(elapsed!).toBeGreaterThanOrEqual(1450);
      expect(elapsed!).toBeLessThan(2600);
    },
  );

  it('v5: sends no Server Keep Alive when the tenant has no keep alive floor (MinKeepAliveSeconds 0) and the value is within mqtt.maxKeepAliveSeconds', async () => {
    for (const keepalive of [2, 30, 3600]) {
      const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('bka-none'), keepalive });
      expect(s.connack.reasonCode).toBe(0);
      expect(s.connack.properties?.serverKeepAlive).toBeUndefined();
    }
  });

  it('v5: keep alive 0 or above mqtt.maxKeepAliveSeconds (default 3600) gets Server Keep Alive 3600 [MQTT-3.2.2-21] (test/e2e/22 enforces it)', async () => {
    for (const keepalive of [0, 3601, 65535]) {
      const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('bka-max'), keepalive });
      expect(s.connack.reasonCode).toBe(0);
      expect(s.connack.properties?.serverKeepAlive).toBe(3600);
    }
  });

  it('v5: raises a keep alive below the tenant floor and says so with Server Keep Alive [MQTT-3.2.2-21][MQTT-3.2.2-22]', async () => {
    const raised = await clients.raw({ protocolVersion: 5, clientId: uniqueName('bka-raised'), username: 'kafloor/u', keepalive: 2 });
    expect(raised.connack.properties?.serverKeepAlive).toBe(5);
    const kept = await clients.raw({ protocolVersion: 5, clientId: uniqueName('bka-kept'), username: 'kafloor/u', keepalive: 30 });
    expect(kept.connack.properties?.serverKeepAlive).toBeUndefined();
  });

  it('closes a connection that never sends CONNECT after the connect timeout', async () => {
    const socket = await clients.rawSocket();
    const started = Date.now();
    expect(await socket.waitClosed(3000)).toBe(true);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(elapsed).toBeLessThan(2000);
    expect(socket.packets).toEqual([]);
  });
});
