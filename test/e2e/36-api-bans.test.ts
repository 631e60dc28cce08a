import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IClientOptions, MqttClient } from 'mqtt';
import { API_TOKENS, startApiBroker, type ApiBroker } from '../support/api-broker';
import { tryConnect, uniqueName, waitUntil, withClients, type ProtocolVersion } from '../support/mqtt-helpers';

/**
 * Area 36, bans over the admin API (docs/api.md § Bans): every route by inject (valid, 400, 401,
 * 403, paging), then real HTTP and MQTT round trips: a ban refuses the next CONNECT (v5 0x8A,
 * v3.1.1 0x05) and disconnects a live client; client id, user, tenant and CIDR bans; expiry on the
 * broker's clock; lifting; and a ban that survives a restart with the level storage.
 */

interface BanView {
  kind: string;
  tenant?: string;
  value: string;
  reason?: string;
  createdAt: string;
  until?: string;
  remainingSeconds?: number;
  by?: string;
}
interface BanPage {
  items: BanView[];
  nextCursor?: string;
}

/** What a CONNECT got: 0 when accepted (the client is closed again), the CONNACK code of a refusal, or 'closed'. */
async function connackCode(port: number, opts: IClientOptions & { protocolVersion?: ProtocolVersion }): Promise<number | 'closed'> {
  const r = await tryConnect(port, { protocolVersion: 5, ...opts });
  r.client.end(true);
  if (r.connack !== undefined) return 0;
  return typeof r.error?.code === 'number' ? r.error.code : 'closed';
}

/** Lift every ban through the API, so each test starts from none. */
async function clearBans(b: ApiBroker): Promise<void> {
  const all = (await b.inject({ method: 'GET', url: '/api/v1/bans?limit=1000' })).json() as BanPage;
  for (const ban of all.items) {
    const query = ban.tenant === undefined || ban.kind === 'tenant' ? '' : `?tenant=${encodeURIComponent(ban.tenant)}`;
    const res = await b.inject({ method: 'DELETE', url: `/api/v1/bans/${ban.kind}/${encodeURIComponent(ban.value)}${query}` });
    expect(res.statusCode).toBe(200);
  }
}

describe('36 bans: routes by inject', () => {
  let b: ApiBroker;
  beforeAll(async () => (b = await startApiBroker()));
  afterAll(() => b.stop());
  afterEach(() => clearBans(b));

  it('POST /api/v1/bans sets a ban and answers it with who set it; GET lists it', async () => {
    const res = await b.inject({
      method: 'POST',
      url: '/api/v1/bans',
      payload: { kind: 'clientId', tenant: 't1', value: 'spammer', seconds: 600, reason: 'floods a/b' },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { ban: BanView; kicked: number; durable: boolean };
    expect(body).toMatchObject({ kicked: 0, durable: true });
    expect(body.ban).toMatchObject({
      kind: 'clientId',
      tenant: 't1',
      value: 'spammer',
      reason: 'floods a/b',
      by: 'admin',
      remainingSeconds: 600,
    });
    expect(Date.parse(body.ban.until!) - Date.parse(body.ban.createdAt)).toBe(600_000);

    const list = await b.inject({ method: 'GET', url: '/api/v1/bans' });
    expect(list.statusCode).toBe(200);
    expect((list.json() as BanPage).items).toEqual([body.ban]);
  });

  it('a tenant ban names its tenant as value; an address ban without tenant holds for all; a ban without seconds has no end', async () => {
    const tenant = await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'tenant', value: 't7' } });
    expect(tenant.statusCode).toBe(200);
    expect((tenant.json() as { ban: BanView }).ban).toEqual(expect.objectContaining({ kind: 'tenant', tenant: 't7', value: 't7' }));
    expect((tenant.json() as { ban: BanView }).ban.until).toBeUndefined();
    const all = await b.inject({
      method: 'POST',
      url: '/api/v1/bans',
      payload: { kind: 'address', value: '2001:db8::/32', seconds: 31_536_000 },
    });
    expect(all.statusCode).toBe(200);
    expect((all.json() as { ban: BanView }).ban.tenant).toBeUndefined();
    const mismatch = await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'tenant', tenant: 't1', value: 't7' } });
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json()).toMatchObject({ code: 'BIFRO_API_INVALID_REQUEST', message: expect.stringContaining('body/tenant') });
  });

  it('POST replaces the ban with the same kind, tenant and value', async () => {
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'user', tenant: 't1', value: 'eve', reason: 'first' } });
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'user', tenant: 't1', value: 'eve', seconds: 5 } });
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'user', tenant: 't2', value: 'eve' } });
    const items = ((await b.inject({ method: 'GET', url: '/api/v1/bans' })).json() as BanPage).items;
    expect(items.map((i) => [i.tenant, i.value, i.reason, i.remainingSeconds])).toEqual([
      ['t1', 'eve', undefined, 5],
      ['t2', 'eve', undefined, undefined],
    ]);
  });

  it.each([
    [{ kind: 'clientId', tenant: 't1' }, 'body'],
    [{ kind: 'clientId', tenant: 't1', value: '' }, 'body/value'],
    [{ kind: 'device', tenant: 't1', value: 'x' }, 'body/kind'],
    [{ kind: 'clientId', tenant: 't1', value: 'x', extra: 1 }, 'body'],
    [{ kind: 'clientId', tenant: 't1', value: 'x', seconds: 0 }, 'body/seconds'],
    [{ kind: 'clientId', tenant: 't1', value: 'x', seconds: 31_536_001 }, 'body/seconds must be <= 31536000'],
    [{ kind: 'clientId', tenant: 't1', value: 'x', seconds: 1.5 }, 'body/seconds'],
    [{ kind: 'clientId', tenant: 't1', value: 'x', kick: 'yes' }, 'body/kick'],
    [{ kind: 'clientId', value: 'x' }, 'body/tenant'],
    [{ kind: 'user', tenant: '', value: 'x' }, 'body/tenant'],
    [{ kind: 'address', value: 'not-an-address' }, 'body/value'],
    [{ kind: 'address', value: '10.0.0.0/33' }, 'body/value'],
    [{ kind: 'address', value: '2001:db8::/129' }, 'body/value'],
    [{ kind: 'address', value: '10.0.0.1/' }, 'body/value'],
    [{ kind: 'address', value: 'fe80::1%eth0' }, 'body/value'],
  ])('POST %j is refused with 400 naming %s', async (payload, field) => {
    const res = await b.inject({ method: 'POST', url: '/api/v1/bans', payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'BIFRO_API_INVALID_REQUEST', message: expect.stringContaining(field) });
    expect(((await b.inject({ method: 'GET', url: '/api/v1/bans' })).json() as BanPage).items).toEqual([]);
  });

  it('GET filters by kind and tenant; 400 for an unknown kind or a bad cursor', async () => {
    const bans = [
      { kind: 'clientId', tenant: 't1', value: 'c1' },
      { kind: 'clientId', tenant: 't2', value: 'c1' },
      { kind: 'user', tenant: 't1', value: 'u1' },
      { kind: 'address', tenant: 't1', value: '10.1.0.0/16' },
      { kind: 'address', value: '10.2.0.0/16' },
    ];
    for (const payload of bans) expect((await b.inject({ method: 'POST', url: '/api/v1/bans', payload })).statusCode).toBe(200);
    const get = async (qs: string): Promise<string[]> =>
      ((await b.inject({ method: 'GET', url: `/api/v1/bans${qs}` })).json() as BanPage).items.map(
        (i) => `${i.kind}:${i.tenant ?? '*'}:${i.value}`,
      );
    expect(await get('?kind=clientId')).toEqual(['clientId:t1:c1', 'clientId:t2:c1']);
    expect(await get('?tenant=t1')).toEqual(['address:t1:10.1.0.0/16', 'clientId:t1:c1', 'user:t1:u1']);
    expect(await get('?kind=address&tenant=t1')).toEqual(['address:t1:10.1.0.0/16']);
    expect(await get('?kind=address')).toHaveLength(2);
    expect((await b.inject({ method: 'GET', url: '/api/v1/bans?kind=device' })).statusCode).toBe(400);
    expect((await b.inject({ method: 'GET', url: '/api/v1/bans?cursor=%%%' })).statusCode).toBe(400);
    expect((await b.inject({ method: 'GET', url: '/api/v1/bans?limit=0' })).statusCode).toBe(400);
  });

  it('GET pages with a stable cursor: every ban once, a ban added before the cursor does not shift the next page', async () => {
    for (let i = 0; i < 7; i++)
      expect(
        (await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'clientId', tenant: 't1', value: `c${i}` } })).statusCode,
      ).toBe(200);
    const first = (await b.inject({ method: 'GET', url: '/api/v1/bans?limit=3' })).json() as BanPage;
    expect(first.items.map((i) => i.value)).toEqual(['c0', 'c1', 'c2']);
    expect(first.nextCursor).toEqual(expect.any(String));
    // Added before the cursor's position, and removed after it: the next page starts after c2 all the same.
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'clientId', tenant: 't1', value: 'c00' } });
    await b.inject({ method: 'DELETE', url: '/api/v1/bans/clientId/c4?tenant=t1' });
    const second = (await b.inject({ method: 'GET', url: `/api/v1/bans?limit=3&cursor=${first.nextCursor}` })).json() as BanPage;
    expect(second.items.map((i) => i.value)).toEqual(['c3', 'c5', 'c6']);
    const third = (await b.inject({ method: 'GET', url: `/api/v1/bans?limit=3&cursor=${second.nextCursor}` })).json() as BanPage;
    expect(third).toEqual({ items: [] });
    const whole = (await b.inject({ method: 'GET', url: '/api/v1/bans?limit=8' })).json() as BanPage;
    expect(whole.items).toHaveLength(7);
    expect(whole.nextCursor).toBeUndefined();
  });

  it('DELETE /api/v1/bans/{kind}/{value} lifts a ban (CIDR URL-encoded), then 404; 400 for a missing tenant or a bad kind', async () => {
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'address', value: '10.0.0.0/8' } });
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'address', tenant: 't1', value: '10.0.0.0/8' } });
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'user', tenant: 't1', value: 'mallory' } });
    const lift = await b.inject({ method: 'DELETE', url: `/api/v1/bans/address/${encodeURIComponent('10.0.0.0/8')}?tenant=t1` });
    expect(lift.statusCode).toBe(200);
    expect((lift.json() as { ban: BanView }).ban).toMatchObject({ kind: 'address', tenant: 't1', value: '10.0.0.0/8' });
    const again = await b.inject({ method: 'DELETE', url: `/api/v1/bans/address/${encodeURIComponent('10.0.0.0/8')}?tenant=t1` });
    expect(again.statusCode).toBe(404);
    expect(again.json()).toMatchObject({ code: 'BIFRO_API_NOT_FOUND' });
    // The ban for every tenant is another ban, still there.
    const left = ((await b.inject({ method: 'GET', url: '/api/v1/bans?kind=address' })).json() as BanPage).items;
    expect(left).toEqual([expect.objectContaining({ value: '10.0.0.0/8' })]);
    expect(left[0]!.tenant).toBeUndefined();
    expect((await b.inject({ method: 'DELETE', url: `/api/v1/bans/address/${encodeURIComponent('10.0.0.0/8')}` })).statusCode).toBe(200);

    const noTenant = await b.inject({ method: 'DELETE', url: '/api/v1/bans/user/mallory' });
    expect(noTenant.statusCode).toBe(400);
    expect(noTenant.json()).toMatchObject({ message: expect.stringContaining('querystring/tenant') });
    expect((await b.inject({ method: 'DELETE', url: '/api/v1/bans/device/mallory?tenant=t1' })).statusCode).toBe(400);
    expect((await b.inject({ method: 'DELETE', url: '/api/v1/bans/user/mallory?tenant=t2' })).statusCode).toBe(404);
    expect((await b.inject({ method: 'DELETE', url: '/api/v1/bans/user/mallory?tenant=t1' })).statusCode).toBe(200);
  });

  it('every route answers 401 without a token or with a wrong one', async () => {
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/api/v1/bans'],
      ['POST', '/api/v1/bans', { kind: 'clientId', tenant: 't1', value: 'x' }],
      ['DELETE', '/api/v1/bans/clientId/x?tenant=t1'],
      ['GET', '/api/v1/tenants/t1/bans'],
      ['POST', '/api/v1/tenants/t1/bans', { kind: 'clientId', value: 'x' }],
      ['DELETE', '/api/v1/tenants/t1/bans/clientId/x'],
    ];
    for (const [method, url, payload] of routes) {
      for (const token of [null, 'not-a-configured-token']) {
        const res = await b.inject({ method: method as 'GET', url, payload: payload as object | undefined, token });
        expect([method, url, res.statusCode]).toEqual([method, url, 401]);
        expect(res.json()).toMatchObject({ code: 'BIFRO_API_UNAUTHORIZED' });
      }
    }
  });

  it('the broker-wide routes need an admin token (403 for a tenant token)', async () => {
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/api/v1/bans'],
      ['POST', '/api/v1/bans', { kind: 'clientId', tenant: 't1', value: 'x' }],
      ['DELETE', '/api/v1/bans/clientId/x?tenant=t1'],
    ];
    for (const [method, url, payload] of routes) {
      const res = await b.inject({ method: method as 'GET', url, payload: payload as object | undefined, token: API_TOKENS.t1 });
      expect([method, url, res.statusCode]).toEqual([method, url, 403]);
      expect(res.json()).toMatchObject({ code: 'BIFRO_API_FORBIDDEN' });
    }
  });

  it("a tenant token sets, lists and lifts its tenant's client id, user and address bans; not another tenant's (403)", async () => {
    const set = await b.inject({
      method: 'POST',
      url: '/api/v1/tenants/t1/bans',
      payload: { kind: 'address', value: '192.0.2.0/24', seconds: 60 },
      token: API_TOKENS.t1,
    });
    expect(set.statusCode).toBe(200);
    expect((set.json() as { ban: BanView }).ban).toMatchObject({ kind: 'address', tenant: 't1', value: '192.0.2.0/24', by: 't1-ops' });
    expect(
      (await b.inject({ method: 'POST', url: '/api/v1/tenants/t1/bans', payload: { kind: 'user', value: 'u' }, token: API_TOKENS.t1 }))
        .statusCode,
    ).toBe(200);
    // Bans the tenant list leaves out: another tenant's, every tenant's address ban, the tenant ban.
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'user', tenant: 't2', value: 'u' } });
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'address', value: '192.0.2.0/24' } });
    await b.inject({ method: 'POST', url: '/api/v1/bans', payload: { kind: 'tenant', value: 't1' } });
    const list = await b.inject({ method: 'GET', url: '/api/v1/tenants/t1/bans', token: API_TOKENS.t1 });
    expect(list.statusCode).toBe(200);
    expect((list.json() as BanPage).items.map((i) => `${i.kind}:${i.tenant}:${i.value}`)).toEqual(['address:t1:192.0.2.0/24', 'user:t1:u']);
    expect(((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1/bans?kind=user&limit=1' })).json() as BanPage).items).toHaveLength(1);

    for (const [method, url, payload] of [
      ['GET', '/api/v1/tenants/t1/bans'],
      ['POST', '/api/v1/tenants/t1/bans', { kind: 'clientId', value: 'x' }],
      ['DELETE', '/api/v1/tenants/t1/bans/user/u'],
    ] as Array<[string, string, unknown?]>) {
      const res = await b.inject({ method: method as 'GET', url, payload: payload as object | undefined, token: API_TOKENS.t2 });
      expect([method, res.statusCode]).toEqual([method, 403]);
      expect(res.json()).toMatchObject({ code: 'BIFRO_API_FORBIDDEN' });
    }

    const lift = await b.inject({ method: 'DELETE', url: '/api/v1/tenants/t1/bans/user/u', token: API_TOKENS.t1 });
    expect(lift.statusCode).toBe(200);
    expect((await b.inject({ method: 'DELETE', url: '/api/v1/tenants/t1/bans/user/u', token: API_TOKENS.t1 })).statusCode).toBe(404);
    const cidr = await b.inject({
      method: 'DELETE',
      url: `/api/v1/tenants/t1/bans/address/${encodeURIComponent('192.0.2.0/24')}`,
      token: API_TOKENS.t1,
    });
    expect(cidr.statusCode).toBe(200);
    // Only the t1-scoped one went: the ban for every tenant stays.
    expect(((await b.inject({ method: 'GET', url: '/api/v1/bans?kind=address' })).json() as BanPage).items).toHaveLength(1);
  });

  it('the OpenAPI document describes every ban route', async () => {
    const doc = (await b.inject({ method: 'GET', url: '/api/v1/openapi.json', token: null })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(Object.keys(doc.paths['/api/v1/bans'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/api/v1/bans/{kind}/{value}'] ?? {})).toEqual(['delete']);
    expect(Object.keys(doc.paths['/api/v1/tenants/{tenant}/bans'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/api/v1/tenants/{tenant}/bans/{kind}/{value}'] ?? {})).toEqual(['delete']);
  });

  it('the tenant routes refuse tenant bans, a tenant in the body and bad values (400)', async () => {
    for (const payload of [
      { kind: 'tenant', value: 't1' },
      { kind: 'clientId', tenant: 't1', value: 'x' },
      { kind: 'address', value: '300.1.1.1' },
      { kind: 'clientId', value: 'x', seconds: 31_536_001 },
    ]) {
      const res = await b.inject({ method: 'POST', url: '/api/v1/tenants/t1/bans', payload, token: API_TOKENS.t1 });
      expect([payload, res.statusCode]).toEqual([payload, 400]);
      expect(res.json()).toMatchObject({ code: 'BIFRO_API_INVALID_REQUEST' });
    }
    expect((await b.inject({ method: 'DELETE', url: '/api/v1/tenants/t1/bans/tenant/t1', token: API_TOKENS.t1 })).statusCode).toBe(400);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1/bans?kind=tenant', token: API_TOKENS.t1 })).statusCode).toBe(400);
  });
});

describe('36 bans: MQTT round trips over real HTTP', () => {
  let b: ApiBroker;
  beforeAll(async () => (b = await startApiBroker()));
  afterAll(() => b.stop());
  const clients = withClients(() => b.port);
  afterEach(() => clearBans(b));

  async function ban(
    body: Record<string, unknown>,
    token: string = API_TOKENS.admin,
    url = '/api/v1/bans',
  ): Promise<{ ban: BanView; kicked: number }> {
    const res = await b.http('POST', url, { token, body });
    expect(res.status).toBe(200);
    return res.body as { ban: BanView; kicked: number };
  }

  /** The value of an unlabelled metric in GET /metrics. */
  async function metricValue(name: string): Promise<number> {
    const res = await b.inject({ method: 'GET', url: '/metrics' });
    const line = res.body.split('\n').find((l) => l.startsWith(`${name} `));
    if (line === undefined) throw new Error(`${name} is not in /metrics`);
    return Number(line.slice(name.length + 1));
  }

  it('a client id ban refuses the next CONNECT: v5 0x8A, v3.1.1 0x05; the same client id in another tenant connects', async () => {
    const clientId = uniqueName('banned');
    expect(await connackCode(b.port, { clientId, username: 't1/alice' })).toBe(0);
    const refusedBefore = await metricValue('bifro_ban_refusals_total');
    await ban({ kind: 'clientId', tenant: 't1', value: clientId, reason: 'test' });
    expect(await connackCode(b.port, { clientId, username: 't1/alice' })).toBe(0x8a);
    expect(await connackCode(b.port, { clientId, username: 't1/alice', protocolVersion: 4 })).toBe(0x05);
    expect(await connackCode(b.port, { clientId, username: 't2/alice' })).toBe(0);
    expect(await connackCode(b.port, { clientId: uniqueName('other'), username: 't1/alice' })).toBe(0);
    expect(b.logs.filter((l) => l.msg === 'banned client refused' && l.clientId === clientId)).toHaveLength(2);
    expect(await metricValue('bifro_ban_refusals_total')).toBe(refusedBefore + 2);
    expect(await metricValue('bifro_bans')).toBeGreaterThanOrEqual(1);
  });

  it('setting a ban disconnects the matching live clients (v5 DISCONNECT 0x98, v3.1.1 closed); kick: false leaves them', async () => {
    const clientId = uniqueName('live');
    const v5 = await clients.mqtt({ clientId, username: 't1/alice', protocolVersion: 5 });
    const v4 = await clients.mqtt({ clientId: uniqueName('live4'), username: 't1/alice', protocolVersion: 4 });
    const bystander = await clients.mqtt({ clientId: uniqueName('bystander'), username: 't1/bob', protocolVersion: 5 });
    let reason: number | undefined;
    v5.client.on('disconnect', (p) => (reason = p.reasonCode));
    const closed = (c: MqttClient): Promise<void> => new Promise((resolve) => c.once('close', () => resolve()));
    const v5Closed = closed(v5.client);
    const v4Closed = closed(v4.client);
    const set = await ban({ kind: 'user', tenant: 't1', value: 'alice' });
    expect(set.kicked).toBe(2);
    await v5Closed;
    await v4Closed;
    expect(reason).toBe(0x98);
    expect(bystander.client.connected).toBe(true);

    const quiet = await clients.mqtt({ clientId: uniqueName('quiet'), username: 't1/carol', protocolVersion: 5 });
    expect((await ban({ kind: 'user', tenant: 't1', value: 'carol', kick: false })).kicked).toBe(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(quiet.client.connected).toBe(true);
    expect(await connackCode(b.port, { clientId: uniqueName('quiet2'), username: 't1/carol' })).toBe(0x8a);
  });

  it('a user ban refuses that user of that tenant whatever the client id; others and the same name in another tenant connect', async () => {
    await ban({ kind: 'user', tenant: 't1', value: 'dave', seconds: 300 });
    expect(await connackCode(b.port, { clientId: uniqueName('d1'), username: 't1/dave' })).toBe(0x8a);
    expect(await connackCode(b.port, { clientId: uniqueName('d2'), username: 't1/dave', protocolVersion: 4 })).toBe(0x05);
    expect(await connackCode(b.port, { clientId: uniqueName('d3'), username: 't2/dave' })).toBe(0);
    expect(await connackCode(b.port, { clientId: uniqueName('e1'), username: 't1/erin' })).toBe(0);
  });

  it('a tenant ban refuses every client of the tenant and disconnects the live ones; other tenants connect', async () => {
    const live = await clients.mqtt({ clientId: uniqueName('t3'), username: 't3/anyone', protocolVersion: 5 });
    const gone = new Promise<void>((resolve) => live.client.once('close', () => resolve()));
    expect((await ban({ kind: 'tenant', value: 't3' })).kicked).toBe(1);
    await gone;
    expect(await connackCode(b.port, { clientId: uniqueName('t3'), username: 't3/someone' })).toBe(0x8a);
    expect(await connackCode(b.port, { clientId: uniqueName('t3'), username: 't3/someone', protocolVersion: 4 })).toBe(0x05);
    expect(await connackCode(b.port, { clientId: uniqueName('t1'), username: 't1/someone' })).toBe(0);
  });

  it("a CIDR ban scoped to a tenant (set with the tenant's token) refuses its clients from 127.0.0.0/8; other tenants connect", async () => {
    const set = await ban({ kind: 'address', value: '127.0.0.0/8' }, API_TOKENS.t1, '/api/v1/tenants/t1/bans');
    expect(set.ban).toMatchObject({ kind: 'address', tenant: 't1', by: 't1-ops' });
    expect(await connackCode(b.port, { clientId: uniqueName('c'), username: 't1/frank' })).toBe(0x8a);
    expect(await connackCode(b.port, { clientId: uniqueName('c'), username: 't2/frank' })).toBe(0);
    expect(await connackCode(b.port, { clientId: uniqueName('c'), username: 'frank' })).toBe(0);
    // An address ban for every tenant (admin only) refuses them all; one for another block none.
    await ban({ kind: 'address', value: '10.0.0.0/8' });
    expect(await connackCode(b.port, { clientId: uniqueName('c'), username: 't2/frank' })).toBe(0);
    await ban({ kind: 'address', value: '127.0.0.1' });
    expect(await connackCode(b.port, { clientId: uniqueName('c'), username: 't2/frank' })).toBe(0x8a);
    expect(await connackCode(b.port, { clientId: uniqueName('c'), username: 'frank', protocolVersion: 4 })).toBe(0x05);
  });

  it('a ban ends on the broker clock: refused before, accepted after, and gone from the list and the storage', async () => {
    const clientId = uniqueName('timed');
    const set = await ban({ kind: 'clientId', tenant: 't1', value: clientId, seconds: 60 });
    expect(set.ban.remainingSeconds).toBe(60);
    expect(await connackCode(b.port, { clientId, username: 't1/g' })).toBe(0x8a);
    await b.clock.advance(30_000);
    expect(await connackCode(b.port, { clientId, username: 't1/g' })).toBe(0x8a);
    const halfway = (await b.http('GET', '/api/v1/bans')).body as BanPage;
    expect(halfway.items[0]!.remainingSeconds).toBeLessThanOrEqual(30);
    await b.clock.advance(30_001);
    expect(await connackCode(b.port, { clientId, username: 't1/g' })).toBe(0);
    expect(((await b.http('GET', '/api/v1/bans')).body as BanPage).items).toEqual([]);
    expect(await waitUntil(() => b.logs.some((l) => l.msg === 'ban ended' && l.value === clientId))).toBe(true);
  });

  it('lifting a ban lets the client in again', async () => {
    const clientId = uniqueName('lifted');
    await ban({ kind: 'clientId', tenant: 't2', value: clientId });
    expect(await connackCode(b.port, { clientId, username: 't2/h' })).toBe(0x8a);
    const lift = await b.http('DELETE', `/api/v1/tenants/t2/bans/clientId/${encodeURIComponent(clientId)}`, { token: API_TOKENS.t2 });
    expect(lift.status).toBe(200);
    expect(await connackCode(b.port, { clientId, username: 't2/h' })).toBe(0);
    expect(
      (await b.http('DELETE', `/api/v1/tenants/t2/bans/clientId/${encodeURIComponent(clientId)}`, { token: API_TOKENS.t2 })).status,
    ).toBe(404);
  });
});

describe('36 bans: a ban survives a restart (level storage)', () => {
  let dir: string;
  let b: ApiBroker | undefined;
  beforeAll(() => (dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-bans-'))));
  afterAll(async () => {
    await b?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is still refused by a new broker on the same data directory, until lifted there', async () => {
    const clientId = uniqueName('durable');
    b = await startApiBroker('', { dir, keepDir: true });
    expect(b.broker.plugins.find((p) => p.kinds.includes('storage'))?.name).toBe('@bifro/plugin-storage-level');
    const set = await b.http('POST', '/api/v1/bans', { body: { kind: 'clientId', tenant: 't1', value: clientId, reason: 'kept' } });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ durable: true });
    await b.http('POST', '/api/v1/bans', { body: { kind: 'address', tenant: 't9', value: '127.0.0.0/8', seconds: 3600 } });
    // A ban that ends on this broker's clock: it must be gone from storage too, or the next broker
    // (whose clock has not moved) would hold it again.
    const ended = uniqueName('ended');
    await b.http('POST', '/api/v1/bans', { body: { kind: 'clientId', tenant: 't1', value: ended, seconds: 60 } });
    await b.clock.advance(61_000);
    expect(await connackCode(b.port, { clientId: ended, username: 't1/i' })).toBe(0);
    expect(await connackCode(b.port, { clientId, username: 't1/i' })).toBe(0x8a);
    await b.stop();

    b = await startApiBroker('', { dir, keepDir: true });
    expect(b.logs.filter((l) => String(l.msg).includes('ban')).map((l) => l.msg)).toEqual(['loaded 2 bans']);
    const listed = (await b.http('GET', '/api/v1/bans')).body as BanPage;
    expect(listed.items.map((i) => [i.kind, i.tenant, i.value, i.reason, i.by])).toEqual([
      ['address', 't9', '127.0.0.0/8', undefined, 'admin'],
      ['clientId', 't1', clientId, 'kept', 'admin'],
    ]);
    expect(await connackCode(b.port, { clientId, username: 't1/i' })).toBe(0x8a);
    expect(await connackCode(b.port, { clientId, username: 't1/i', protocolVersion: 4 })).toBe(0x05);
    expect(await connackCode(b.port, { clientId: uniqueName('x'), username: 't9/j' })).toBe(0x8a);
    expect((await b.http('DELETE', `/api/v1/bans/clientId/${encodeURIComponent(clientId)}?tenant=t1`)).status).toBe(200);
    await b.stop();

    b = await startApiBroker('', { dir, keepDir: true });
    expect(await connackCode(b.port, { clientId, username: 't1/i' })).toBe(0);
    expect(((await b.http('GET', '/api/v1/bans')).body as BanPage).items.map((i) => i.value)).toEqual(['127.0.0.0/8']);
  });
});
