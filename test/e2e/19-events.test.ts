import mqttPacket from 'mqtt-packet';
import type { MqttClient } from 'mqtt';
import type { BrokerEvent, EventGroup, EventType } from '@bifro/spi';
import {
  connectAsync,
  connectPacket,
  expectPacket,
  publish,
  rawConnect,
  sleep,
  subscribe,
  uniqueName,
  unsubscribe,
  waitUntil,
  withClients,
  QUIET_MS,
  WAIT_MS,
} from '../support/mqtt-helpers';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Area 19, broker events end to end: real clients provoke each event type, and the fixture
 * collector `@fixtures/recording-events` (loaded from the YAML config like any plugin) records
 * what the broker reported into `globalThis.__bifroRecordedEvents[sink]`: the broker runs in this
 * process. Each check covers the type, its group, who it is about (tenant, client, user), the time
 * and the `detail` fields docs/spi/events.md documents.
 */

jest.setTimeout(30_000);

/** The array the recording collector named `name` fills (the same array whether the test or the plugin creates it). */
function sink(name: string): BrokerEvent[] {
  const g = globalThis as { __bifroRecordedEvents?: Record<string, BrokerEvent[]> };
  const sinks = (g.__bifroRecordedEvents ??= {});
  return (sinks[name] ??= []);
}

/** Recorded events of `type` about `clientId` (any client when undefined), from index `from` of the sink on. */
function find(events: readonly BrokerEvent[], type: EventType, clientId?: string, from = 0): BrokerEvent[] {
  return events.slice(from).filter((e) => e.type === type && (clientId === undefined || e.clientId === clientId));
}

/** The first recorded event of `type` about `clientId`; fails the test with what was recorded when none comes in time. */
async function waitEvent(events: readonly BrokerEvent[], type: EventType, clientId?: string, from = 0, ms = WAIT_MS): Promise<BrokerEvent> {
  await waitUntil(() => find(events, type, clientId, from).length > 0, ms);
  const found = find(events, type, clientId, from)[0];
  if (found === undefined) {
    const seen = events.slice(from).map((e) => `${e.type}(${e.clientId ?? '-'})`);
    throw new Error(`no ${type} event for ${clientId ?? 'any client'}; recorded: ${seen.join(', ')}`);
  }
  return found;
}

interface Expected {
  readonly type: EventType;
  readonly group: EventGroup;
  readonly tenantId: string | undefined;
  readonly clientId: string | undefined;
  readonly userId?: string;
}

/** The event has the type, group and subject expected, a time between `since` and now, and exactly the `detail` expected. */
function expectEvent(e: BrokerEvent, expected: Expected, detail: Record<string, unknown>, since: number): void {
  expect({ type: e.type, group: e.group, tenantId: e.tenantId, clientId: e.clientId }).toEqual({
    type: expected.type,
    group: expected.group,
    tenantId: expected.tenantId,
    clientId: expected.clientId,
  });
  if ('userId' in expected) expect(e.userId).toBe(expected.userId);
  expect(e.time).toBeGreaterThanOrEqual(since);
  expect(e.time).toBeLessThanOrEqual(Date.now());
  // toEqual ignores keys whose value is undefined; the keys that are set must be the documented ones.
  expect(e.detail).toEqual(detail);
}

/** The clientDisconnected-group events about `clientId`: one per closed connection. */
function disconnects(events: readonly BrokerEvent[], clientId: string, from = 0): EventType[] {
  return events
    .slice(from)
    .filter((e) => e.group === 'clientDisconnected' && e.clientId === clientId)
    .map((e) => e.type);
}

/** A PUBLISH with a raw topic (any bytes), QoS 0; v5 gets an empty property block. */
function rawPublish(topic: Buffer, v5: boolean): Buffer {
  const body = [topic.length >> 8, topic.length & 0xff, ...topic, ...(v5 ? [0x00] : []), 0x78];
  return Buffer.from([0x30, body.length, ...body]);
}

/** Publish and resolve the error MQTT.js reports (a v5 PUBACK ≥ 0x80 is one), or undefined. */
function publishOutcome(client: MqttClient, topic: string, payload: string, qos: 0 | 1 | 2): Promise<Error | undefined> {
  return new Promise((resolve) => client.publish(topic, payload, { qos }, (err) => resolve(err ?? undefined)));
}

const LOCAL = '127.0.0.1';

describe('19 events: every type a collector asks for', () => {
  let tb: TestBroker;
  const events = sink('main');
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    events.length = 0;
    tb = await startTestBroker(
      [
        'plugins:',
        '  settings:',
        '    use: "@fixtures/valid-settings"',
        '    options:',
        '      values:',
        '        dbg: { DebugModeEnabled: true }',
        '        ev: { ByPassPermCheckError: true }',
        '        strict: { ByPassPermCheckError: false }',
        '        fan: { MaxGroupFanout: 1 }',
        '        stall: { SessionInboxSize: 2, MinSendPerSec: 8 }',
        '  acl: ["@fixtures/valid-acl", { use: "@fixtures/acl-errors", options: { mode: error } }]',
        '  throttler: { use: "@fixtures/valid-throttler", options: { exhausted: [full] } }',
        '  storage: { use: "@fixtures/valid-storage", options: { failInboxFor: sick } }',
        '  events: [{ use: "@fixtures/recording-events", options: { sink: main } }]',
      ].join('\n'),
    );
  });
  afterAll(() => tb.stop());

  it('reports subscriberStalled (MinSendPerSec) once a second when the queue overflows while fewer messages leave than the minimum', async () => {
    const from = events.length;
    const subId = uniqueName('stall-sub');
    // Receive Maximum 1 and no PUBACK: one message leaves, then the queue (SessionInboxSize 2) overflows.
    const sub = clients.track(
      await rawConnect(tb.port, { protocolVersion: 5, clientId: subId, username: 'stall/s', properties: { receiveMaximum: 1 } }),
    );
    sub.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'stall/t', qos: 1 }] });
    await expectPacket(sub.raw, 'suback');
    const { client: pub } = await connectAsync(tb.port, { protocolVersion: 5, clientId: uniqueName('stall-pub'), username: 'stall/p' });
    clients.track(pub);
    for (let i = 0; i < 6; i++) await pub.publishAsync('stall/t', `m${i}`, { qos: 1 });
    const e = await waitEvent(events, 'subscriberStalled', subId, from);
    expect(e.tenantId).toBe('stall');
    expect(e.detail).toEqual({ reason: 'MinSendPerSec', sentPerSecond: 1, minSendPerSec: 8 });
    expect(find(events, 'inboxOverflowed', subId, from)).toHaveLength(3);
    // Three overflows in the same second: reported once.
    expect(find(events, 'subscriberStalled', subId, from)).toHaveLength(1);
  });

  it('reports clientConnected, sessionStarted, byClient and sessionStopped for a client that connects and disconnects', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-conn');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId, username: 'ev/alice' });
    const who = { tenantId: 'ev', clientId, userId: 'alice' };
    expectEvent(
      await waitEvent(events, 'clientConnected', clientId),
      { type: 'clientConnected', group: 'clientConnected', ...who },
      { remoteAddress: LOCAL, listener: 'tcp', sessionPresent: false, protocolVersion: 5 },
      since,
    );
    expectEvent(await waitEvent(events, 'sessionStarted', clientId), { type: 'sessionStarted', group: 'session', ...who }, {}, since);
    await client.endAsync();
    expectEvent(
      await waitEvent(events, 'byClient', clientId),
      { type: 'byClient', group: 'clientDisconnected', ...who },
      { remoteAddress: LOCAL, reasonCode: 0 },
      since,
    );
    expectEvent(await waitEvent(events, 'sessionStopped', clientId), { type: 'sessionStopped', group: 'session', ...who }, {}, since);
    await sleep(QUIET_MS);
    expect(disconnects(events, clientId)).toEqual(['byClient']);
  });

  it('reports channelError when the network connection drops without DISCONNECT, and willDistributed for its will', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-drop');
    const session = await clients.raw({
      clientId,
      username: 'ev/bob',
      will: { topic: 'ev/will/bob', payload: Buffer.from('gone'), qos: 0, retain: false },
    });
    session.raw.destroy();
    const who = { tenantId: 'ev', clientId, userId: 'bob' };
    expectEvent(
      await waitEvent(events, 'channelError', clientId),
      { type: 'channelError', group: 'clientDisconnected', ...who },
      { remoteAddress: LOCAL },
      since,
    );
    expectEvent(
      await waitEvent(events, 'willDistributed', clientId),
      { type: 'willDistributed', group: 'inboundPublish', ...who },
      { topic: 'ev/will/bob' },
      since,
    );
    await sleep(QUIET_MS);
    expect(disconnects(events, clientId)).toEqual(['channelError']);
  });

  it('does not publish a will its client may not publish, and reports pubActionDisallow for it', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-will-denied');
    const watcher = await clients.subscriber(
      '#',
      { qos: 0 },
      { protocolVersion: 5, clientId: uniqueName('ev-will-watch'), username: 'evw/watch' },
    );
    const session = await clients.raw({
      clientId,
      username: 'evw/carol',
      will: { topic: 'forbidden/will', payload: Buffer.from('must not appear'), qos: 0, retain: false },
    });
    session.raw.destroy();
    expectEvent(
      await waitEvent(events, 'pubActionDisallow', clientId),
      { type: 'pubActionDisallow', group: 'accessControl', tenantId: 'evw', clientId, userId: 'carol' },
      { topic: 'forbidden/will', qos: 0, will: true },
      since,
    );
    await sleep(QUIET_MS);
    expect(find(events, 'willDistributed', clientId)).toHaveLength(0);
    expect(watcher.messages.messages.map((m) => m.topic)).not.toContain('forbidden/will');
  });

  it('reports idle (and nothing else) when keep alive runs out', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-idle');
    await clients.raw({ clientId, username: 'ev/idler', keepalive: 1 });
    expectEvent(
      await waitEvent(events, 'idle', clientId, 0, 5000),
      { type: 'idle', group: 'clientDisconnected', tenantId: 'ev', clientId, userId: 'idler' },
      { remoteAddress: LOCAL, keepAlive: 1 },
      since,
    );
    await sleep(QUIET_MS);
    expect(disconnects(events, clientId)).toEqual(['idle']);
  });

  it('reports badPacket with the reason code of the DISCONNECT that closed the connection', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-bad');
    const session = await clients.raw({ protocolVersion: 5, clientId, username: 'ev/bad' });
    session.raw.write([0x36, 0x05, 0x00, 0x01, 0x61, 0x00, 0x01]); // PUBLISH with QoS 3 [MQTT-3.3.1-4]
    expect((await expectPacket(session.raw, 'disconnect')).reasonCode).toBe(0x81);
    expectEvent(
      await waitEvent(events, 'badPacket', clientId),
      { type: 'badPacket', group: 'clientDisconnected', tenantId: 'ev', clientId },
      { remoteAddress: LOCAL, reasonCode: 0x81, reason: 'invalid PUBLISH' },
      since,
    );
    await sleep(QUIET_MS);
    expect(disconnects(events, clientId)).toEqual(['badPacket']);
  });

  it('tells malformedTopic (ill-formed UTF-8 or U+0000) from invalidTopic (a well-formed topic the rules refuse)', async () => {
    const since = Date.now();
    const nul = uniqueName('ev-nul');
    const a = await clients.raw({ protocolVersion: 5, clientId: nul, username: 'ev/t' });
    a.raw.write(rawPublish(Buffer.from('a\u0000b'), true));
    expect((await expectPacket(a.raw, 'disconnect')).reasonCode).toBe(0x81);
    expectEvent(
      await waitEvent(events, 'malformedTopic', nul),
      { type: 'malformedTopic', group: 'clientDisconnected', tenantId: 'ev', clientId: nul },
      { remoteAddress: LOCAL, reasonCode: 0x81, reason: 'topic is ill-formed UTF-8 or contains U+0000' },
      since,
    );
    const utf = uniqueName('ev-utf');
    const b = await clients.raw({ protocolVersion: 4, clientId: utf, username: 'ev/t' });
    b.raw.write(rawPublish(Buffer.from([0x61, 0xc3, 0x28]), false));
    expect(await b.raw.waitClosed()).toBe(true);
    expect((await waitEvent(events, 'malformedTopic', utf)).detail.reasonCode).toBe(0x81);

    const wild = uniqueName('ev-wild');
    const c = await clients.raw({ protocolVersion: 5, clientId: wild, username: 'ev/t' });
    c.raw.write(rawPublish(Buffer.from('a/+'), true));
    expect((await expectPacket(c.raw, 'disconnect')).reasonCode).toBe(0x90);
    expectEvent(
      await waitEvent(events, 'invalidTopic', wild),
      { type: 'invalidTopic', group: 'clientDisconnected', tenantId: 'ev', clientId: wild },
      { remoteAddress: LOCAL, reasonCode: 0x90, reason: 'invalid topic (wildcard)' },
      since,
    );
    await sleep(QUIET_MS);
    expect([...disconnects(events, nul), ...disconnects(events, utf), ...disconnects(events, wild)]).toEqual([
      'malformedTopic',
      'malformedTopic',
      'invalidTopic',
    ]);
  });

  it('tells malformedTopicFilter (closes) from invalidTopicFilter (SUBACK failure)', async () => {
    const since = Date.now();
    const utf = uniqueName('ev-futf');
    const a = await clients.raw({ protocolVersion: 5, clientId: utf, username: 'ev/f' });
    const filter = [0x61, 0xed, 0xa0, 0x80]; // an encoded surrogate: ill-formed UTF-8
    const body = [0x00, 0x02, 0x00, 0x00, filter.length, ...filter, 0x00];
    a.raw.write([0x82, body.length, ...body]);
    expect((await expectPacket(a.raw, 'disconnect')).reasonCode).toBe(0x81);
    expectEvent(
      await waitEvent(events, 'malformedTopicFilter', utf),
      { type: 'malformedTopicFilter', group: 'clientDisconnected', tenantId: 'ev', clientId: utf },
      { remoteAddress: LOCAL, reasonCode: 0x81, reason: 'topic filter is ill-formed UTF-8 or contains U+0000' },
      since,
    );

    const nul = uniqueName('ev-fnul');
    const b = await clients.raw({ protocolVersion: 4, clientId: nul, username: 'ev/f' });
    b.send({ cmd: 'unsubscribe', messageId: 3, unsubscriptions: ['a/\u0000'] });
    expect(await b.raw.waitClosed()).toBe(true);
    expect((await waitEvent(events, 'malformedTopicFilter', nul)).detail.reasonCode).toBe(0x81);

    // A filter that breaks the wildcard rules is not correctly formed: malformed, closed [MQTT-4.7.1-1].
    const wild = uniqueName('ev-fwild');
    const w = await clients.raw({ protocolVersion: 5, clientId: wild, username: 'ev/f' });
    w.send({ cmd: 'subscribe', messageId: 4, subscriptions: [{ topic: 'a/#/b', qos: 0 }] });
    expect((await expectPacket(w.raw, 'disconnect')).reasonCode).toBe(0x81);
    expect((await waitEvent(events, 'malformedTopicFilter', wild)).detail.reason).toBe('invalid topic filter (bad-wildcard)');

    // A correctly formed filter over the tenant's limits (MaxTopicLevels 128) gets SUBACK 0x8F (§3.9.3).
    const bad = uniqueName('ev-fbad');
    const deep = Array.from({ length: 130 }, () => 'a').join('/');
    const c = await clients.raw({ protocolVersion: 5, clientId: bad, username: 'ev/f' });
    c.send({ cmd: 'subscribe', messageId: 5, subscriptions: [{ topic: deep, qos: 0 }] });
    expect((await expectPacket(c.raw, 'suback')).granted).toEqual([0x8f]);
    expectEvent(
      await waitEvent(events, 'invalidTopicFilter', bad),
      { type: 'invalidTopicFilter', group: 'clientDisconnected', tenantId: 'ev', clientId: bad },
      { filter: deep, reason: 'too-many-levels' },
      since,
    );
    expect(c.raw.closed).toBe(false);
  });

  it('reports malformedUserName for a CONNECT whose username is ill-formed UTF-8, before any tenant is known', async () => {
    const since = Date.now();
    const from = events.length;
    const raw = await clients.rawSocket(4);
    const bytes = mqttPacket.generate(connectPacket({ clientId: uniqueName('ev-user'), username: 'UU' }), { protocolVersion: 4 });
    const at = bytes.indexOf(Buffer.from([0x00, 0x02, 0x55, 0x55]));
    bytes[at + 2] = 0xc3; // "Ã(" cut short: ill-formed
    bytes[at + 3] = 0x28;
    raw.write(bytes);
    expect(await raw.waitClosed()).toBe(true);
    expect(raw.packets).toEqual([]);
    expectEvent(
      await waitEvent(events, 'malformedUserName', undefined, from),
      { type: 'malformedUserName', group: 'connectionRefused', tenantId: undefined, clientId: undefined, userId: undefined },
      { remoteAddress: LOCAL, reasonCode: 0x81, reason: 'user name is ill-formed UTF-8' },
      since,
    );
    expect(find(events, 'badPacket', undefined, from)).toEqual([]);
  });

  it('reports pubAcked / pubReceived for each PUBACK / PUBREC sent, and pubDiscarded for a message nobody subscribed to', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-pub');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId, username: 'ev/pub' });
    const who = { tenantId: 'ev', clientId, userId: 'pub' };
    const topic = uniqueName('ev/none');
    await publish(client, topic, 'q0x', { qos: 0 });
    await publish(client, topic, 'q1', { qos: 1 });
    await publish(client, topic, 'q2', { qos: 2 });
    expectEvent(
      await waitEvent(events, 'pubAcked', clientId),
      { type: 'pubAcked', group: 'inboundPublish', ...who },
      { topic, packetId: expect.any(Number), reasonCode: 0x10 },
      since,
    );
    expectEvent(
      await waitEvent(events, 'pubReceived', clientId),
      { type: 'pubReceived', group: 'inboundPublish', ...who },
      { topic, packetId: expect.any(Number), reasonCode: 0x10 },
      since,
    );
    const discarded = find(events, 'pubDiscarded', clientId);
    expect(discarded.map((e) => e.detail.qos)).toEqual([0, 1, 2]);
    expectEvent(
      discarded[0]!,
      { type: 'pubDiscarded', group: 'inboundPublish', ...who },
      { topic, qos: 0, size: 3, reason: 'noSubscribers' },
      since,
    );

    // With a subscriber: acknowledged with 0 (v5) and not discarded.
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('ev-sub'), username: 'ev/sub' });
    const from = events.length;
    await publish(client, topic, 'q1', { qos: 1 });
    await sub.messages.waitFor(1);
    expect((await waitEvent(events, 'pubAcked', clientId, from)).detail).toEqual({ topic, packetId: expect.any(Number), reasonCode: 0 });
    expect(find(events, 'pubDiscarded', clientId, from)).toEqual([]);
  });

  it.each([
    ['dbg', true],
    ['ev', false],
  ] as const)('tenant %s (DebugModeEnabled %s): qos0/1/2Pushed and qos1/2Confirmed only with DebugModeEnabled', async (tenantId, debug) => {
    const since = Date.now();
    const from = events.length;
    const subId = uniqueName(`${tenantId}-sub`);
    const root = uniqueName(`${tenantId}/push`);
    const sub = await clients.subscriber(`${root}/#`, { qos: 2 }, { protocolVersion: 5, clientId: subId, username: `${tenantId}/s` });
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName(`${tenantId}-pub`), username: `${tenantId}/p` });
    for (const qos of [0, 1, 2] as const) await publish(pub, `${root}/${qos}`, 'push', { qos });
    await sub.messages.waitFor(3);
    const types = ['qos0Pushed', 'qos1Pushed', 'qos2Pushed', 'qos1Confirmed', 'qos2Confirmed'] as const;
    if (!debug) {
      await sleep(QUIET_MS);
      for (const type of types) expect(find(events, type, subId, from)).toEqual([]);
      return;
    }
    const who = { tenantId, clientId: subId, userId: 's' };
    for (const qos of [0, 1, 2] as const) {
      const type = types[qos];
      expectEvent(
        await waitEvent(events, type, subId, from),
        { type, group: 'outboundPush', ...who },
        { topic: `${root}/${qos}`, size: 4, packetId: qos === 0 ? undefined : expect.any(Number), dup: false, retain: false },
        since,
      );
    }
    expectEvent(
      await waitEvent(events, 'qos1Confirmed', subId, from),
      { type: 'qos1Confirmed', group: 'outboundPush', ...who },
      { topic: `${root}/1` },
      since,
    );
    // A QoS 2 message is released at PUBREC: its confirmation carries no topic.
    expectEvent(await waitEvent(events, 'qos2Confirmed', subId, from), { type: 'qos2Confirmed', group: 'outboundPush', ...who }, {}, since);
  });

  it('reports subAcked, unsubAcked and the retained events', async () => {
    const since = Date.now();
    const root = uniqueName('ev/ret');
    const pubId = uniqueName('ev-rpub');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: pubId, username: 'ev/rp' });
    await publish(pub, `${root}/a`, 'r1', { qos: 1, retain: true });
    expectEvent(
      await waitEvent(events, 'msgRetained', pubId),
      { type: 'msgRetained', group: 'retained', tenantId: 'ev', clientId: pubId, userId: 'rp' },
      { topic: `${root}/a`, size: 2 },
      since,
    );
    const subId = uniqueName('ev-rsub');
    const { client: sub } = await clients.mqtt({ protocolVersion: 5, clientId: subId, username: 'ev/rs' });
    const who = { tenantId: 'ev', clientId: subId, userId: 'rs' };
    await subscribe(sub, { [`${root}/#`]: { qos: 1 }, [`${root}/x`]: { qos: 0 } });
    expectEvent(
      await waitEvent(events, 'subAcked', subId),
      { type: 'subAcked', group: 'subscription', ...who },
      { filters: `${root}/#,${root}/x` },
      since,
    );
    expectEvent(
      await waitEvent(events, 'retainMsgMatched', subId),
      { type: 'retainMsgMatched', group: 'retained', ...who },
      { filter: `${root}/#`, count: 1 },
      since,
    );
    await unsubscribe(sub, [`${root}/#`, `${root}/x`]);
    expectEvent(
      await waitEvent(events, 'unsubAcked', subId),
      { type: 'unsubAcked', group: 'subscription', ...who },
      { filters: `${root}/#,${root}/x` },
      since,
    );
    await publish(pub, `${root}/a`, '', { qos: 1, retain: true });
    expectEvent(
      await waitEvent(events, 'retainMsgCleared', pubId),
      { type: 'retainMsgCleared', group: 'retained', tenantId: 'ev', clientId: pubId, userId: 'rp' },
      { topic: `${root}/a`, size: 0 },
      since,
    );
  });

  it('reports pubActionDisallow, subActionDisallow and unsubActionDisallow for denied actions', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-acl');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId, username: 'ev/acl' });
    const who = { tenantId: 'ev', clientId, userId: 'acl' };
    expect(await publishOutcome(client, 'forbidden/p', 'x', 1)).toBeInstanceOf(Error); // PUBACK 0x87
    expectEvent(
      await waitEvent(events, 'pubActionDisallow', clientId),
      { type: 'pubActionDisallow', group: 'accessControl', ...who },
      { topic: 'forbidden/p', qos: 1 },
      since,
    );
    expect((await waitEvent(events, 'pubAcked', clientId)).detail).toEqual({
      topic: 'forbidden/p',
      packetId: expect.any(Number),
      reasonCode: 0x87,
    });
    await new Promise((resolve) => client.subscribe('forbidden/s', { qos: 0 }, resolve));
    expectEvent(
      await waitEvent(events, 'subActionDisallow', clientId),
      { type: 'subActionDisallow', group: 'accessControl', ...who },
      { filter: 'forbidden/s' },
      since,
    );
    await unsubscribe(client, 'forbidden/s');
    expectEvent(
      await waitEvent(events, 'unsubActionDisallow', clientId),
      { type: 'unsubActionDisallow', group: 'accessControl', ...who },
      { filter: 'forbidden/s' },
      since,
    );
  });

  it.each([
    ['ev', true],
    ['strict', false],
  ] as const)(
    'tenant %s: an ACL plugin that cannot decide is reported as accessControlError, ByPassPermCheckError grants: %s',
    async (tenantId, granted) => {
      const since = Date.now();
      const clientId = uniqueName(`${tenantId}-aclerr`);
      const { client } = await clients.mqtt({ protocolVersion: 5, clientId, username: `${tenantId}/u` });
      const outcome = await publishOutcome(client, 'defer/x', 'x', 1); // valid-acl defers, acl-errors answers "error"
      expect(outcome === undefined).toBe(granted);
      expectEvent(
        await waitEvent(events, 'accessControlError', clientId),
        { type: 'accessControlError', group: 'accessControl', tenantId, clientId, userId: 'u' },
        { plugin: '@fixtures/acl-errors', action: 'publish', topic: 'defer/x', reason: 'answeredError', granted },
        since,
      );
      expect(find(events, 'pubActionDisallow', clientId).length).toBe(granted ? 0 : 1);
    },
  );

  it('reports kicked once for the connection a session takeover closes', async () => {
    const since = Date.now();
    const clientId = uniqueName('ev-kick');
    await clients.mqtt({ protocolVersion: 5, clientId, username: 'ev/k1' });
    await clients.mqtt({ protocolVersion: 5, clientId, username: 'ev/k2' });
    expectEvent(
      await waitEvent(events, 'kicked', clientId),
      { type: 'kicked', group: 'clientDisconnected', tenantId: 'ev', clientId, userId: 'k1' },
      { remoteAddress: LOCAL, reason: 'session taken over' },
      since,
    );
    await sleep(QUIET_MS);
    expect(disconnects(events, clientId)).toEqual(['kicked']);
  });

  it('reports resourceExhausted when a tenant quota refuses a connection', async () => {
    const since = Date.now();
    await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('full-1'), username: 'full/a' });
    const second = uniqueName('full-2');
    const refused = await clients.tryMqtt({ protocolVersion: 5, clientId: second, username: 'full/b' });
    expect(refused.connack).toBeUndefined();
    expectEvent(
      await waitEvent(events, 'resourceExhausted', second),
      { type: 'resourceExhausted', group: 'tenant', tenantId: 'full', clientId: second, userId: 'b' },
      { resource: 'TotalConnections' },
      since,
    );
  });

  it('reports pubDropped when MaxGroupFanout leaves shared groups out', async () => {
    const since = Date.now();
    const topic = uniqueName('fan/t');
    await clients.subscriber(`$share/g1/${topic}`, { qos: 0 }, { protocolVersion: 5, clientId: uniqueName('fan-g1'), username: 'fan/a' });
    await clients.subscriber(`$share/g2/${topic}`, { qos: 0 }, { protocolVersion: 5, clientId: uniqueName('fan-g2'), username: 'fan/b' });
    const pubId = uniqueName('fan-pub');
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: pubId, username: 'fan/p' });
    await publish(client, topic, 'x', { qos: 1 });
    const e = await waitEvent(events, 'pubDropped', pubId);
    // The message names its publisher's client id; the user is not known on the distribution path.
    expectEvent(
      e,
      { type: 'pubDropped', group: 'inboundPublish', tenantId: 'fan', clientId: pubId, userId: undefined },
      { topic, qos: 1, reason: 'MaxGroupFanout' },
      since,
    );
  });

  it('reports distError when a PUBLISH cannot be stored for an offline persistent subscriber (the publisher gets 0x80)', async () => {
    const since = Date.now();
    const topic = uniqueName('sick/t');
    const { client: sub } = await clients.mqtt({
      protocolVersion: 5,
      clientId: uniqueName('sick-sub'),
      username: 'sick/s',
      clean: false,
      properties: { sessionExpiryInterval: 60 },
    });
    await subscribe(sub, topic, { qos: 1 });
    await sub.endAsync();
    const pubId = uniqueName('sick-pub');
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: pubId, username: 'sick/p' });
    expect(await publishOutcome(pub, topic, 'x', 1)).toBeInstanceOf(Error);
    expectEvent(
      await waitEvent(events, 'distError', pubId),
      { type: 'distError', group: 'inboundPublish', tenantId: 'sick', clientId: pubId, userId: 'p' },
      { what: 'publish', topic, qos: 1, error: 'inbox store unavailable' },
      since,
    );
    expect((await waitEvent(events, 'pubAcked', pubId)).detail).toEqual({ topic, packetId: expect.any(Number), reasonCode: 0x80 });
  });
});

describe('19 events: closes by the broker', () => {
  const clients = withClients(() => 0);

  it('reports byServer (0x8B) for every connected client when the broker stops, not channelError', async () => {
    const events = sink('stop');
    events.length = 0;
    const tb = await startTestBroker('plugins:\n  events: [{ use: "@fixtures/recording-events", options: { sink: stop } }]');
    let stopped = false;
    try {
      const since = Date.now();
      const v5 = uniqueName('stop-v5');
      const v4 = uniqueName('stop-v4');
      const { client: c5 } = await connectAsync(tb.port, { protocolVersion: 5, clientId: v5 });
      clients.track(c5);
      clients.track(await rawConnect(tb.port, { clientId: v4 }));
      const gotDisconnect = new Promise<number | undefined>((resolve) => c5.once('disconnect', (p) => resolve(p.reasonCode)));
      await tb.stop();
      stopped = true;
      expect(await gotDisconnect).toBe(0x8b);
      for (const clientId of [v5, v4]) {
        expectEvent(
          await waitEvent(events, 'byServer', clientId),
          { type: 'byServer', group: 'clientDisconnected', tenantId: 'default', clientId },
          { remoteAddress: LOCAL, reasonCode: 0x8b },
          since,
        );
        expect(disconnects(events, clientId)).toEqual(['byServer']);
      }
    } finally {
      if (!stopped) await tb.stop();
    }
  });

  it.each([
    ['transient', true],
    ['persistent', false],
  ] as const)(
    'reports serverBusy for a %s subscriber that stays over the write high-water mark for slowConsumerTimeoutMs',
    async (_kind, clean) => {
      const events = sink('busy');
      events.length = 0;
      const tb = await startTestBroker(
        [
          'mqtt: { writeHighWaterBytes: 16384, slowConsumerTimeoutMs: 1000 }',
          'plugins:',
          '  events: [{ use: "@fixtures/recording-events", options: { sink: busy } }]',
        ].join('\n'),
      );
      try {
        const since = Date.now();
        const subId = uniqueName('busy-sub');
        // A full socket is checked at every delivery attempt, queued or not.
        const sub = clients.track(await rawConnect(tb.port, { clientId: subId, clean }));
        sub.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'busy/t', qos: 0 }] });
        await expectPacket(sub.raw, 'suback');
        sub.raw.socket.pause(); // never reads again
        const { client: pub } = await connectAsync(tb.port, { protocolVersion: 4, clientId: uniqueName('busy-pub') });
        clients.track(pub);
        const payload = Buffer.alloc(256 * 1024, 0x61);
        const deadline = Date.now() + 15_000;
        while (find(events, 'serverBusy', subId).length === 0 && Date.now() < deadline) {
          pub.publish('busy/t', payload, { qos: 0 });
          await sleep(10);
        }
        expect(find(events, 'subscriberStalled', subId).length).toBeGreaterThanOrEqual(1);
        const e = await waitEvent(events, 'serverBusy', subId, 0, 1);
        expectEvent(
          e,
          { type: 'serverBusy', group: 'clientDisconnected', tenantId: 'default', clientId: subId },
          { remoteAddress: LOCAL, reason: 'slow consumer', buffered: expect.any(Number), stalledMs: expect.any(Number) },
          since,
        );
        expect(e.detail.buffered).toBeGreaterThanOrEqual(16384);
        expect(e.detail.stalledMs).toBeGreaterThan(1000);
        await sleep(QUIET_MS);
        expect(disconnects(events, subId)).toEqual(['serverBusy']);
      } finally {
        await tb.stop();
      }
    },
  );
});

describe('19 events: only what a collector wants', () => {
  const clients = withClients(() => tb.port);
  let tb: TestBroker;
  const events = sink('only-connected');

  beforeAll(async () => {
    events.length = 0;
    tb = await startTestBroker(
      [
        'plugins:',
        '  settings: { use: "@fixtures/valid-settings", options: { values: { dbg: { DebugModeEnabled: true } } } }',
        '  events: [{ use: "@fixtures/recording-events", options: { sink: only-connected, eventTypes: [clientConnected] } }]',
      ].join('\n'),
    );
  });
  afterAll(() => tb.stop());

  it('a collector that asks for clientConnected gets nothing else, whatever happens', async () => {
    const root = uniqueName('dbg/only');
    const sub = await clients.subscriber(
      `${root}/#`,
      { qos: 2 },
      { protocolVersion: 5, clientId: uniqueName('only-sub'), username: 'dbg/s' },
    );
    const { client: pub } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('only-pub'), username: 'dbg/p' });
    for (const qos of [0, 1, 2] as const) await publish(pub, `${root}/${qos}`, 'x', { qos, retain: qos === 1 });
    await publish(pub, uniqueName('dbg/nobody'), 'x', { qos: 1 });
    await sub.messages.waitFor(3);
    await unsubscribe(sub.client, `${root}/#`);
    await pub.endAsync();
    const bad = await clients.raw({ protocolVersion: 5, clientId: uniqueName('only-bad'), username: 'dbg/b' });
    bad.raw.write([0x36, 0x05, 0x00, 0x01, 0x61, 0x00, 0x01]);
    await bad.raw.waitClosed();
    await sleep(QUIET_MS);
    expect(events.map((e) => e.type)).toEqual(['clientConnected', 'clientConnected', 'clientConnected']);
  });
});
