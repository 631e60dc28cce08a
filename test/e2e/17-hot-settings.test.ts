import { writeFileSync } from 'node:fs';
import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { tryConnect } from '../support/mqtt-helpers';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 17, per-tenant settings changed while the broker runs: the settings-file plugin watches its
 * YAML file and the broker applies a change within 2 s, without a restart; an invalid edit is
 * refused with a warning and the previous value stays. Two tenants see their own values.
 */

let tb: TestBroker;
let file: string;
const clients: MqttClient[] = [];

async function connect(opts: IClientOptions): Promise<{ client: MqttClient; code: number }> {
  const r = await tryConnect(tb.port, { protocolVersion: 5, ...opts });
  clients.push(r.client);
  return { client: r.client, code: r.connack !== undefined ? (r.connack.reasonCode ?? 0) : (r.error?.code ?? -1) };
}

/** Publish QoS 1 and report the PUBACK code, or the DISCONNECT reason when the broker closed the connection. */
function publishOutcome(client: MqttClient, topic: string): Promise<string> {
  return new Promise((resolve) => {
    client.once('disconnect', (packet) => resolve(`disconnect ${packet.reasonCode ?? 0}`));
    client.publish(topic, 'x', { qos: 1 }, (err) => resolve(err === undefined || err === null ? 'ok' : `error ${err.message}`));
  });
}

async function waitFor(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  tb = await startTestBroker('', { settings: 'tenants:\n  hot:\n    MaxTopicLevels: 3\n    MQTT3Enabled: true\n' });
  file = tb.settingsFile;
});
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});
afterAll(() => tb.stop());

describe('17 hot settings', () => {
  it('applies MaxTopicLevels of one tenant within 2 s of a file edit, and leaves the other tenant alone', async () => {
    const { client: hot } = await connect({ clientId: 'hot-1', username: 'hot/u' });
    expect(await publishOutcome(hot, 'a/b/c/d')).toBe('disconnect 144'); // 0x90 topic name invalid
    const { client: cool } = await connect({ clientId: 'cool-1', username: 'cool/u' });
    expect(await publishOutcome(cool, 'a/b/c/d')).toBe('ok');

    writeFileSync(file, 'tenants:\n  hot:\n    MaxTopicLevels: 8\n');
    const started = Date.now();
    const applied = await waitFor(async () => {
      const { client } = await connect({ clientId: `hot-${Date.now()}`, username: 'hot/u' });
      return (await publishOutcome(client, 'a/b/c/d')) === 'ok';
    }, 3000);
    expect(applied).toBe(true);
    expect(Date.now() - started).toBeLessThan(2500);
  });

  it('turns MQTT 3.1 and 3.1.1 off for a tenant at the next CONNECT, and refuses an invalid edit keeping the previous value', async () => {
    expect((await connect({ protocolVersion: 3, protocolId: 'MQIsdp', clientId: 'v3-before', username: 'hot/u' })).code).toBe(0);
    writeFileSync(file, 'tenants:\n  hot:\n    MQTT4Enabled: false\n    MQTT3Enabled: false\n');
    const refused = await waitFor(
      async () => (await connect({ protocolVersion: 4, clientId: `v4-${Date.now()}`, username: 'hot/u' })).code === 1,
      3000,
    );
    expect(refused).toBe(true);
    expect((await connect({ protocolVersion: 3, protocolId: 'MQIsdp', clientId: 'v3-after', username: 'hot/u' })).code).toBe(1);
    writeFileSync(file, 'tenants:\n  hot:\n    MQTT4Enabled: "no"\n');
    await new Promise((r) => setTimeout(r, 1200));
    expect((await connect({ protocolVersion: 4, clientId: 'v4-still-off', username: 'hot/u' })).code).toBe(1);
    expect(tb.logs.some((l) => typeof l.msg === 'string' && l.msg.includes('MQTT4Enabled') && l.level === 40)).toBe(true);
    expect((await connect({ protocolVersion: 4, clientId: 'v4-other-tenant', username: 'cool/u' })).code).toBe(0);
  });
});

describe('17 broken settings plugin', () => {
  it('falls back to the registry defaults with a warning when an optional settings plugin cannot load', async () => {
    const broken = await startTestBroker(
      'plugins:\n  settings:\n    use: "@bifro/plugin-settings-file"\n    required: false\n    options: { pollMs: "often" }',
      { pluginsDir: path.join(REPO, 'plugins') },
    );
    try {
      const warning = broken.logs.find((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.includes('@bifro/plugin-settings-file'));
      expect(warning).toBeDefined();
      expect(broken.broker.plugins.find((p) => p.kinds.includes('settings'))?.name).toBe('@bifro/core:registry-default-settings');
      const client = mqtt.connect({ host: '127.0.0.1', port: broken.port, reconnectPeriod: 0, protocolVersion: 5, clientId: 'fallback' });
      clients.push(client);
      await new Promise((resolve) => client.once('connect', resolve));
      // MaxTopicLevels is at its registry default (128): a deep topic is fine.
      expect(await publishOutcome(client, 'a/b/c/d/e/f/g/h/i/j')).toBe('ok');
    } finally {
      for (const c of clients.splice(0)) c.end(true);
      await broken.stop();
    }
  });
});
