import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 18, tenant isolation: two tenants use the same client ids and topics and never see each
 * other's messages (also through `#`), retained messages, sessions or shared groups. The dev-only
 * auth maps username `tenant/user` to the tenant.
 */

let tb: TestBroker;
const clients: MqttClient[] = [];

function connect(
  opts: IClientOptions,
  onMessage?: (topic: string, payload: string, retain: boolean) => void,
): Promise<{ client: MqttClient; sessionPresent: boolean }> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect({
      host: '127.0.0.1',
      port: tb.port,
      reconnectPeriod: 0,
      connectTimeout: 5000,
      protocolVersion: 5,
      ...opts,
    });
    clients.push(client);
    if (onMessage) client.on('message', (t, p, packet) => onMessage(t, p.toString(), packet.retain));
    client.once('connect', (connack) => resolve({ client, sessionPresent: connack.sessionPresent }));
    client.once('error', reject);
  });
}

const settle = (ms = 200): Promise<void> => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  tb = await startTestBroker();
});
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});
afterAll(() => tb.stop());

describe('18 tenant isolation', () => {
  it('delivers a publish only inside its tenant, also to `#` subscribers with the same client id', async () => {
    const got: Record<string, string[]> = { a: [], b: [] };
    const subA = await connect({ clientId: 'same-id', username: 'ta/u' }, (t, p) => got.a!.push(`${t}=${p}`));
    const subB = await connect({ clientId: 'same-id', username: 'tb/u' }, (t, p) => got.b!.push(`${t}=${p}`));
    await subA.client.subscribeAsync('#', { qos: 1 });
    await subB.client.subscribeAsync('#', { qos: 1 });
    const pubA = await connect({ clientId: 'pub', username: 'ta/p' });
    const pubB = await connect({ clientId: 'pub', username: 'tb/p' });
    await pubA.client.publishAsync('x/y', 'from-a', { qos: 1 });
    await pubB.client.publishAsync('x/y', 'from-b', { qos: 1 });
    await settle();
    expect(got.a).toEqual(['x/y=from-a']);
    expect(got.b).toEqual(['x/y=from-b']);
  });

  it('keeps retained messages per tenant', async () => {
    const pubA = await connect({ clientId: 'rpub', username: 'ra/p' });
    await pubA.client.publishAsync('state', 'a-state', { qos: 1, retain: true });
    const got: string[] = [];
    const subB = await connect({ clientId: 'rsub', username: 'rb/s' }, (_t, p) => got.push(p));
    await subB.client.subscribeAsync('#', { qos: 1 });
    await settle();
    expect(got).toEqual([]);
    const gotA: string[] = [];
    const subA = await connect({ clientId: 'rsub', username: 'ra/s' }, (_t, p, retain) => gotA.push(`${p}:${retain}`));
    await subA.client.subscribeAsync('#', { qos: 1 });
    await settle();
    expect(gotA).toEqual(['a-state:true']);
  });

  it('keeps sessions per tenant: the same client id in another tenant neither takes over nor resumes it', async () => {
    const persistent = (username: string): IClientOptions => ({
      clientId: 'dev-1',
      username,
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    });
    const a = await connect(persistent('sa/u'));
    expect(a.sessionPresent).toBe(false);
    const b = await connect(persistent('sb/u'));
    expect(b.sessionPresent).toBe(false);
    await settle(100);
    expect(a.client.connected).toBe(true); // not taken over by the other tenant
    await a.client.endAsync();
    expect((await connect(persistent('sa/u'))).sessionPresent).toBe(true);
  });

  it('keeps shared subscription groups per tenant', async () => {
    const got: Record<string, number> = { a: 0, b: 0 };
    const memberA = await connect({ clientId: 'm', username: 'ga/u' }, () => got.a!++);
    const memberB = await connect({ clientId: 'm', username: 'gb/u' }, () => got.b!++);
    await memberA.client.subscribeAsync('$share/g/jobs', { qos: 1 });
    await memberB.client.subscribeAsync('$share/g/jobs', { qos: 1 });
    const pubA = await connect({ clientId: 'gp', username: 'ga/p' });
    for (let i = 0; i < 10; i++) await pubA.client.publishAsync('jobs', `j${i}`, { qos: 1 });
    await settle();
    expect(got).toEqual({ a: 10, b: 0 });
  });
});
