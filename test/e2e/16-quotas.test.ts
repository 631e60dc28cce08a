import path from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';
import { expectPacket, rawConnect, sleep, waitUntil } from '../support/mqtt-helpers';

/**
 * Area 16, tenant quotas through the resource throttler (the first-party throttler-quota plugin)
 * fed by the usage the broker keeps: connections (CONNACK 0x97 / v3 0x03), persistent sessions,
 * subscriptions (SUBACK 0x97 / v3 0x80, released again on unsubscribe), inbound bytes per second
 * (reading slowed, nothing dropped), outbound bytes per second (deliveries wait), session memory
 * and persistent inbox bytes (deliveries over them dropped), retained matches per second (the
 * subscription is made without its retained messages). The dev-only auth maps username `tenant/user` to the tenant.
 */

let tb: TestBroker;
const clients: MqttClient[] = [];

function connect(opts: IClientOptions): Promise<{ client: MqttClient; code: number }> {
  return new Promise((resolve) => {
    const client = mqtt.connect({ host: '127.0.0.1', port: tb.port, reconnectPeriod: 0, connectTimeout: 5000, ...opts });
    clients.push(client);
    client.once('connect', (connack) => resolve({ client, code: connack.reasonCode ?? connack.returnCode ?? 0 }));
    client.once('error', (err: Error & { code?: number }) => resolve({ client, code: err.code ?? -1 }));
  });
}

/** The SUBACK codes (MQTT.js rejects subscribeAsync when any filter failed). */
function subscribeCodes(client: MqttClient, topics: Record<string, { qos: 0 | 1 | 2 }>): Promise<number[]> {
  return new Promise((resolve) => {
    client.subscribe(topics, (err, granted) => {
      const packet = (err as (Error & { packet?: { granted?: number[] } }) | null)?.packet;
      resolve(packet?.granted ?? (granted ?? []).map((g) => g.qos));
    });
  });
}

beforeAll(async () => {
  tb = await startTestBroker(
    [
      'plugins:',
      '  throttler:',
      '    use: "@bifro/plugin-throttler-quota"',
      '    options:',
      '      tenants:',
      '        conn: { TotalConnections: 1 }',
      '        subs: { TotalTransientSubscriptions: 2, TotalSharedSubscriptions: 1 }',
      '        subs4: { TotalTransientSubscriptions: 1 }',
      '        pers: { TotalPersistentSessions: 1 }',
      '        slow: { TotalInboundBytesPerSecond: 20000 }',
      '        ret: { TotalRetainTopics: 1 }',
      '        out: { TotalOutboundBytesPerSecond: 20000 }',
      '        mem: { TotalSessionMemoryBytes: 30000 }',
      '        box: { TotalPersistentSessionSpaceBytes: 25000 }',
      '        match: { TotalRetainMatchPerSecond: 1 }',
    ].join('\n'),
    { pluginsDir: path.join(REPO, 'plugins') },
  );
});
afterEach(() => {
  for (const c of clients.splice(0)) c.end(true);
});
afterAll(() => tb.stop());

describe('16 quotas', () => {
  it.each([
    [5, 0x97],
    [4, 3],
  ] as const)(
    'refuses a connection over the tenant connection quota (v%s → %s), and admits one again when a slot frees',
    async (protocolVersion, code) => {
      const first = await connect({ protocolVersion, clientId: `c1-${protocolVersion}`, username: 'conn/a' });
      expect(first.code).toBe(0);
      expect((await connect({ protocolVersion, clientId: `c2-${protocolVersion}`, username: 'conn/b' })).code).toBe(code);
      expect((await connect({ protocolVersion, clientId: `other-${protocolVersion}`, username: 'free/a' })).code).toBe(0);
      await first.client.endAsync();
      await new Promise((r) => setTimeout(r, 50));
      expect((await connect({ protocolVersion, clientId: `c3-${protocolVersion}`, username: 'conn/c' })).code).toBe(0);
    },
  );

  it('refuses subscriptions over the quota with 0x97, and counts an unsubscribe back', async () => {
    const { client } = await connect({ protocolVersion: 5, clientId: 's1', username: 'subs/a' });
    expect(await subscribeCodes(client, { 'q/1': { qos: 1 }, 'q/2': { qos: 1 }, 'q/3': { qos: 1 } })).toEqual([1, 1, 0x97]);
    await client.unsubscribeAsync('q/1');
    expect(await subscribeCodes(client, { 'q/3': { qos: 1 } })).toEqual([1]);
    expect(await subscribeCodes(client, { '$share/g/q/a': { qos: 0 }, '$share/g/q/b': { qos: 0 } })).toEqual([0, 0x97]);
  });

  it('refuses subscriptions over the quota on v3.1.1 with 0x80', async () => {
    const { client } = await connect({ protocolVersion: 4, clientId: 's4', username: 'subs4/b' });
    expect(await subscribeCodes(client, { 'r/1': { qos: 0 }, 'r/2': { qos: 0 }, 'r/3': { qos: 0 } })).toEqual([0, 0x80, 0x80]);
  });

  it('refuses a persistent session over the quota with 0x97, but not a clean one', async () => {
    const persistent = (clientId: string): IClientOptions => ({
      protocolVersion: 5,
      clientId,
      clean: false,
      username: 'pers/a',
      properties: { sessionExpiryInterval: 60 },
    });
    expect((await connect(persistent('p1'))).code).toBe(0);
    expect((await connect(persistent('p2'))).code).toBe(0x97);
    expect((await connect({ protocolVersion: 5, clientId: 'p3', username: 'pers/b' })).code).toBe(0);
    // The existing persistent session itself can always come back.
    expect((await connect(persistent('p1'))).code).toBe(0);
  });

  it('ignores a retained message over the retained-topics quota but still delivers it; a replacement stays allowed', async () => {
    const live: string[] = [];
    const { client: watcher } = await connect({ protocolVersion: 5, clientId: 'ret-watch', username: 'ret/w' });
    watcher.on('message', (t, p) => live.push(`${t}=${p.toString()}`));
    await watcher.subscribeAsync('ret/#', { qos: 1 });
    const { client: pub } = await connect({ protocolVersion: 5, clientId: 'ret-pub', username: 'ret/p' });
    await pub.publishAsync('ret/a', 'a1', { qos: 1, retain: true });
    await pub.publishAsync('ret/b', 'b1', { qos: 1, retain: true }); // over the quota: not retained
    await pub.publishAsync('ret/a', 'a2', { qos: 1, retain: true }); // replaces ret/a: allowed
    const deadline = Date.now() + 3000;
    while (live.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(live).toEqual(['ret/a=a1', 'ret/b=b1', 'ret/a=a2']);
    const retained: string[] = [];
    const { client: late } = await connect({ protocolVersion: 5, clientId: 'ret-late', username: 'ret/l' });
    late.on('message', (t, p, packet) => retained.push(`${t}=${p.toString()}:${packet.retain}`));
    await late.subscribeAsync('ret/#', { qos: 1 });
    await new Promise((r) => setTimeout(r, 300));
    expect(retained).toEqual(['ret/a=a2:true']);
  });

  it('slows the reading of a tenant over its inbound bytes per second, and drops nothing', async () => {
    const { client: sub } = await connect({ protocolVersion: 5, clientId: 'slow-sub', username: 'slow/s' });
    const got: string[] = [];
    sub.on('message', (_t, payload) => got.push(payload.subarray(0, 4).toString()));
    await sub.subscribeAsync('slow/t', { qos: 0 });
    const { client: pub } = await connect({ protocolVersion: 5, clientId: 'slow-pub', username: 'slow/p' });
    const started = Date.now();
    for (let i = 0; i < 8; i++)
      pub.publish('slow/t', Buffer.concat([Buffer.from(`m${i}`.padEnd(4, '_')), Buffer.alloc(10_000)]), { qos: 0 });
    const deadline = Date.now() + 8000;
    while (got.length < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual(Array.from({ length: 8 }, (_, i) => `m${i}`.padEnd(4, '_')));
    // 80 KB at 20 KB/s cannot all be read at once: the reads were paused at least once.
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
  });
});

describe('16 quotas on outbound traffic and queued bytes', () => {
  const payload = (i: number): Buffer => Buffer.concat([Buffer.from(`m${i}`.padEnd(4, '_')), Buffer.alloc(9_996)]);

  it('holds deliveries back while the tenant is over its outbound bytes per second, and drops nothing', async () => {
    const { client: sub } = await connect({ protocolVersion: 5, clientId: 'out-sub', username: 'out/s' });
    const got: string[] = [];
    sub.on('message', (_t, p) => got.push(p.subarray(0, 4).toString()));
    await sub.subscribeAsync('out/t', { qos: 1 });
    const { client: pub } = await connect({ protocolVersion: 5, clientId: 'out-pub', username: 'free/p' });
    const { client: pubOut } = await connect({ protocolVersion: 5, clientId: 'out-pub2', username: 'out/p' });
    const started = Date.now();
    for (let i = 0; i < 6; i++) await pubOut.publishAsync('out/t', payload(i), { qos: 1 });
    expect(await waitUntil(() => got.length === 6, 8000)).toBe(true);
    expect(got).toEqual(Array.from({ length: 6 }, (_, i) => `m${i}`.padEnd(4, '_')));
    // 60 KB at 20 KB/s: at least two windows passed before the last one left.
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(tb.broker.tenantMetrics('out').messagesDropped).toBe(0);
    await pub.endAsync();
  });

  it('drops deliveries that would queue past the tenant session memory quota', async () => {
    // Receive Maximum 1 and no PUBACK: the first delivery is in flight, the rest queue in memory.
    const s = await rawConnect(tb.port, { protocolVersion: 5, clientId: 'mem-sub', username: 'mem/s', properties: { receiveMaximum: 1 } });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'mem/t', qos: 1 }] });
    await expectPacket(s.raw, 'suback');
    const { client: pub } = await connect({ protocolVersion: 5, clientId: 'mem-pub', username: 'mem/p' });
    for (let i = 0; i < 8; i++) await pub.publishAsync('mem/t', payload(i), { qos: 1 });
    // One in flight; three queued (0, 10 and 20 KB used are under 30 KB); four dropped. (Live
    // deliveries may still wait behind the new subscription's retained lookup for a moment.)
    expect(await waitUntil(() => tb.broker.tenantMetrics('mem').messagesDropped === 4)).toBe(true);
    expect(tb.broker.tenantMetrics('mem').sessionMemoryBytes).toBeGreaterThanOrEqual(30_000);
    const received: string[] = [];
    for (let i = 0; i < 4; i++) {
      const p = await expectPacket(s.raw, 'publish');
      received.push(Buffer.from(p.payload).subarray(0, 4).toString());
      s.send({ cmd: 'puback', messageId: p.messageId! });
    }
    expect(received).toEqual(['m0__', 'm1__', 'm2__', 'm3__']);
    await sleep(200);
    expect(s.raw.packets.filter((p) => p.cmd === 'publish')).toHaveLength(0);
    expect(tb.broker.tenantMetrics('mem').sessionMemoryBytes).toBe(0);
    s.raw.destroy();
  });

  it('drops deliveries to offline persistent sessions past the tenant inbox bytes quota', async () => {
    const opts = {
      protocolVersion: 5 as const,
      clientId: 'box-sub',
      username: 'box/s',
      clean: false,
      properties: { sessionExpiryInterval: 300 },
    };
    const { client: first } = await connect(opts);
    await first.subscribeAsync('box/t', { qos: 1 });
    await first.endAsync();
    const { client: pub } = await connect({ protocolVersion: 5, clientId: 'box-pub', username: 'box/p' });
    for (let i = 0; i < 5; i++) await pub.publishAsync('box/t', payload(i), { qos: 1 });
    expect(tb.broker.tenantMetrics('box').inboxBytes).toBeGreaterThanOrEqual(25_000);
    const got: string[] = [];
    const again = mqtt.connect({ host: '127.0.0.1', port: tb.port, reconnectPeriod: 0, ...opts });
    clients.push(again);
    again.on('message', (_t, p) => got.push(p.subarray(0, 4).toString()));
    await waitUntil(() => got.length >= 3, 3000);
    await sleep(200);
    expect(got).toEqual(['m0__', 'm1__', 'm2__']);
    expect(tb.broker.tenantMetrics('box').inboxBytes).toBe(0);
    expect(tb.broker.tenantMetrics('box').messagesDropped).toBe(2);
  });

  it('grants a subscription but sends no retained messages past the retained matches per second', async () => {
    const { client: pub } = await connect({ protocolVersion: 5, clientId: 'match-pub', username: 'match/p' });
    await pub.publishAsync('match/a', 'kept', { qos: 1, retain: true });
    const { client: sub } = await connect({ protocolVersion: 5, clientId: 'match-sub', username: 'match/s' });
    const got: string[] = [];
    sub.on('message', (t) => got.push(t));
    expect(await subscribeCodes(sub, { 'match/a': { qos: 1 } })).toEqual([1]);
    expect(await subscribeCodes(sub, { 'match/+': { qos: 1 } })).toEqual([1]);
    await sleep(300);
    expect(got).toEqual(['match/a']);
    await pub.publishAsync('match/a', 'live', { qos: 1 });
    expect(await waitUntil(() => got.length === 2, 3000)).toBe(true);
  });
});

describe('16 fan-out caps (tenant settings)', () => {
  let capped: TestBroker;
  beforeAll(async () => {
    capped = await startTestBroker(
      'plugins:\n  settings:\n    use: "@fixtures/valid-settings"\n    options: { values: { fan: { MaxPersistentFanout: 2 } } }',
    );
  });
  afterAll(() => capped.stop());

  it('queues one message for at most MaxPersistentFanout offline persistent sessions', async () => {
    const open = (clientId: string, onMessage?: () => void): Promise<MqttClient> =>
      new Promise((resolve, reject) => {
        const client = mqtt.connect({
          host: '127.0.0.1',
          port: capped.port,
          reconnectPeriod: 0,
          protocolVersion: 5,
          clientId,
          username: 'fan/u',
          clean: false,
          properties: { sessionExpiryInterval: 300 },
        });
        clients.push(client);
        if (onMessage) client.on('message', onMessage);
        client.once('connect', () => resolve(client));
        client.once('error', reject);
      });
    for (const id of ['f1', 'f2', 'f3']) {
      const c = await open(id);
      await c.subscribeAsync('fan/t', { qos: 1 });
      await c.endAsync();
    }
    const pub = await open('fan-pub');
    await pub.publishAsync('fan/t', 'once', { qos: 1 });
    let received = 0;
    for (const id of ['f1', 'f2', 'f3']) await open(id, () => received++);
    await new Promise((r) => setTimeout(r, 300));
    expect(received).toBe(2);
  });
});
