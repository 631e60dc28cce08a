import { readFileSync } from 'node:fs';
import { SETTINGS } from '@bifro/spi';
import type { MqttClient } from 'mqtt';
import { API_TOKENS, startApiBroker, type ApiBroker } from '../support/api-broker';
import { publish, QUIET_MS, sleep, uniqueName, waitUntil, withClients, WAIT_MS } from '../support/mqtt-helpers';

/**
 * Area 39, the admin API's publish, retained messages and tenant settings (docs/api.md): every
 * route by inject (valid, 400, 401, 403, paging), then real HTTP and MQTT round trips: a publish
 * over HTTP reaches MQTT subscribers at QoS 0/1/2 with its v5 properties and retain flag, never
 * another tenant; retained set/clear/expire are seen by new subscribers; a settings change over
 * HTTP reaches the tenant's next CONNACK within 2 s (settings-file writes its YAML file) and an
 * invalid one is refused with nothing written; a broker without a writable provider answers 409.
 */

const SETTINGS_FILE = `# Bifro tenant settings (e2e 39)
defaults:
  MaxTopicLevels: 64 # every tenant
tenants:
  t1:
    MaxTopicLevels: 16 # t1 is small
  small:
    MaxUserPayloadBytes: 10
`;

interface MessageView {
  topic: string;
  payload?: string;
  payloadBase64: string;
  qos: number;
  publishedAt: string;
  expiresAt?: string;
  properties?: Record<string, unknown>;
}
interface RetainedPage {
  items: MessageView[];
  nextCursor?: string;
}
interface SettingView {
  value: boolean | number;
  default: boolean | number;
  source: 'default' | 'provider';
  applies: 'connect' | 'live';
  min?: number;
  max?: number;
}
interface SettingsView {
  tenant: string;
  provider: string;
  writable: boolean;
  settings: Record<string, SettingView>;
}

let b: ApiBroker;
beforeAll(async () => {
  b = await startApiBroker('', { settings: SETTINGS_FILE });
});
afterAll(() => b.stop());

/** An inject with a JSON body, as the admin token unless told. */
async function call(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown, token?: string | null) {
  const res = await b.inject({ method, url, ...(payload !== undefined ? { payload: payload as object } : {}), token });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> & { code?: string; message?: string } };
}

/** Every page of a retained list, following nextCursor (bounded). */
async function allPages(url: string, limit: number): Promise<{ pages: RetainedPage[]; topics: string[] }> {
  const pages: RetainedPage[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 50; i++) {
    const sep = url.includes('?') ? '&' : '?';
    const res = await call('GET', `${url}${sep}limit=${limit}${cursor === undefined ? '' : `&cursor=${cursor}`}`);
    expect(res.status).toBe(200);
    const page = res.body as unknown as RetainedPage;
    pages.push(page);
    if (page.nextCursor === undefined) break;
    cursor = page.nextCursor;
  }
  return { pages, topics: pages.flatMap((p) => p.items.map((m) => m.topic)) };
}

describe('39 publish: routes by inject', () => {
  const url = '/api/v1/tenants/t1/publish';

  it('publishes (QoS 0, no subscriber) and answers the deliveries; a tenant token may publish to its tenant', async () => {
    expect(await call('POST', url, { topic: 'inject/none', payload: 'x' })).toEqual({ status: 200, body: { deliveries: 0 } });
    const scoped = await call('POST', url, { topic: 'inject/none', payloadBase64: 'AAEC', qos: 1 }, API_TOKENS.t1);
    expect(scoped).toEqual({ status: 200, body: { deliveries: 0 } });
  });

  it.each([
    ['both payload and payloadBase64', { topic: 'a', payload: 'x', payloadBase64: 'eA==' }, 'exactly one of payload'],
    ['no payload', { topic: 'a' }, 'exactly one of payload'],
    ['a wildcard topic', { topic: 'a/+/b', payload: 'x' }, 'wildcard'],
    ['a # topic', { topic: 'a/#', payload: 'x' }, 'wildcard'],
    ['an empty topic', { topic: '', payload: 'x' }, 'topic'],
    ['a $SYS topic', { topic: '$SYS/broker/uptime', payload: 'x' }, 'reserved'],
    ['a $share topic', { topic: '$share/g/a', payload: 'x' }, 'reserved'],
    ['more levels than the tenant allows (MaxTopicLevels 16)', { topic: 'a/'.repeat(16) + 'a', payload: 'x' }, 'MaxTopicLevels'],
    ['bad base64', { topic: 'a', payloadBase64: 'not base64!' }, 'base64'],
    ['QoS 3', { topic: 'a', payload: 'x', qos: 3 }, 'qos'],
    ['an unknown field', { topic: 'a', payload: 'x', dup: true }, 'additional'],
    ['an unknown property', { topic: 'a', payload: 'x', properties: { topicAlias: 3 } }, 'additional'],
    ['a wildcard response topic', { topic: 'a', payload: 'x', properties: { responseTopic: 'r/#' } }, 'responseTopic'],
    ['U+0000 in a content type', { topic: 'a', payload: 'x', properties: { contentType: 'a\u0000b' } }, 'U+0000'],
    ['a negative expiry', { topic: 'a', payload: 'x', properties: { messageExpiryInterval: -1 } }, 'messageExpiryInterval'],
    [
      'payloadFormatIndicator with a payload that is not UTF-8',
      { topic: 'a', payloadBase64: '/w==', properties: { payloadFormatIndicator: true } },
      'not UTF-8',
    ],
  ])('400 for %s', async (_what, payload, fragment) => {
    const res = await call('POST', url, payload);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('BIFRO_API_INVALID_REQUEST');
    expect(res.body.message).toContain(fragment);
  });

  it("400 naming MaxUserPayloadBytes for a payload above the tenant's limit", async () => {
    const res = await call('POST', '/api/v1/tenants/small/publish', { topic: 'a', payload: 'eleven char' });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('MaxUserPayloadBytes 10');
    expect((await call('POST', '/api/v1/tenants/small/publish', { topic: 'a', payload: 'ten chars!' })).status).toBe(200);
  });

  it('401 without a token or with a wrong one, 403 with another tenant token', async () => {
    const none = await call('POST', url, { topic: 'a', payload: 'x' }, null);
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('BIFRO_API_UNAUTHORIZED');
    expect((await call('POST', url, { topic: 'a', payload: 'x' }, 'wrong-token')).status).toBe(401);
    const other = await call('POST', url, { topic: 'a', payload: 'x' }, API_TOKENS.t2);
    expect(other.status).toBe(403);
    expect(other.body.code).toBe('BIFRO_API_FORBIDDEN');
  });
});

describe('39 publish: HTTP → MQTT round trips', () => {
  const clients = withClients(() => b.port);

  it('a publish over HTTP reaches an MQTT subscriber at QoS 1 with its v5 properties, answered with the deliveries', async () => {
    const topic = `${uniqueName('rt')}/q1`;
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('s'), username: 't1/alice' });
    const before = b.broker.tenantMetrics('t1').messagesIn;
    const res = await b.http('POST', '/api/v1/tenants/t1/publish', {
      body: {
        topic,
        payload: '{"temp":21}',
        qos: 1,
        properties: {
          contentType: 'application/json',
          responseTopic: 'replies/alice',
          correlationData: Buffer.from([1, 2, 3, 254]).toString('base64'),
          userProperties: { site: 'north', tag: ['a', 'b'] },
          messageExpiryInterval: 3600,
          payloadFormatIndicator: true,
        },
      },
    });
    expect(res).toMatchObject({ status: 200, body: { deliveries: 1 } });
    const [m] = await sub.messages.waitFor(1);
    expect(m).toBeDefined();
    expect(m!.payload.toString()).toBe('{"temp":21}');
    expect(m!.packet.qos).toBe(1);
    expect(m!.packet.retain).toBe(false);
    const p = m!.packet.properties!;
    expect(p.contentType).toBe('application/json');
    expect(p.responseTopic).toBe('replies/alice');
    expect(Buffer.from(p.correlationData!)).toEqual(Buffer.from([1, 2, 3, 254]));
    expect(p.userProperties).toEqual({ site: 'north', tag: ['a', 'b'] });
    expect(p.messageExpiryInterval).toBeGreaterThan(3590);
    expect(p.messageExpiryInterval).toBeLessThanOrEqual(3600);
    expect(p.payloadFormatIndicator).toBe(true);
    // Counted like an MQTT PUBLISH.
    expect(b.broker.tenantMetrics('t1').messagesIn).toBe(before + 1);
  });

  it('QoS 0 and QoS 2 arrive at their QoS, binary payloads intact; an MQTT 3.1.1 subscriber gets them too', async () => {
    const topic = `${uniqueName('rt')}/q`;
    const v5 = await clients.subscriber(topic, { qos: 2 }, { protocolVersion: 5, clientId: uniqueName('s5'), username: 't1/u' });
    const v4 = await clients.subscriber(topic, { qos: 2 }, { protocolVersion: 4, clientId: uniqueName('s4'), username: 't1/u' });
    const q0 = await b.http('POST', '/api/v1/tenants/t1/publish', { body: { topic, payload: 'zero', qos: 0 } });
    expect(q0).toMatchObject({ status: 200, body: { deliveries: 2 } });
    const q2 = await b.http('POST', '/api/v1/tenants/t1/publish', { body: { topic, payloadBase64: 'AP8Q', qos: 2 } });
    expect(q2).toMatchObject({ status: 200, body: { deliveries: 2 } });
    for (const sub of [v5, v4]) {
      const got = await sub.messages.waitFor(2);
      expect(got.map((m) => [m.packet.qos, m.payload.toString('hex')])).toEqual([
        [0, Buffer.from('zero').toString('hex')],
        [2, '00ff10'],
      ]);
    }
  });

  it('QoS 1 waits for the inbox of an offline persistent session: the message is there when it comes back', async () => {
    const topic = `${uniqueName('rt')}/offline`;
    const clientId = uniqueName('persistent');
    const opts = { protocolVersion: 5 as const, clientId, username: 't1/bob', clean: false, properties: { sessionExpiryInterval: 600 } };
    const first = await clients.subscriber(topic, { qos: 1 }, opts);
    first.client.end();
    await waitUntil(() => !first.client.connected);
    await sleep(100);
    const res = await b.http('POST', '/api/v1/tenants/t1/publish', { body: { topic, payload: 'kept', qos: 1 } });
    expect(res).toMatchObject({ status: 200, body: { deliveries: 1 } });
    const again = await clients.mqttCollecting(opts);
    const got = await again.messages.waitFor(1);
    expect(got.map((m) => m.payload.toString())).toEqual(['kept']);
  });

  it('retain: a later subscriber gets the retained message with RETAIN set; an empty retained payload clears it', async () => {
    const topic = `${uniqueName('rt')}/retained`;
    const res = await b.http('POST', '/api/v1/tenants/t1/publish', { body: { topic, payload: 'last value', qos: 1, retain: true } });
    expect(res).toMatchObject({ status: 200, body: { deliveries: 0 } });
    const late = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('late'), username: 't1/u' });
    const [m] = await late.messages.waitFor(1);
    expect(m?.payload.toString()).toBe('last value');
    expect(m?.packet.retain).toBe(true);
    expect((await call('GET', `/api/v1/tenants/t1/retained/${encodeURIComponent(topic)}`)).body.payload).toBe('last value');

    await b.http('POST', '/api/v1/tenants/t1/publish', { body: { topic, payload: '', qos: 1, retain: true } });
    expect((await call('GET', `/api/v1/tenants/t1/retained/${encodeURIComponent(topic)}`)).status).toBe(404);
  });

  it("a publish to tenant t1 never reaches t2's subscribers on the same topic", async () => {
    const topic = `${uniqueName('iso')}/same`;
    const t1 = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('a'), username: 't1/u' });
    const t2 = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('b'), username: 't2/u' });
    const t2wild = await clients.subscriber('#', { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('w'), username: 't2/u' });
    const res = await b.http('POST', '/api/v1/tenants/t1/publish', { body: { topic, payload: 'for t1', qos: 1, retain: true } });
    expect(res).toMatchObject({ status: 200, body: { deliveries: 1 } });
    expect((await t1.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['for t1']);
    expect(await t2.messages.settle(QUIET_MS)).toEqual([]);
    expect(t2wild.messages.messages.filter((m) => m.topic === topic)).toEqual([]);
    // Nor its retained store.
    expect((await call('GET', `/api/v1/tenants/t2/retained/${encodeURIComponent(topic)}`)).status).toBe(404);
    await call('DELETE', `/api/v1/tenants/t1/retained/${encodeURIComponent(topic)}`);
  });
});

describe('39 retained: routes by inject', () => {
  const base = '/api/v1/tenants/t1/retained';

  it('PUT sets (topic URL-encoded or with plain slashes), GET reads, DELETE clears, then 404', async () => {
    const topic = `${uniqueName('ret')}/a/b`;
    const enc = encodeURIComponent(topic);
    const put = await call('PUT', `${base}/${enc}`, {
      payload: 'hello',
      qos: 1,
      properties: { contentType: 'text/plain', userProperties: { k: 'v' } },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      topic,
      payload: 'hello',
      payloadBase64: Buffer.from('hello').toString('base64'),
      qos: 1,
      properties: { contentType: 'text/plain', userProperties: { k: 'v' } },
    });
    const got = await call('GET', `${base}/${enc}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ topic, payload: 'hello', qos: 1 });
    expect(Date.parse(got.body.publishedAt as string)).toBeGreaterThan(0);
    expect((await call('GET', `${base}/${topic}`)).body).toMatchObject({ topic, payload: 'hello' });
    expect((await call('GET', `${base}/${enc}`, undefined, API_TOKENS.t1)).status).toBe(200);

    expect(await call('DELETE', `${base}/${enc}`)).toEqual({ status: 200, body: { topic, cleared: true } });
    const gone = await call('GET', `${base}/${enc}`);
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('BIFRO_API_NOT_FOUND');
    expect((await call('DELETE', `${base}/${enc}`)).status).toBe(404);
  });

  it('a binary payload is answered as base64 only; a $ topic (not $SYS) can be retained', async () => {
    const topic = `$app/${uniqueName('bin')}`;
    const enc = encodeURIComponent(topic);
    expect((await call('PUT', `${base}/${enc}`, { payloadBase64: '/wAB' })).status).toBe(200);
    const got = await call('GET', `${base}/${enc}`);
    expect(got.body.payload).toBeUndefined();
    expect(got.body.payloadBase64).toBe('/wAB');
    await call('DELETE', `${base}/${enc}`);
  });

  it.each([
    ['PUT with an empty payload', 'PUT', 'x', { payload: '' }, 'DELETE'],
    ['PUT without payload', 'PUT', 'x', {}, 'exactly one'],
    ['PUT to a wildcard topic', 'PUT', encodeURIComponent('a/#'), { payload: 'x' }, 'wildcard'],
    ['PUT to $SYS', 'PUT', encodeURIComponent('$SYS/x'), { payload: 'x' }, 'reserved'],
    ['PUT with an unknown field', 'PUT', 'x', { payload: 'x', retain: true }, 'additional'],
    ['GET a wildcard topic', 'GET', encodeURIComponent('a/+'), undefined, 'wildcard'],
    ['DELETE an empty topic', 'DELETE', '', undefined, 'empty'],
  ])('400 for %s', async (_what, method, topic, payload, fragment) => {
    const res = await call(method as 'PUT', `${base}/${topic}`, payload);
    expect(res.status).toBe(400);
    expect(res.body.message).toContain(fragment);
  });

  it.each([
    ['a bad filter', '?filter=a/%23/b', 'filter'],
    ['a shared filter', `?filter=${encodeURIComponent('$share/g/a')}`, 'shared'],
    ['limit 0', '?limit=0', 'limit'],
    ['limit 1001', '?limit=1001', 'limit'],
    ['a cursor this API did not make', '?cursor=***', 'cursor'],
    ['an unknown query field', '?foo=1', 'additional'],
  ])('GET list: 400 for %s', async (_what, query, fragment) => {
    const res = await call('GET', `${base}${query}`);
    expect(res.status).toBe(400);
    expect(res.body.message).toContain(fragment);
  });

  it('expire: 400 without olderThanSeconds or with a negative one', async () => {
    expect((await call('POST', `${base}/expire`, {})).status).toBe(400);
    expect((await call('POST', `${base}/expire`, { olderThanSeconds: -1 })).status).toBe(400);
  });

  it('401 without a token and 403 with another tenant token, on every retained route', async () => {
    const routes: ['GET' | 'PUT' | 'DELETE' | 'POST', string, unknown][] = [
      ['GET', base, undefined],
      ['GET', `${base}/a`, undefined],
      ['PUT', `${base}/a`, { payload: 'x' }],
      ['DELETE', `${base}/a`, undefined],
      ['POST', `${base}/expire`, { olderThanSeconds: 1 }],
    ];
    for (const [method, url, payload] of routes) {
      expect([method, url, (await call(method, url, payload, null)).status]).toEqual([method, url, 401]);
      expect([method, url, (await call(method, url, payload, API_TOKENS.t2)).status]).toEqual([method, url, 403]);
    }
  });

  it('lists by topic in pages with a stable cursor, for # and for a filter', async () => {
    const root = uniqueName('page');
    const topics = ['a', 'b', 'c', 'd', 'e/x'].map((t) => `${root}/${t}`);
    for (const t of [...topics].reverse()) expect((await call('PUT', `${base}/${encodeURIComponent(t)}`, { payload: t })).status).toBe(200);
    await call('PUT', `/api/v1/tenants/t2/retained/${encodeURIComponent(`${root}/t2`)}`, { payload: 'other tenant' });

    const all = await allPages(base, 2);
    expect(all.pages.length).toBeGreaterThan(2);
    expect(all.topics.filter((t) => t.startsWith(`${root}/`))).toEqual(topics);
    expect(all.topics).toEqual([...all.topics].sort());

    const filtered = await allPages(`${base}?filter=${encodeURIComponent(`${root}/+`)}`, 2);
    expect(filtered.pages.map((p) => p.items.length)).toEqual([2, 2]);
    expect(filtered.topics).toEqual(topics.slice(0, 4));
    expect(filtered.pages[0]!.items[0]).toMatchObject({ topic: topics[0], payload: topics[0], qos: 0 });

    // The cursor is a topic: removing the last item of a page does not skip or repeat the next ones.
    const first = (await call('GET', `${base}?filter=${encodeURIComponent(`${root}/#`)}&limit=2`)).body as unknown as RetainedPage;
    expect(first.items.map((m) => m.topic)).toEqual(topics.slice(0, 2));
    await call('DELETE', `${base}/${encodeURIComponent(topics[1]!)}`);
    const next = (await call('GET', `${base}?filter=${encodeURIComponent(`${root}/#`)}&limit=2&cursor=${first.nextCursor}`))
      .body as unknown as RetainedPage;
    expect(next.items.map((m) => m.topic)).toEqual(topics.slice(2, 4));

    for (const t of topics) await call('DELETE', `${base}/${encodeURIComponent(t)}`);
    await call('DELETE', `/api/v1/tenants/t2/retained/${encodeURIComponent(`${root}/t2`)}`);
  });
});

describe('39 retained: round trips with MQTT subscribers', () => {
  const clients = withClients(() => b.port);
  const base = '/api/v1/tenants/t1/retained';

  async function retainedSeen(filter: string): Promise<string[]> {
    const sub = await clients.subscriber(filter, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('r'), username: 't1/u' });
    const got = await sub.messages.settle(QUIET_MS);
    sub.client.end(true);
    return got.filter((m) => m.packet.retain).map((m) => `${m.topic}=${m.payload.toString()}`);
  }

  it('set over HTTP is seen by a new subscriber (retain flag, QoS, properties); cleared is not', async () => {
    const topic = `${uniqueName('seen')}/temp`;
    const put = await b.http('PUT', `${base}/${encodeURIComponent(topic)}`, {
      body: { payload: '21.5', qos: 1, properties: { contentType: 'text/plain' } },
    });
    expect(put.status).toBe(200);
    const sub = await clients.subscriber(topic, { qos: 1 }, { protocolVersion: 5, clientId: uniqueName('r'), username: 't1/u' });
    const [m] = await sub.messages.waitFor(1);
    expect(m?.payload.toString()).toBe('21.5');
    expect(m?.packet.retain).toBe(true);
    expect(m?.packet.qos).toBe(1);
    expect(m?.packet.properties?.contentType).toBe('text/plain');
    // PUT stores without delivering to current subscribers.
    await b.http('PUT', `${base}/${encodeURIComponent(topic)}`, { body: { payload: '22.0' } });
    expect(await sub.messages.settle(QUIET_MS)).toHaveLength(1);
    expect(await retainedSeen(topic)).toEqual([`${topic}=22.0`]);

    expect((await b.http('DELETE', `${base}/${encodeURIComponent(topic)}`)).status).toBe(200);
    expect(await retainedSeen(topic)).toEqual([]);
  });

  it('expire clears what was published longer ago than N seconds and keeps the rest, as new subscribers see', async () => {
    const root = uniqueName('exp');
    clients.cleanup();
    for (const t of ['old1', 'old2']) await call('PUT', `${base}/${encodeURIComponent(`${root}/${t}`)}`, { payload: t });
    await b.clock.advance(120_000);
    await call('PUT', `${base}/${encodeURIComponent(`${root}/new`)}`, { payload: 'new' });

    const res = await b.http('POST', `${base}/expire`, { body: { olderThanSeconds: 60 } });
    expect(res.status).toBe(200);
    const body = res.body as { cleared: number; scanned: number };
    expect(body.cleared).toBeGreaterThanOrEqual(2);
    expect(body.scanned).toBeGreaterThanOrEqual(3);
    expect(await retainedSeen(`${root}/#`)).toEqual([`${root}/new=new`]);
    const listed = await allPages(`${base}?filter=${encodeURIComponent(`${root}/#`)}`, 10);
    expect(listed.topics).toEqual([`${root}/new`]);
    await call('DELETE', `${base}/${encodeURIComponent(`${root}/new`)}`);
  });
});

describe('39 settings: routes by inject', () => {
  const url = '/api/v1/tenants/t1/settings';

  it('GET lists every registry setting with value, default, source and applies', async () => {
    const res = await call('GET', url, undefined, API_TOKENS.t1);
    expect(res.status).toBe(200);
    const view = res.body as unknown as SettingsView;
    expect(view).toMatchObject({ tenant: 't1', provider: '@bifro/plugin-settings-file', writable: true });
    expect(Object.keys(view.settings)).toEqual(Object.keys(SETTINGS));
    expect(view.settings.MaxTopicLevels).toEqual({ value: 16, default: 128, source: 'provider', applies: 'live', min: 1, max: 65535 });
    expect(view.settings.MaximumQoS).toEqual({ value: 2, default: 2, source: 'default', applies: 'connect', min: 0, max: 2 });
    expect(view.settings.RetainEnabled).toEqual({ value: true, default: true, source: 'default', applies: 'connect' });
    // The defaults section of the provider counts as the provider's.
    const other = (await call('GET', '/api/v1/tenants/t9/settings')).body as unknown as SettingsView;
    expect(other.settings.MaxTopicLevels).toMatchObject({ value: 64, source: 'provider' });
  });

  it('GET: 401 without a token, 403 with another tenant token', async () => {
    expect((await call('GET', url, undefined, null)).status).toBe(401);
    expect((await call('GET', url, undefined, API_TOKENS.t2)).status).toBe(403);
  });

  it('PATCH changes values and removes overrides (null), keeping the comments of the file', async () => {
    const res = await call('PATCH', '/api/v1/tenants/patched/settings', { MaxTopicAlias: 9, RetainEnabled: false });
    expect(res.status).toBe(200);
    const view = res.body as unknown as SettingsView;
    expect(view.settings.MaxTopicAlias).toMatchObject({ value: 9, source: 'provider' });
    expect(view.settings.RetainEnabled).toMatchObject({ value: false, source: 'provider' });
    let text = readFileSync(b.settingsFile, 'utf8');
    expect(text).toContain('# Bifro tenant settings (e2e 39)');
    expect(text).toContain('# t1 is small');
    expect(text).toMatch(/patched:\n\s+MaxTopicAlias: 9\n\s+RetainEnabled: false/);
    // The tenant's current settings bound an admin publish and a retained set as they bound a PUBLISH.
    const retained = await call('POST', '/api/v1/tenants/patched/publish', { topic: 'a/b', payload: 'x', retain: true });
    expect(retained.status).toBe(400);
    expect(retained.body.message).toContain('RetainEnabled false');
    expect((await call('PUT', '/api/v1/tenants/patched/retained/a/b', { payload: 'x' })).status).toBe(400);
    expect((await call('POST', '/api/v1/tenants/patched/publish', { topic: 'a/b', payload: 'x' })).status).toBe(200);

    const removed = await call('PATCH', '/api/v1/tenants/patched/settings', { RetainEnabled: null });
    expect((removed.body as unknown as SettingsView).settings.RetainEnabled).toMatchObject({ value: true, source: 'default' });
    text = readFileSync(b.settingsFile, 'utf8');
    expect(text).not.toContain('RetainEnabled');
    expect(text).toContain('# every tenant');
    await call('PATCH', '/api/v1/tenants/patched/settings', { MaxTopicAlias: null });
    expect(readFileSync(b.settingsFile, 'utf8')).not.toContain('patched');
  });

  it('PATCH with invalid values: 400 naming every bad setting in the registry words, and nothing written', async () => {
    const before = readFileSync(b.settingsFile, 'utf8');
    const res = await call('PATCH', url, {
      MaximumQoS: 3,
      RetainEnabled: 'yes',
      MaxTopicLevel: 8,
      maxTopicLevels: 8,
      MaxTopicAlias: '5',
      MaxTopicLength: 1.5,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('BIFRO_API_INVALID_REQUEST');
    const message = res.body.message!;
    expect(message).toContain('invalid MaximumQoS: 3 (above the maximum 2)');
    expect(message).toContain('invalid RetainEnabled: "yes" (expected a boolean)');
    expect(message).toContain('unknown setting MaxTopicLevel;');
    expect(message).toContain('unknown setting maxTopicLevels (did you mean MaxTopicLevels?)');
    expect(message).toContain('invalid MaxTopicAlias: "5" (expected an integer)');
    expect(message).toContain('invalid MaxTopicLength: 1.5 (expected an integer)');
    // The same problems one by one, each with the setting name as the body gives it, in body order.
    expect(res.body.errors).toEqual([
      { field: 'MaximumQoS', message: '3 (above the maximum 2)' },
      { field: 'RetainEnabled', message: '"yes" (expected a boolean)' },
      { field: 'MaxTopicLevel', message: 'unknown setting' },
      { field: 'maxTopicLevels', message: 'unknown setting (did you mean MaxTopicLevels?)' },
      { field: 'MaxTopicAlias', message: '"5" (expected an integer)' },
      { field: 'MaxTopicLength', message: '1.5 (expected an integer)' },
    ]);
    expect(message).toBe(
      'body: invalid MaximumQoS: 3 (above the maximum 2); invalid RetainEnabled: "yes" (expected a boolean); unknown setting MaxTopicLevel; ' +
        'unknown setting maxTopicLevels (did you mean MaxTopicLevels?); invalid MaxTopicAlias: "5" (expected an integer); ' +
        'invalid MaxTopicLength: 1.5 (expected an integer)',
    );
    // Over real HTTP the body is the same (the error schema serialises errors).
    const http = await b.http('PATCH', url, { body: { MaximumQoS: 3, MaxTopicAlias: 5 } });
    expect(http).toMatchObject({
      status: 400,
      body: {
        code: 'BIFRO_API_INVALID_REQUEST',
        message: 'body: invalid MaximumQoS: 3 (above the maximum 2)',
        errors: [{ field: 'MaximumQoS', message: '3 (above the maximum 2)' }],
      },
    });
    expect(readFileSync(b.settingsFile, 'utf8')).toBe(before);
    expect(((await call('GET', url)).body as unknown as SettingsView).settings.MaximumQoS.value).toBe(2);
  });

  it('PATCH: 400 for an empty body, 401 without a token, 403 for another tenant and for a tenant token', async () => {
    const empty = await call('PATCH', url, {});
    expect(empty.status).toBe(400);
    expect(empty.body).not.toHaveProperty('errors'); // the route schema refused it: no field to name
    expect((await call('PATCH', url, { MaxTopicAlias: 5 }, null)).status).toBe(401);
    expect((await call('PATCH', url, { MaxTopicAlias: 5 }, API_TOKENS.t2)).status).toBe(403);
    const own = await call('PATCH', url, { MaxTopicAlias: 5 }, API_TOKENS.t1);
    expect(own.status).toBe(403);
    expect(own.body.message).toContain('admin token');
    expect(readFileSync(b.settingsFile, 'utf8')).not.toContain('MaxTopicAlias: 5');
  });
});

describe('39 settings: hot over HTTP', () => {
  const clients = withClients(() => b.port);

  it("a settings change over HTTP reaches the tenant's next CONNACK within 2 s, and not another tenant's", async () => {
    const before = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('h'), username: 'hot/u' });
    expect(before.connack.properties?.topicAliasMaximum).toBe(64);
    const started = Date.now();
    const res = await b.http('PATCH', '/api/v1/tenants/hot/settings', { body: { MaxTopicAlias: 7, ReceivingMaximum: 50 } });
    expect(res.status).toBe(200);
    let connack = (await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('h'), username: 'hot/u' })).connack;
    while (connack.properties?.topicAliasMaximum !== 7 && Date.now() - started < WAIT_MS) {
      await sleep(50);
      connack = (await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('h'), username: 'hot/u' })).connack;
    }
    expect(Date.now() - started).toBeLessThan(2000);
    expect(connack.properties?.topicAliasMaximum).toBe(7);
    expect(connack.properties?.receiveMaximum).toBe(50);
    const cool = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('c'), username: 'cool/u' });
    expect(cool.connack.properties?.topicAliasMaximum).toBe(64);
  });

  it('a live setting applies to a live connection: MaxTopicLevels lowered over HTTP closes the next deeper PUBLISH', async () => {
    const { client } = await clients.mqtt({ protocolVersion: 5, clientId: uniqueName('live'), username: 'live/u' });
    await publish(client, 'a/b/c/d', 'ok', { qos: 1 });
    expect((await b.http('PATCH', '/api/v1/tenants/live/settings', { body: { MaxTopicLevels: 3 } })).status).toBe(200);
    const outcome = await publishOutcome(client, 'a/b/c/d');
    expect(outcome).toBe('disconnect 144'); // 0x90 Topic Name invalid
  });
});

describe('39 settings: without a writable provider', () => {
  let ro: ApiBroker;
  beforeAll(async () => (ro = await startApiBroker()));
  afterAll(() => ro.stop());

  it('GET answers the registry defaults; PATCH answers 409 naming the provider', async () => {
    const view = (await ro.inject({ method: 'GET', url: '/api/v1/tenants/t1/settings' })).json() as SettingsView;
    expect(view.writable).toBe(false);
    expect(view.settings.MaxTopicLevels).toMatchObject({ value: 128, source: 'default' });
    const res = await ro.inject({ method: 'PATCH', url: '/api/v1/tenants/t1/settings', payload: { MaxTopicAlias: 3 } });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'BIFRO_API_CONFLICT' });
    expect((res.json() as { message: string }).message).toContain(view.provider);
  });
});

/** Publish QoS 1 and report the PUBACK, or the DISCONNECT reason when the broker closed the connection. */
function publishOutcome(client: MqttClient, topic: string): Promise<string> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('no answer'), WAIT_MS);
    client.once('disconnect', (packet) => {
      clearTimeout(timer);
      resolve(`disconnect ${packet.reasonCode ?? 0}`);
    });
    client.publish(topic, 'x', { qos: 1 }, (err) => {
      clearTimeout(timer);
      resolve(err === undefined || err === null ? 'ok' : `error ${err.message}`);
    });
  });
}
