import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validate as validateOpenApi } from '@readme/openapi-parser';
import { RESOURCE_TYPES } from '@bifro/spi';
import { loadConfig } from '../../core/src/runtime/config';
import { startApiBroker, API_TOKENS, type ApiBroker } from '../support/api-broker';
import { REPO } from '../support/test-broker';
import { publish, uniqueName, waitUntil, withClients } from '../support/mqtt-helpers';
import parsePrometheus, { type PromFamily } from 'parse-prometheus-text-format';

/**
 * The admin API's metrics, plugins and tenants (docs/metrics.md, docs/api.md § Metrics, § Plugins,
 * § Tenants) and the per-tenant `$SYS` topics: `/metrics` parsed as Prometheus text, its counters
 * moving with real MQTT traffic, the bounded tenant label set, plugin call metrics after real auth
 * calls, tenant figures with paging and token scoping, and each tenant's `$SYS` subscriber seeing
 * only its own tenant's figures.
 */

interface TenantItem {
  tenant: string;
  connections: number;
  sessions: number;
  persistentSessions: number;
  subscriptions: { transient: number; persistent: number; shared: number; total: number };
  messages: { received: number; sent: number; dropped: number };
  bytes: { received: number; sent: number; dropped: number };
  rates: Record<
    'messagesIn' | 'messagesOut' | 'bytesIn' | 'bytesOut',
    { perSecond: number; load1m: number; load5m: number; load15m: number }
  >;
  retained: { messages: number; bytes: number };
  memory: { sessionQueueBytes: number; inboxBytes: number };
  quota: Record<string, { usage: number; refusals: number; limit?: number }>;
}

async function scrape(b: ApiBroker): Promise<Map<string, PromFamily>> {
  const res = await b.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return new Map(parsePrometheus(res.body).map((f) => [f.name, f]));
}

/** The value of the sample of `name` with `labels` among its labels (with no labels at all when `labels` is empty). */
function sample(families: Map<string, PromFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels);
  const found = families.get(name)?.metrics.find((m) => {
    const have = m.labels ?? {};
    return wanted.length === 0 ? Object.keys(have).length === 0 : wanted.every(([k, v]) => have[k] === v);
  });
  return found?.value === undefined ? undefined : Number(found.value);
}

function tenantLabels(families: Map<string, PromFamily>, name: string): string[] {
  return [...new Set((families.get(name)?.metrics ?? []).map((m) => m.labels?.tenant ?? ''))].sort();
}

describe('metrics configuration', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-metrics-conf-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const load = (yaml: string): Promise<unknown> => {
    const file = path.join(dir, 'bifro.yml');
    writeFileSync(file, yaml);
    return loadConfig({ file, cwd: dir, env: {} });
  };

  it('builds metrics.tenantLabels with defaults for what the file leaves out', async () => {
    expect(((await load('metrics:\n  tenantLabels: { include: [a, b] }\n')) as { metrics: unknown }).metrics).toEqual({
      tenantLabels: { top: 20, include: ['a', 'b'] },
    });
    expect(((await load('nodeId: n\n')) as { metrics?: unknown }).metrics).toBeUndefined();
  });

  it('refuses a bad tenantLabels, saying what was expected', async () => {
    await expect(load('metrics:\n  tenantLabels: { top: -1 }\n')).rejects.toThrow(/metrics\.tenantLabels\.top.*integer 0\.\.10000/s);
    await expect(load('metrics:\n  tenantLabels: { include: [a, a] }\n')).rejects.toThrow(/distinct tenant ids/);
    await expect(load('metrics:\n  labels: 3\n')).rejects.toThrow(/metrics/);
  });
});

describe('GET /metrics', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);

  beforeAll(async () => {
    b = await startApiBroker(
      [
        'metrics:',
        '  tenantLabels: { top: 2, include: [listed] }',
        'plugins:',
        '  throttler: { use: "@fixtures/valid-throttler", options: { exhausted: [full] } }',
      ].join('\n'),
    );
  });
  afterAll(() => b?.stop());

  // First in the file: the process metrics are made at the first scrape, whose event-loop
  // monitor has no sample yet.
  it('gives the event-loop delay without the monitor resolution, and no sentinel before its first sample', async () => {
    const lagFigures = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map((f) => `bifro_nodejs_eventloop_lag_${f}_seconds`);
    const first = await scrape(b);
    for (const [name, family] of first)
      for (const m of family.metrics) {
        // Histogram and summary rows have buckets or quantiles instead.
        if (m.value === undefined) continue;
        const value = Number(m.value);
        // Before: lag_min 9223372036.85 (the histogram's empty minimum) and lag_mean NaN.
        expect({ name, finite: Number.isFinite(value) }).toEqual({ name, finite: true });
        if (name.includes('eventloop')) expect({ name, belowAMinute: value >= 0 && value < 60 }).toEqual({ name, belowAMinute: true });
      }
    // The figures over an interval without a sample are left out, not made up.
    for (const name of lagFigures) expect([name, first.get(name)?.metrics.length ?? 0]).toEqual([name, 0]);
    expect(sample(first, 'bifro_nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);

    await new Promise((resolve) => setTimeout(resolve, 300));
    const next = await scrape(b);
    for (const name of lagFigures) expect([name, sample(next, name) !== undefined]).toEqual([name, true]);
    // Each sample of the monitor is its 10 ms timer plus the delay: read as it was, even the
    // smallest delay of an idle loop was 10 ms. The resolution taken off, it is about 1 ms.
    expect(sample(next, 'bifro_nodejs_eventloop_lag_min_seconds')).toBeLessThan(0.005);
    expect(sample(next, 'bifro_nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(
      sample(next, 'bifro_nodejs_eventloop_lag_p50_seconds')!,
    );
    expect(sample(next, 'bifro_nodejs_eventloop_lag_max_seconds')).toBeGreaterThanOrEqual(
      sample(next, 'bifro_nodejs_eventloop_lag_p99_seconds')!,
    );
  });

  it('parses as Prometheus text with the bifro_ names, process metrics included', async () => {
    const families = await scrape(b);
    for (const name of [
      'bifro_connections',
      'bifro_sessions',
      'bifro_persistent_sessions',
      'bifro_subscriptions',
      'bifro_messages_received_total',
      'bifro_messages_sent_total',
      'bifro_bytes_received_total',
      'bifro_bytes_sent_total',
      'bifro_messages_dropped_total',
      'bifro_retained_messages',
      'bifro_retained_bytes',
      'bifro_session_memory_bytes',
      'bifro_inbox_bytes',
      'bifro_quota_refusals_total',
      'bifro_tenant_connections',
      'bifro_tenant_messages_received_total',
      'bifro_connection_rate_refused_total',
      'bifro_flapping_bans_total',
      'bifro_plugin_calls_total',
      'bifro_plugin_call_duration_seconds',
      'bifro_uptime_seconds',
      'bifro_info',
      'bifro_process_cpu_user_seconds_total',
      'bifro_process_resident_memory_bytes',
      'bifro_nodejs_eventloop_lag_seconds',
      'bifro_nodejs_gc_duration_seconds',
    ])
      expect([name, families.has(name)]).toEqual([name, true]);
    for (const name of families.keys()) expect(name.startsWith('bifro_')).toBe(true);
    expect(families.get('bifro_plugin_call_duration_seconds')!.type).toBe('HISTOGRAM');
    expect(families.get('bifro_messages_received_total')!.type).toBe('COUNTER');
    expect(families.get('bifro_connections')!.type).toBe('GAUGE');
    // Every resource of the throttler has a broker-wide refusal counter.
    expect(
      families
        .get('bifro_quota_refusals_total')!
        .metrics.map((m) => m.labels!.resource)
        .sort(),
    ).toEqual([...RESOURCE_TYPES].sort());
  });

  it('moves its message and byte counters when MQTT messages flow (real HTTP)', async () => {
    const before = await scrape(b);
    const topic = uniqueName('m/flow');
    const { messages } = await clients.subscriber(topic, { qos: 1 }, { username: 'flow/sub' });
    const { client: pub } = await clients.mqtt({ username: 'flow/pub' });
    for (let i = 0; i < 3; i++) await publish(pub, topic, 'hello', { qos: 1 });
    await messages.waitFor(3);
    const res = await b.http('GET', '/metrics');
    expect(res.status).toBe(200);
    const after = new Map(parsePrometheus(res.text).map((f) => [f.name, f]));
    expect(sample(after, 'bifro_messages_received_total')! - sample(before, 'bifro_messages_received_total')!).toBe(3);
    expect(sample(after, 'bifro_messages_sent_total')! - sample(before, 'bifro_messages_sent_total')!).toBe(3);
    expect(sample(after, 'bifro_bytes_received_total')! - sample(before, 'bifro_bytes_received_total')!).toBe(15);
    expect(sample(after, 'bifro_bytes_sent_total')!).toBeGreaterThan(sample(before, 'bifro_bytes_sent_total')!);
    expect(sample(after, 'bifro_connections')).toBe(2);
    expect(sample(after, 'bifro_subscriptions', { kind: 'transient' })).toBe(1);
    // "flow" is the busiest tenant: it has its own label.
    expect(sample(after, 'bifro_tenant_messages_received_total', { tenant: 'flow' })).toBe(3);
    expect(sample(after, 'bifro_tenant_connections', { tenant: 'flow' })).toBe(2);
  });

  it('bounds the tenant label set: the top tenants by connections, the included ones, the rest as _other', async () => {
    const conns: [string, number][] = [
      ['big', 3],
      ['mid', 2],
      ['small1', 1],
      ['small2', 1],
      ['small3', 1],
    ];
    // The previous test's clients are gone (their tenant would otherwise tie with "mid").
    expect(await waitUntil(() => b.broker.tenantMetrics('flow').connections === 0)).toBe(true);
    for (const [tenant, n] of conns) for (let i = 0; i < n; i++) await clients.mqtt({ username: `${tenant}/u${i}` });
    expect(await waitUntil(() => b.broker.tenantMetrics('small3').connections === 1)).toBe(true);
    const families = await scrape(b);
    // top: 2 → big, mid; include → listed (never seen: zeros); everything else summed.
    expect(tenantLabels(families, 'bifro_tenant_connections')).toEqual(['_other', 'big', 'listed', 'mid']);
    expect(sample(families, 'bifro_tenant_connections', { tenant: 'big' })).toBe(3);
    expect(sample(families, 'bifro_tenant_connections', { tenant: 'mid' })).toBe(2);
    expect(sample(families, 'bifro_tenant_connections', { tenant: 'listed' })).toBe(0);
    expect(sample(families, 'bifro_tenant_connections', { tenant: '_other' })).toBe(3);
    const sum = families.get('bifro_tenant_connections')!.metrics.reduce((a, m) => a + Number(m.value), 0);
    expect(sum).toBe(sample(families, 'bifro_connections'));
    // Other tenant-labelled families share the bound.
    expect(tenantLabels(families, 'bifro_tenant_subscriptions')).toEqual(['_other', 'big', 'listed', 'mid']);
  });

  it('counts quota refusals (negative throttler answers)', async () => {
    await clients.mqtt({ username: 'full/one' });
    const refused = await clients.tryMqtt({ username: 'full/two' });
    expect(refused.connack).toBeUndefined();
    const families = await scrape(b);
    expect(sample(families, 'bifro_quota_refusals_total', { resource: 'TotalConnections' })).toBeGreaterThanOrEqual(1);
    const tenant = (await b.inject({ method: 'GET', url: '/api/v1/tenants/full' })).json() as TenantItem;
    expect(tenant.quota.TotalConnections).toEqual({ usage: 1, refusals: 1, limit: 1 });
  });

  it('is in the OpenAPI document with the plugins and tenants routes, and the document validates', async () => {
    const doc = (await b.inject({ method: 'GET', url: '/api/v1/openapi.json', token: null })).json() as {
      paths: Record<string, Record<string, { tags?: string[]; responses: Record<string, { content?: Record<string, unknown> }> }>>;
    };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/metrics', '/api/v1/plugins', '/api/v1/tenants', '/api/v1/tenants/{tenant}']),
    );
    expect(Object.keys(doc.paths['/metrics']!.get!.responses['200']!.content!)).toEqual(['text/plain; version=0.0.4; charset=utf-8']);
    expect(await validateOpenApi(structuredClone(doc) as never)).toMatchObject({ valid: true });
  });

  it('needs an admin token: 401 without one, 403 with a tenant token', async () => {
    const none = await b.inject({ method: 'GET', url: '/metrics', token: null });
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ code: 'BIFRO_API_UNAUTHORIZED' });
    const tenant = await b.inject({ method: 'GET', url: '/metrics', token: API_TOKENS.t1 });
    expect(tenant.statusCode).toBe(403);
    expect(tenant.json()).toMatchObject({ code: 'BIFRO_API_FORBIDDEN' });
  });
});

describe('GET /api/v1/plugins', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);

  beforeAll(async () => {
    b = await startApiBroker('plugins:\n  auth: ["@fixtures/valid-auth"]');
  });
  afterAll(() => b?.stop());

  interface PluginItem {
    name: string;
    version: string;
    kinds: string[];
    spiRange: string;
    source: string;
    health: 'ok' | 'degraded';
    lastFailureAt?: string;
    calls: {
      kind: string;
      count: number;
      failures: number;
      timeouts: number;
      meanMs: number;
      p50Ms: number;
      p90Ms: number;
      p99Ms: number;
    }[];
  }
  const list = async (): Promise<PluginItem[]> => {
    const res = await b.inject({ method: 'GET', url: '/api/v1/plugins' });
    expect(res.statusCode).toBe(200);
    return (res.json() as { items: PluginItem[] }).items;
  };

  it('lists the loaded plugins with call counts and percentiles after real auth calls', async () => {
    for (let i = 0; i < 4; i++) await clients.mqtt({ username: `u${i}`, password: 'secret' });
    const auth = (await list()).find((p) => p.name === '@fixtures/valid-auth')!;
    expect(auth).toMatchObject({ version: '1.0.0', kinds: ['auth'], spiRange: '^1.0.0', source: 'plugins-dir', health: 'ok' });
    expect(auth.lastFailureAt).toBeUndefined();
    const calls = auth.calls.find((c) => c.kind === 'auth')!;
    expect(calls.count).toBe(4);
    expect(calls.failures).toBe(0);
    expect(calls.p50Ms).toBeGreaterThan(0);
    expect(calls.p50Ms).toBeLessThanOrEqual(calls.p90Ms);
    expect(calls.p90Ms).toBeLessThanOrEqual(calls.p99Ms);
    expect(calls.meanMs).toBeGreaterThan(0);
    // The first-party defaults of the other kinds are listed too.
    const all = await list();
    expect(all.some((p) => p.source === 'builtin')).toBe(true);
    expect(all.some((p) => p.kinds.includes('storage'))).toBe(true);

    // The same counts in /metrics, with the latency histogram.
    const families = await scrape(b);
    expect(sample(families, 'bifro_plugin_calls_total', { plugin: '@fixtures/valid-auth', kind: 'auth' })).toBe(4);
    expect(families.get('bifro_plugin_call_duration_seconds')!.type).toBe('HISTOGRAM');
    // The parser folds a histogram's label sets into one (keeping only the buckets): hand it this plugin's series alone.
    const text = (await b.inject({ method: 'GET', url: '/metrics' })).body;
    const own = text
      .split('\n')
      .filter(
        (l) =>
          l.startsWith('# TYPE bifro_plugin_call_duration_seconds ') ||
          (l.startsWith('bifro_plugin_call_duration_seconds_bucket{') && l.includes('plugin="@fixtures/valid-auth"')),
      );
    const [histogram] = parsePrometheus(`${own.join('\n')}\n\n`);
    const buckets = Object.entries(histogram!.metrics[0]!.buckets!)
      .map(([le, n]) => [le === '+Inf' ? Infinity : Number(le), Number(n)] as const)
      .sort((x, y) => x[0] - y[0]);
    expect(buckets).toHaveLength(18);
    expect(buckets[buckets.length - 1]).toEqual([Infinity, 4]);
    // Cumulative, as `le` says.
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]![1]).toBeGreaterThanOrEqual(buckets[i - 1]![1]);
  });

  it('turns degraded when a call fails, and counts the failure', async () => {
    const refused = await clients.tryMqtt({ username: 'boom', password: 'secret' });
    expect(refused.connack).toBeUndefined();
    const auth = (await list()).find((p) => p.name === '@fixtures/valid-auth')!;
    expect(auth.health).toBe('degraded');
    expect(Date.parse(auth.lastFailureAt!)).toBeGreaterThan(Date.now() - 10_000);
    expect(auth.calls[0]!.failures).toBe(1);
    const families = await scrape(b);
    expect(sample(families, 'bifro_plugin_call_failures_total', { plugin: '@fixtures/valid-auth', kind: 'auth' })).toBe(1);
  });

  it('needs an admin token', async () => {
    expect((await b.inject({ method: 'GET', url: '/api/v1/plugins', token: null })).statusCode).toBe(401);
    expect((await b.inject({ method: 'GET', url: '/api/v1/plugins', token: API_TOKENS.t1 })).statusCode).toBe(403);
    const res = await b.http('GET', '/api/v1/plugins');
    expect(res.status).toBe(200);
  });
});

describe('GET /api/v1/tenants', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);

  beforeAll(async () => {
    b = await startApiBroker(
      [
        'plugins:',
        '  throttler:',
        '    use: "@bifro/plugin-throttler-quota"',
        '    options:',
        '      defaults: { TotalConnections: 100, TotalSubscribePerSecond: 50 }',
        '      tenants:',
        '        t1: { TotalConnections: 10, TotalSubscribePerSecond: 0 }',
      ].join('\n'),
      { pluginsDir: path.join(REPO, 'plugins') },
    );
  });
  afterAll(() => b?.stop());

  it("gives a tenant's live figures, rates after a sample", async () => {
    const { messages } = await clients.subscriber('t1/data', { qos: 0 }, { username: 't1/sub' });
    const { client: pub } = await clients.mqtt({ username: 't1/pub' });
    for (let i = 0; i < 5; i++) await publish(pub, 't1/data', 'abcd');
    await messages.waitFor(5);
    await b.clock.advance(5000);
    const res = await b.inject({ method: 'GET', url: '/api/v1/tenants/t1', token: API_TOKENS.t1 });
    expect(res.statusCode).toBe(200);
    const t = res.json() as TenantItem;
    expect(t).toMatchObject({
      tenant: 't1',
      connections: 2,
      sessions: 2,
      persistentSessions: 0,
      subscriptions: { transient: 1, persistent: 0, shared: 0, total: 1 },
      messages: { received: 5, sent: 5, dropped: 0 },
      bytes: { received: 20, dropped: 0 },
      retained: { messages: 0, bytes: 0 },
    });
    expect(t.bytes.sent).toBeGreaterThan(20);
    // A sample ran after the messages (the broker's clock moved 5 s): the load averages moved.
    expect(t.rates.messagesIn.load1m).toBeGreaterThan(0);
    expect(t.rates.messagesOut.load15m).toBeGreaterThan(0);
    expect(t.rates.messagesIn.load1m).toBeGreaterThan(t.rates.messagesIn.load15m);
    expect(Object.keys(t.quota).sort()).toEqual([...RESOURCE_TYPES].sort());
    // The throttler's limits beside the usage: t1's own, the default, none where unlimited (0 or absent).
    expect(t.quota.TotalConnections).toEqual({ usage: 2, refusals: 0, limit: 10 });
    expect(t.quota.TotalSubscribePerSecond).not.toHaveProperty('limit');
    expect(t.quota.TotalRetainTopics).toEqual({ usage: 0, refusals: 0 });
    await clients.mqtt({ username: 'plain/u' });
    const plain = (await b.inject({ method: 'GET', url: '/api/v1/tenants/plain' })).json() as TenantItem;
    expect(plain.quota.TotalConnections).toEqual({ usage: 1, refusals: 0, limit: 100 });
    expect(plain.quota.TotalSubscribePerSecond).toMatchObject({ limit: 50 });
  });

  it('pages every tenant by id with a stable cursor (admin)', async () => {
    for (const tenant of ['pa', 'pb', 'pc', 'pd', 'pe']) await clients.mqtt({ username: `${tenant}/u` });
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const res = await b.inject({ method: 'GET', url: `/api/v1/tenants?limit=2${cursor === undefined ? '' : `&cursor=${cursor}`}` });
      expect(res.statusCode).toBe(200);
      const body = res.json() as { items: TenantItem[]; nextCursor?: string };
      expect(body.items.length).toBeLessThanOrEqual(2);
      seen.push(...body.items.map((t) => t.tenant));
      if (body.nextCursor === undefined) break;
      cursor = body.nextCursor;
    }
    expect(seen).toEqual([...b.broker.tenants()].sort());
    expect(seen).toEqual(expect.arrayContaining(['pa', 'pb', 'pc', 'pd', 'pe', 't1']));
    // Over real HTTP too.
    const res = await b.http('GET', '/api/v1/tenants?limit=1000');
    expect(res.status).toBe(200);
    expect((res.body as { items: TenantItem[] }).items.map((t) => t.tenant)).toEqual(seen);
  });

  it('shows a tenant token only its own tenant', async () => {
    await clients.mqtt({ username: 't2/u' });
    const res = await b.inject({ method: 'GET', url: '/api/v1/tenants', token: API_TOKENS.t2 });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { items: TenantItem[]; nextCursor?: string };
    expect(body.items.map((t) => t.tenant)).toEqual(['t2']);
    expect(body.items[0]!.connections).toBe(1);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1', token: API_TOKENS.t2 })).statusCode).toBe(403);
  });

  it('answers 400, 401 and 404 as documented', async () => {
    const bad = await b.inject({ method: 'GET', url: '/api/v1/tenants?limit=0' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'BIFRO_API_INVALID_REQUEST' });
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants?cursor=not*a*cursor' })).statusCode).toBe(400);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants?color=red' })).statusCode).toBe(400);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants', token: null })).statusCode).toBe(401);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1', token: null })).statusCode).toBe(401);
    const missing = await b.inject({ method: 'GET', url: '/api/v1/tenants/never-seen' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'BIFRO_API_NOT_FOUND' });
  });
});

describe('$SYS topics per tenant', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);

  beforeAll(async () => {
    b = await startApiBroker('sysInterval: 10');
  });
  afterAll(() => b?.stop());

  /** The last payload seen per $SYS topic. */
  const byTopic = (messages: { topic: string; payload: Buffer }[]): Map<string, string> =>
    new Map(messages.map((m) => [m.topic, m.payload.toString()]));

  it("gives each tenant's $SYS subscriber its own tenant's figures only", async () => {
    const a = await clients.subscriber('$SYS/#', { qos: 0 }, { username: 'sysa/watch' });
    const c = await clients.subscriber('$SYS/broker/+/received', { qos: 0 }, { username: 'sysb/watch' });
    // Tenant sysa: 3 more clients and 5 messages; tenant sysb: one publisher, 2 messages.
    const { client: pa } = await clients.mqtt({ username: 'sysa/pub' });
    await clients.mqtt({ username: 'sysa/idle1' });
    await clients.mqtt({ username: 'sysa/idle2' });
    const { client: pb } = await clients.mqtt({ username: 'sysb/pub' });
    for (let i = 0; i < 5; i++) await publish(pa, 'a/x', '1234567');
    for (let i = 0; i < 2; i++) await publish(pb, 'b/x', '12');
    // A client cannot publish its own $SYS figures [reserved topics, docs/security.md].
    await publish(pb, '$SYS/broker/messages/received', '999');
    expect(await waitUntil(() => b.broker.tenantMetrics('sysb').messagesIn >= 2)).toBe(true);
    expect(a.messages.messages).toHaveLength(0);

    await b.clock.advance(10_000);
    await a.messages.waitFor(24);
    await c.messages.waitFor(2);
    const sa = byTopic(a.messages.messages);
    const sb = byTopic(c.messages.messages);
    expect(sa.get('$SYS/broker/messages/received')).toBe('5');
    expect(sa.get('$SYS/broker/bytes/received')).toBe('35');
    expect(sa.get('$SYS/broker/clients/connected')).toBe('4');
    expect(sa.get('$SYS/broker/clients/total')).toBe('4');
    expect(sa.get('$SYS/broker/subscriptions/count')).toBe('1');
    expect(sa.get('$SYS/broker/retained messages/count')).toBe('0');
    expect(sa.get('$SYS/broker/uptime')).toMatch(/^\d+ seconds$/);
    expect(Number(sa.get('$SYS/broker/uptime')!.split(' ')[0])).toBeGreaterThanOrEqual(10);
    expect(sa.get('$SYS/broker/version')).toMatch(/^bifro version \d+\.\d+\.\d+/);
    for (const what of ['messages/received', 'messages/sent', 'bytes/received', 'bytes/sent'])
      for (const w of ['1min', '5min', '15min']) expect(sa.get(`$SYS/broker/load/${what}/${w}`)).toMatch(/^\d+\.\d\d$/);
    // Tenant sysb's subscriber got only what its filter matches, with sysb's figures (the 999 was refused).
    expect([...sb.keys()].sort()).toEqual(['$SYS/broker/bytes/received', '$SYS/broker/messages/received']);
    expect(sb.get('$SYS/broker/messages/received')).toBe('2');
    expect(sb.get('$SYS/broker/bytes/received')).toBe('4');
    // One publication each per interval, not retained.
    expect(a.messages.messages.filter((m) => m.topic === '$SYS/broker/messages/received')).toHaveLength(1);
    expect(a.messages.messages.every((m) => !m.packet.retain)).toBe(true);
  });
});

describe('$SYS topics off', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);

  beforeAll(async () => {
    b = await startApiBroker('sysInterval: 0');
  });
  afterAll(() => b?.stop());

  it('publishes nothing with sysInterval 0', async () => {
    const { messages } = await clients.subscriber('$SYS/#', { qos: 0 }, { username: 'off/watch' });
    await b.clock.advance(30_000);
    expect(await messages.settle(300)).toHaveLength(0);
  });
});
