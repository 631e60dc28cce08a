import type { IClientOptions, MqttClient } from 'mqtt';
import type { IDisconnectPacket } from 'mqtt-packet';
import { startApiBroker, API_TOKENS, type ApiBroker } from '../support/api-broker';
import { collect, publish, subscribe, uniqueName, withClients, QUIET_MS, sleep } from '../support/mqtt-helpers';

/**
 * The admin API's sessions and kicks (docs/api.md § Sessions, § Kick): every route by inject
 * (valid, 400, 401, 403, 404, paging with a stable cursor), and real round trips with MQTT.js
 * clients: kicks with DISCONNECT 0x98 / 0x9C / 0x9D, user and tenant kicks, subscribe and
 * unsubscribe on behalf, a persistent offline session's inbox depth, and expiry.
 */

interface SessionItem {
  clientId: string;
  userId: string;
  online: boolean;
  persistent: boolean;
  protocolVersion: number;
  expirySeconds: number;
  connectedSince?: string;
  disconnectedAt?: string;
  subscriptions: number;
  inboxDepth: number;
}

interface Page {
  items: SessionItem[];
  nextCursor?: string;
}

const base = (tenant: string): string => `/api/v1/tenants/${encodeURIComponent(tenant)}/sessions`;
const one = (tenant: string, clientId: string): string => `${base(tenant)}/${encodeURIComponent(clientId)}`;

/** Resolves with the DISCONNECT the broker sends, or undefined when the connection closes without one (bounded). */
function nextDisconnect(client: MqttClient, timeoutMs = 3000): Promise<IDisconnectPacket | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), timeoutMs);
    client.once('disconnect', (packet: IDisconnectPacket) => {
      clearTimeout(timer);
      resolve(packet);
    });
    client.once('close', () => {
      // A DISCONNECT is read before the close; give the event a turn to arrive.
      setTimeout(() => {
        clearTimeout(timer);
        resolve(undefined);
      }, 50);
    });
  });
}

/** Resolves true once the client's connection closed (bounded). */
function closed(client: MqttClient, timeoutMs = 3000): Promise<boolean> {
  if (!client.connected) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    client.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Polls the API until the session is offline (bounded); resolves whether it got there. */
async function offline(b: ApiBroker, tenant: string, clientId: string, timeoutMs = 3000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const res = await b.inject({ method: 'GET', url: one(tenant, clientId) });
    if (res.statusCode === 200 && (res.json() as { online: boolean }).online === false) return true;
    await sleep(10);
  }
  return false;
}

describe('37 api sessions', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);
  beforeAll(async () => {
    b = await startApiBroker();
  });
  afterAll(() => b.stop());

  /** A connected MQTT.js client of `tenant/user` with this client id. */
  async function client(tenant: string, user: string, clientId: string, opts: IClientOptions = {}): Promise<MqttClient> {
    return (await clients.mqtt({ clientId, username: `${tenant}/${user}`, protocolVersion: 5, ...opts })).client;
  }

  async function list(tenant: string, query: string, token: string = API_TOKENS.admin): Promise<Page> {
    const res = await b.inject({ method: 'GET', url: `${base(tenant)}?${query}`, token });
    expect(res.statusCode).toBe(200);
    return res.json() as Page;
  }

  describe('GET /tenants/{tenant}/sessions', () => {
    it('lists online and persistent offline sessions with their figures, a tenant token only its own tenant', async () => {
      const p = uniqueName('ls');
      const live = await client('t1', 'alice', `${p}-live`, { clean: true });
      await subscribe(live, [`${p}/a`, `${p}/b`], { qos: 1 });
      const gone = await client('t1', 'bob', `${p}-gone`, { clean: false, properties: { sessionExpiryInterval: 3600 } });
      gone.end(true);
      expect(await offline(b, 't1', `${p}-gone`)).toBe(true);
      await client('t2', 'alice', `${p}-other`);

      const page = await list('t1', `clientIdPrefix=${p}`, API_TOKENS.t1);
      expect(page.nextCursor).toBeUndefined();
      expect(page.items.map((i) => i.clientId)).toEqual([`${p}-gone`, `${p}-live`]);
      const [g, l] = page.items;
      expect(l).toMatchObject({
        userId: 'alice',
        online: true,
        persistent: false,
        protocolVersion: 5,
        expirySeconds: 0,
        subscriptions: 2,
        inboxDepth: 0,
      });
      expect(Date.parse(l!.connectedSince!)).toBeGreaterThan(0);
      expect(l!.disconnectedAt).toBeUndefined();
      expect(g).toMatchObject({ userId: 'bob', online: false, persistent: true, expirySeconds: 3600, subscriptions: 0, inboxDepth: 0 });
      expect(Date.parse(g!.disconnectedAt!)).toBeGreaterThan(0);

      expect((await list('t1', `clientIdPrefix=${p}&state=online`)).items.map((i) => i.clientId)).toEqual([`${p}-live`]);
      expect((await list('t1', `clientIdPrefix=${p}&state=offline`)).items.map((i) => i.clientId)).toEqual([`${p}-gone`]);
      expect((await list('t1', `clientIdPrefix=${p}&persistent=true`)).items.map((i) => i.clientId)).toEqual([`${p}-gone`]);
      expect((await list('t1', `clientIdPrefix=${p}&persistent=false`)).items.map((i) => i.clientId)).toEqual([`${p}-live`]);
      expect((await list('t1', `clientIdPrefix=${p}&user=bob`)).items.map((i) => i.clientId)).toEqual([`${p}-gone`]);
      expect((await list('t2', `clientIdPrefix=${p}`, API_TOKENS.t2)).items.map((i) => i.clientId)).toEqual([`${p}-other`]);
      expect((await list('nobody-here', '')).items).toEqual([]);
    });

    it('pages by client id with a cursor that stays stable while sessions come and go', async () => {
      const p = uniqueName('pg');
      for (const n of ['b', 'd', 'f', 'h', 'j']) await client('t1', 'alice', `${p}-${n}`);
      const first = await list('t1', `clientIdPrefix=${p}&limit=2`);
      expect(first.items.map((i) => i.clientId)).toEqual([`${p}-b`, `${p}-d`]);
      expect(first.nextCursor).toEqual(expect.any(String));
      // Added before the cursor: not seen; added after it: seen; removed after it: not seen.
      await client('t1', 'alice', `${p}-a`);
      await client('t1', 'alice', `${p}-e`);
      expect((await b.inject({ method: 'DELETE', url: `${one('t1', `${p}-h`)}?discard=true` })).statusCode).toBe(200);
      const second = await list('t1', `clientIdPrefix=${p}&limit=2&cursor=${first.nextCursor}`);
      expect(second.items.map((i) => i.clientId)).toEqual([`${p}-e`, `${p}-f`]);
      const third = await list('t1', `clientIdPrefix=${p}&limit=2&cursor=${second.nextCursor}`);
      expect(third.items.map((i) => i.clientId)).toEqual([`${p}-j`]);
      expect(third.nextCursor).toBeUndefined();
      // Without a prefix the pages walk the whole tenant in order, never another tenant's sessions.
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 100; pages++) {
        const page = await list('t1', `limit=3${cursor === undefined ? '' : `&cursor=${cursor}`}`);
        seen.push(...page.items.map((i) => i.clientId));
        cursor = page.nextCursor;
        if (cursor === undefined) break;
      }
      expect(cursor).toBeUndefined();
      expect(seen).toEqual([...seen].sort());
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen).toEqual(expect.arrayContaining([`${p}-a`, `${p}-b`, `${p}-j`]));
      expect(seen.some((id) => id.startsWith('ls-') && id.endsWith('-other'))).toBe(false);
    });

    it('answers 400 for a bad query, 401 without a token, 403 for another tenant', async () => {
      for (const q of ['limit=0', 'limit=1001', 'state=asleep', 'persistent=maybe', 'color=red', 'cursor=%%%', 'clientIdPrefix=']) {
        const res = await b.inject({ method: 'GET', url: `${base('t1')}?${q}` });
        expect([q, res.statusCode, res.json().code]).toEqual([q, 400, 'BIFRO_API_INVALID_REQUEST']);
      }
      expect((await b.inject({ method: 'GET', url: base('t1'), token: null })).statusCode).toBe(401);
      const forbidden = await b.inject({ method: 'GET', url: base('t1'), token: API_TOKENS.t2 });
      expect(forbidden.statusCode).toBe(403);
      expect(forbidden.json().code).toBe('BIFRO_API_FORBIDDEN');
    });
  });

  describe('GET /tenants/{tenant}/sessions/{clientId}', () => {
    it('shows an online session: client, subscriptions with options, inflight, receive window, will without payload', async () => {
      const id = uniqueName('one');
      const c = await client('t1', 'alice', id, {
        properties: { receiveMaximum: 7 },
        will: { topic: `${id}/will`, payload: Buffer.from('bye-bye'), qos: 1, retain: false, properties: { willDelayInterval: 30 } },
      });
      await subscribe(c, `${id}/+`, { qos: 2, nl: true, rap: true, rh: 1, properties: { subscriptionIdentifier: 9 } });
      const res = await b.http('GET', one('t1', id), { token: API_TOKENS.t1 });
      expect(res.status).toBe(200);
      const d = res.body as Record<string, unknown> & { connection: Record<string, unknown> };
      expect(d).toMatchObject({
        tenantId: 't1',
        clientId: id,
        userId: 'alice',
        online: true,
        persistent: false,
        protocolVersion: 5,
        expirySeconds: 0,
        inboxDepth: 0,
        inflight: 0,
        subscriptions: [{ filter: `${id}/+`, qos: 2, noLocal: true, retainAsPublished: true, retainHandling: 1, subscriptionId: 9 }],
        will: { topic: `${id}/will`, qos: 1, retain: false, delaySeconds: 30, payloadBytes: 7 },
      });
      expect(d.connection).toMatchObject({ remoteAddress: '127.0.0.1', listener: 'tcp', receiveMaximum: 7, keepAliveSeconds: 60 });
      expect(d.connection.remotePort).toEqual(expect.any(Number));
      expect(Date.parse(d.connection.connectedSince as string)).toBeGreaterThan(0);
      expect(d.disconnectedAt).toBeUndefined();
      expect(JSON.stringify(d)).not.toContain('bye-bye');
    });

    it('shows a persistent offline session with its queued messages as inbox depth and when it expires', async () => {
      const id = uniqueName('off');
      const sub = await client('t1', 'bob', id, { clean: false, properties: { sessionExpiryInterval: 600 } });
      await subscribe(sub, `${id}/q`, { qos: 1 });
      sub.end(true);
      expect(await offline(b, 't1', id)).toBe(true);
      const pub = await client('t1', 'carol', uniqueName('pub'));
      for (let i = 0; i < 3; i++) await publish(pub, `${id}/q`, `m${i}`, { qos: 1 });
      const d = (await b.inject({ method: 'GET', url: one('t1', id) })).json();
      expect(d).toMatchObject({ online: false, persistent: true, expirySeconds: 600, inboxDepth: 3, inflight: 0 });
      expect(d.connection).toBeUndefined();
      expect(Date.parse(d.expiresAt) - Date.parse(d.disconnectedAt)).toBe(600_000);
      const listed = await list('t1', `clientIdPrefix=${id}`);
      expect(listed.items[0]).toMatchObject({ clientId: id, inboxDepth: 3, online: false });
    });

    it('answers 404 for no such session, 401 without a token, 403 for another tenant', async () => {
      const id = uniqueName('nf');
      await client('t1', 'alice', id);
      const missing = await b.inject({ method: 'GET', url: one('t1', `${id}-nope`) });
      expect(missing.statusCode).toBe(404);
      expect(missing.json().code).toBe('BIFRO_API_NOT_FOUND');
      // The same client id in another tenant is another session.
      expect((await b.inject({ method: 'GET', url: one('t2', id) })).statusCode).toBe(404);
      expect((await b.inject({ method: 'GET', url: one('t1', id), token: null })).statusCode).toBe(401);
      expect((await b.inject({ method: 'GET', url: one('t1', id), token: API_TOKENS.t2 })).statusCode).toBe(403);
    });
  });

  describe('DELETE /tenants/{tenant}/sessions/{clientId} (kick)', () => {
    it('closes a v5 client with DISCONNECT 0x98 and publishes its will; a transient session ends with it', async () => {
      const id = uniqueName('k98');
      const watcher = await client('t1', 'carol', uniqueName('w'));
      await subscribe(watcher, `${id}/will`, { qos: 1 });
      const wills = collect(watcher);
      const c = await client('t1', 'alice', id, { will: { topic: `${id}/will`, payload: Buffer.from('gone'), qos: 1, retain: false } });
      const disconnect = nextDisconnect(c);
      const res = await b.http('DELETE', one('t1', id), { token: API_TOKENS.t1 });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ clientId: id, disconnected: true, sessionEnded: true });
      expect((await disconnect)?.reasonCode).toBe(0x98);
      expect((await wills.waitFor(1)).map((m) => m.payload.toString())).toEqual(['gone']);
      expect((await b.inject({ method: 'GET', url: one('t1', id) })).statusCode).toBe(404);
    });

    it('keeps a delayed will pending after a kick; discard publishes it at once', async () => {
      const id = uniqueName('kwd');
      const watcher = await client('t1', 'carol', uniqueName('w'));
      await subscribe(watcher, `${id}/will`, { qos: 1 });
      const wills = collect(watcher);
      const will = {
        topic: `${id}/will`,
        payload: Buffer.from('later'),
        qos: 1 as const,
        retain: false,
        properties: { willDelayInterval: 600 },
      };
      await client('t1', 'alice', id, { clean: false, properties: { sessionExpiryInterval: 3600 }, will });
      expect((await b.inject({ method: 'DELETE', url: one('t1', id) })).json()).toMatchObject({ disconnected: true, sessionEnded: false });
      expect(await wills.settle()).toEqual([]);
      expect((await b.inject({ method: 'GET', url: one('t1', id) })).json().will).toMatchObject({
        delaySeconds: 600,
        publishesAt: expect.any(String),
      });
      expect((await b.inject({ method: 'DELETE', url: `${one('t1', id)}?discard=true` })).json()).toMatchObject({ sessionEnded: true });
      expect((await wills.waitFor(1)).map((m) => m.payload.toString())).toEqual(['later']);
    });

    it('redirects with 0x9C (temporary, query) and 0x9D (permanent, body) and the server reference', async () => {
      const t = uniqueName('k9c');
      const ct = await client('t1', 'alice', t);
      const dt = nextDisconnect(ct);
      const rt = await b.inject({ method: 'DELETE', url: `${one('t1', t)}?redirect=temporary&serverReference=mqtt2.example.com:1883` });
      expect(rt.statusCode).toBe(200);
      const pt = await dt;
      expect(pt?.reasonCode).toBe(0x9c);
      expect(pt?.properties?.serverReference).toBe('mqtt2.example.com:1883');

      const p = uniqueName('k9d');
      const cp = await client('t1', 'alice', p);
      const dp = nextDisconnect(cp);
      const rp = await b.http('DELETE', one('t1', p), { body: { redirect: { permanent: true, serverReference: 'mqtt3.example.com' } } });
      expect(rp.status).toBe(200);
      const pp = await dp;
      expect(pp?.reasonCode).toBe(0x9d);
      expect(pp?.properties?.serverReference).toBe('mqtt3.example.com');
    });

    it('closes an MQTT 3.1.1 client without DISCONNECT', async () => {
      const id = uniqueName('k3');
      const c = await client('t1', 'alice', id, { protocolVersion: 4 });
      const disconnect = nextDisconnect(c);
      const res = await b.inject({ method: 'DELETE', url: one('t1', id) });
      expect(res.json()).toMatchObject({ disconnected: true });
      expect(await disconnect).toBeUndefined();
      expect(await closed(c)).toBe(true);
    });

    it('keeps a persistent session unless discard is given, then ends it and its stored record', async () => {
      const id = uniqueName('kp');
      const c = await client('t1', 'alice', id, { clean: false, properties: { sessionExpiryInterval: 3600 } });
      await subscribe(c, `${id}/x`, { qos: 1 });
      const first = await b.inject({ method: 'DELETE', url: one('t1', id) });
      expect(first.json()).toEqual({ clientId: id, disconnected: true, sessionEnded: false });
      expect(await closed(c)).toBe(true);
      expect((await b.inject({ method: 'GET', url: one('t1', id) })).json()).toMatchObject({ online: false, persistent: true });
      // Offline: nothing to close; discard ends it.
      const again = await b.inject({ method: 'DELETE', url: `${one('t1', id)}?discard=true` });
      expect(again.json()).toEqual({ clientId: id, disconnected: false, sessionEnded: true });
      expect((await b.inject({ method: 'GET', url: one('t1', id) })).statusCode).toBe(404);
      const back = await clients.mqtt({
        clientId: id,
        username: 't1/alice',
        protocolVersion: 5,
        clean: false,
        properties: { sessionExpiryInterval: 3600 },
      });
      expect(back.connack.sessionPresent).toBe(false);
    });

    it('answers 404, 400 for bad options, 401, 403', async () => {
      const id = uniqueName('kx');
      const c = await client('t1', 'alice', id);
      expect((await b.inject({ method: 'DELETE', url: one('t1', `${id}-nope`) })).statusCode).toBe(404);
      for (const q of ['redirect=temporary', 'serverReference=x', 'redirect=sideways&serverReference=x', 'discard=perhaps', 'force=true']) {
        const res = await b.inject({ method: 'DELETE', url: `${one('t1', id)}?${q}` });
        expect([q, res.statusCode]).toEqual([q, 400]);
      }
      for (const body of [{ redirect: { permanent: true } }, { discard: true, extra: 1 }]) {
        const res = await b.inject({ method: 'DELETE', url: one('t1', id), payload: body });
        expect([body, res.statusCode]).toEqual([body, 400]);
      }
      const both = await b.inject({ method: 'DELETE', url: `${one('t1', id)}?discard=true`, payload: { discard: true } });
      expect(both.statusCode).toBe(400);
      expect((await b.inject({ method: 'DELETE', url: one('t1', id), token: null })).statusCode).toBe(401);
      expect((await b.inject({ method: 'DELETE', url: one('t1', id), token: API_TOKENS.t2 })).statusCode).toBe(403);
      // None of these closed it.
      await sleep(QUIET_MS);
      expect(c.connected).toBe(true);
    });
  });

  describe('POST /tenants/{tenant}/kick', () => {
    it("kicks a user's clients, then the whole tenant, leaving other tenants connected", async () => {
      const k = uniqueName('ku');
      const tenant = `${k}-t`;
      const other = `${k}-o`;
      const a1 = await client(tenant, 'alice', `${k}-a1`);
      const a2 = await client(tenant, 'alice', `${k}-a2`, { protocolVersion: 4 });
      const bob = await client(tenant, 'bob', `${k}-b`);
      const elsewhere = await client(other, 'alice', `${k}-x`);
      const a1Disconnect = nextDisconnect(a1);
      const byUser = await b.http('POST', `/api/v1/tenants/${tenant}/kick`, { body: { user: 'alice' } });
      expect(byUser).toMatchObject({ status: 200, body: { kicked: 2 } });
      expect((await a1Disconnect)?.reasonCode).toBe(0x98);
      expect(await closed(a2)).toBe(true);
      await sleep(QUIET_MS);
      expect(bob.connected).toBe(true);
      expect(elsewhere.connected).toBe(true);

      const bobDisconnect = nextDisconnect(bob);
      const all = await b.inject({
        method: 'POST',
        url: `/api/v1/tenants/${tenant}/kick`,
        payload: { redirect: { permanent: false, serverReference: 'other:1883' } },
      });
      expect(all.json()).toEqual({ kicked: 1 });
      const p = await bobDisconnect;
      expect(p?.reasonCode).toBe(0x9c);
      expect(p?.properties?.serverReference).toBe('other:1883');
      await sleep(QUIET_MS);
      expect(elsewhere.connected).toBe(true);
      // Nobody left to kick.
      expect((await b.inject({ method: 'POST', url: `/api/v1/tenants/${tenant}/kick`, payload: {} })).json()).toEqual({ kicked: 0 });
    });

    it('answers 400 for a bad body, 401, 403', async () => {
      for (const payload of [{ user: '' }, { redirect: { permanent: true } }, { everyone: true }]) {
        const res = await b.inject({ method: 'POST', url: '/api/v1/tenants/t1/kick', payload });
        expect([payload, res.statusCode]).toEqual([payload, 400]);
      }
      // No body at all kicks nobody: a whole tenant is kicked with an explicit {}.
      expect((await b.inject({ method: 'POST', url: '/api/v1/tenants/t1/kick' })).statusCode).toBe(400);
      expect((await b.inject({ method: 'POST', url: '/api/v1/tenants/t1/kick', payload: {}, token: null })).statusCode).toBe(401);
      expect((await b.inject({ method: 'POST', url: '/api/v1/tenants/t1/kick', payload: {}, token: API_TOKENS.t2 })).statusCode).toBe(403);
    });
  });

  describe('subscriptions on behalf of a session', () => {
    it('subscribes a connected client: it receives what another client publishes, and the retained message', async () => {
      const id = uniqueName('sob');
      const pub = await client('t1', 'carol', uniqueName('pub'));
      await publish(pub, `${id}/r`, 'kept', { qos: 1, retain: true });
      const c = await client('t1', 'alice', id);
      const got = collect(c);
      const url = `${one('t1', id)}/subscriptions`;
      const res = await b.http('POST', url, { token: API_TOKENS.t1, body: { filter: `${id}/+`, qos: 1 } });
      expect(res).toMatchObject({ status: 200, body: { filter: `${id}/+`, qos: 1, replaced: false } });
      const retained = await got.waitFor(1);
      expect(retained.map((m) => [m.topic, m.payload.toString(), m.packet.retain])).toEqual([[`${id}/r`, 'kept', true]]);
      await publish(pub, `${id}/live`, 'hello', { qos: 1 });
      const all = await got.waitFor(2);
      expect(all.map((m) => [m.topic, m.payload.toString(), m.packet.qos])).toEqual([
        [`${id}/r`, 'kept', 1],
        [`${id}/live`, 'hello', 1],
      ]);
      // The same filter again replaces it; Retain Handling 2 sends no retained message.
      const again = await b.inject({ method: 'POST', url, payload: { filter: `${id}/+`, qos: 0, retainHandling: 2, noLocal: true } });
      expect(again.json()).toEqual({ filter: `${id}/+`, qos: 0, replaced: true });
      const d = (await b.inject({ method: 'GET', url: one('t1', id) })).json();
      expect(d.subscriptions).toEqual([{ filter: `${id}/+`, qos: 0, noLocal: true, retainAsPublished: false, retainHandling: 2 }]);
      expect((await got.settle()).length).toBe(2);

      // Unsubscribe on behalf: nothing arrives any more; a second time there is nothing to remove.
      const del = await b.inject({ method: 'DELETE', url: `${url}?filter=${encodeURIComponent(`${id}/+`)}` });
      expect(del.json()).toEqual({ filter: `${id}/+`, removed: true });
      await publish(pub, `${id}/live`, 'late', { qos: 1 });
      expect((await got.settle()).length).toBe(2);
      const none = await b.inject({ method: 'DELETE', url: `${url}?filter=${encodeURIComponent(`${id}/+`)}` });
      expect(none.statusCode).toBe(404);
    });

    it('subscribes an offline persistent session: the record is stored, the message waits in its inbox', async () => {
      const id = uniqueName('sobp');
      const c = await client('t1', 'alice', id, { clean: false, properties: { sessionExpiryInterval: 3600 } });
      c.end(true);
      expect(await offline(b, 't1', id)).toBe(true);
      const res = await b.inject({ method: 'POST', url: `${one('t1', id)}/subscriptions`, payload: { filter: `${id}/q`, qos: 2 } });
      expect(res.json()).toEqual({ filter: `${id}/q`, qos: 2, replaced: false });
      expect((await b.inject({ method: 'GET', url: one('t1', id) })).json()).toMatchObject({
        online: false,
        subscriptions: [{ filter: `${id}/q`, qos: 2 }],
      });
      const pub = await client('t1', 'carol', uniqueName('pub'));
      await publish(pub, `${id}/q`, 'waiting', { qos: 1 });
      expect((await b.inject({ method: 'GET', url: one('t1', id) })).json()).toMatchObject({ inboxDepth: 1 });
      const back = await clients.mqttCollecting({
        clientId: id,
        username: 't1/alice',
        protocolVersion: 5,
        clean: false,
        properties: { sessionExpiryInterval: 3600 },
      });
      expect(back.connack.sessionPresent).toBe(true);
      expect((await back.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['waiting']);
    });

    it('answers 400 for a bad body or filter, 404, 401, 403', async () => {
      const id = uniqueName('sobx');
      const v3 = uniqueName('sobx3');
      await client('t1', 'alice', id);
      await client('t1', 'alice', v3, { protocolVersion: 4 });
      const url = `${one('t1', id)}/subscriptions`;
      const bad: [string, unknown][] = [
        [url, { filter: 'a/#/b', qos: 0 }],
        [url, { filter: '', qos: 0 }],
        [url, { filter: 'a', qos: 3 }],
        [url, { filter: 'a' }],
        [url, { filter: 'a', qos: 0, colour: 'red' }],
        [url, { filter: '$share/g/a', qos: 0, noLocal: true }],
        [url, { filter: 'a', qos: 0, subscriptionId: 0 }],
        [`${one('t1', v3)}/subscriptions`, { filter: 'a', qos: 0, subscriptionId: 5 }],
      ];
      for (const [u, payload] of bad) {
        const res = await b.inject({ method: 'POST', url: u, payload: payload as Record<string, unknown> });
        expect([payload, res.statusCode, res.json().code]).toEqual([payload, 400, 'BIFRO_API_INVALID_REQUEST']);
      }
      const ok = { filter: 'a', qos: 0 };
      expect((await b.inject({ method: 'POST', url: `${one('t1', `${id}-nope`)}/subscriptions`, payload: ok })).statusCode).toBe(404);
      expect((await b.inject({ method: 'POST', url, payload: ok, token: null })).statusCode).toBe(401);
      expect((await b.inject({ method: 'POST', url, payload: ok, token: API_TOKENS.t2 })).statusCode).toBe(403);
      expect((await b.inject({ method: 'DELETE', url })).statusCode).toBe(400);
      expect((await b.inject({ method: 'DELETE', url: `${url}?filter=a&x=1` })).statusCode).toBe(400);
      expect((await b.inject({ method: 'DELETE', url: `${one('t1', `${id}-nope`)}/subscriptions?filter=a` })).statusCode).toBe(404);
      expect((await b.inject({ method: 'DELETE', url: `${url}?filter=a`, token: null })).statusCode).toBe(401);
      expect((await b.inject({ method: 'DELETE', url: `${url}?filter=a`, token: API_TOKENS.t2 })).statusCode).toBe(403);
    });
  });
});

describe('37 api sessions: expire', () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);
  beforeAll(async () => {
    b = await startApiBroker();
  });
  afterAll(() => b.stop());

  it('ends offline sessions away for at least olderThanSeconds, only in the tenant asked, publishing a pending will', async () => {
    const persistent = { protocolVersion: 5 as const, clean: false, properties: { sessionExpiryInterval: 86400 } };
    const old = (
      await clients.mqtt({
        ...persistent,
        clientId: 'old',
        username: 't1/alice',
        will: { topic: 'will/old', payload: Buffer.from('old-will'), qos: 1, retain: false, properties: { willDelayInterval: 86000 } },
      })
    ).client;
    const elsewhere = (await clients.mqtt({ ...persistent, clientId: 'old', username: 't2/alice' })).client;
    old.end(true);
    elsewhere.end(true);
    expect(await offline(b, 't1', 'old')).toBe(true);
    expect(await offline(b, 't2', 'old')).toBe(true);
    // Two hours pass (before the watcher connects: its keep alive would run out).
    await b.clock.advance(7200_000);
    const watcher = (await clients.mqtt({ clientId: 'watcher', username: 't1/carol', protocolVersion: 5 })).client;
    await subscribe(watcher, 'will/#', { qos: 1 });
    const wills = collect(watcher);
    const fresh = (await clients.mqtt({ ...persistent, clientId: 'fresh', username: 't1/bob' })).client;
    fresh.end(true);
    expect(await offline(b, 't1', 'fresh')).toBe(true);

    const url = '/api/v1/tenants/t1/sessions/expire';
    expect((await b.inject({ method: 'POST', url, payload: { olderThanSeconds: 86400 } })).json()).toEqual({ expired: 0 });
    expect(wills.messages).toEqual([]);
    const res = await b.http('POST', url, { token: API_TOKENS.t1, body: { olderThanSeconds: 3600 } });
    expect(res).toMatchObject({ status: 200, body: { expired: 1 } });
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1/sessions/old' })).statusCode).toBe(404);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1/sessions/fresh' })).statusCode).toBe(200);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t2/sessions/old' })).statusCode).toBe(200);
    expect((await wills.waitFor(1)).map((m) => m.payload.toString())).toEqual(['old-will']);
    // 0: every offline session of the tenant.
    expect((await b.inject({ method: 'POST', url, payload: { olderThanSeconds: 0 } })).json()).toEqual({ expired: 1 });
    expect(watcher.connected).toBe(true);
  });

  it('answers 400 for a bad body, 401, 403', async () => {
    const url = '/api/v1/tenants/t1/sessions/expire';
    for (const payload of [{}, { olderThanSeconds: -1 }, { olderThanSeconds: 'old' }, { olderThanSeconds: 1, all: true }]) {
      const res = await b.inject({ method: 'POST', url, payload });
      expect([payload, res.statusCode]).toEqual([payload, 400]);
    }
    expect((await b.inject({ method: 'POST', url, payload: { olderThanSeconds: 1 }, token: null })).statusCode).toBe(401);
    expect((await b.inject({ method: 'POST', url, payload: { olderThanSeconds: 1 }, token: API_TOKENS.t2 })).statusCode).toBe(403);
  });
});

describe("37 api sessions: the tenant's subscription settings and limits hold on behalf too", () => {
  let b: ApiBroker;
  const clients = withClients(() => b.port);
  beforeAll(async () => {
    b = await startApiBroker('', {
      settings: [
        'tenants:',
        '  lim:',
        '    MaxTopicFiltersPerInbox: 1',
        '    WildcardSubscriptionEnabled: false',
        '    SharedSubscriptionEnabled: false',
        '    SubscriptionIdentifierEnabled: false',
        '    MaximumQoS: 1',
        '',
      ].join('\n'),
    });
  });
  afterAll(() => b.stop());

  it('answers 409 naming the setting, caps the QoS at MaximumQoS', async () => {
    await clients.mqtt({ clientId: 'c', username: 'lim/alice', protocolVersion: 5 });
    const url = '/api/v1/tenants/lim/sessions/c/subscriptions';
    const refused: [Record<string, unknown>, string][] = [
      [{ filter: 'a/+', qos: 0 }, 'WildcardSubscriptionEnabled'],
      [{ filter: '$share/g/a', qos: 0 }, 'SharedSubscriptionEnabled'],
      [{ filter: 'a', qos: 0, subscriptionId: 3 }, 'SubscriptionIdentifierEnabled'],
    ];
    for (const [payload, setting] of refused) {
      const res = await b.inject({ method: 'POST', url, payload });
      expect([payload, res.statusCode, res.json().code]).toEqual([payload, 409, 'BIFRO_API_CONFLICT']);
      expect(res.json().message).toContain(setting);
    }
    expect((await b.inject({ method: 'POST', url, payload: { filter: 'a', qos: 2 } })).json()).toEqual({
      filter: 'a',
      qos: 1,
      replaced: false,
    });
    const full = await b.inject({ method: 'POST', url, payload: { filter: 'b', qos: 0 } });
    expect(full.statusCode).toBe(409);
    expect(full.json().message).toContain('MaxTopicFiltersPerInbox');
    // Replacing the one it has is no new filter.
    expect((await b.inject({ method: 'POST', url, payload: { filter: 'a', qos: 0 } })).json()).toEqual({
      filter: 'a',
      qos: 0,
      replaced: true,
    });
  });
});
