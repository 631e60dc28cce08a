import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IClientOptions } from 'mqtt';
import { disconnectOf, QUIET_MS, uniqueName, waitUntil, withClients, type ProtocolVersion } from '../support/mqtt-helpers';
import { FIXTURE_PLUGINS, REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * A persistent session belongs to the user who made it (docs/security.md § Sessions belong to
 * their user): another user of the same tenant connecting with its client id and Clean Start 0
 * gets a fresh session (Session Present 0, none of the stored subscriptions or messages), unless
 * the tenant's ResumeSessionsOfOtherUsers is true and access control allows the new user every
 * stored subscription. The fixture auth plugin `valid-auth` (password "secret" → tenant acme,
 * user = username) and @bifro/plugin-acl-file (`users/%u/#` for each user, `shared/#` for all)
 * guard a real broker; settings come from @bifro/plugin-settings-file, changed while it runs.
 */

jest.setTimeout(30_000);

const RULES = `
tenant acme
  allow all users/%u/#
  deny all users/#
  allow all shared/#
`;

let work: string;
let tb: TestBroker;

function setResume(allowed: boolean): Promise<boolean> {
  const from = tb.logs.length;
  writeFileSync(tb.settingsFile, `tenants:\n  acme:\n    ResumeSessionsOfOtherUsers: ${allowed}\n`);
  return waitUntil(
    () => tb.logs.slice(from).some((l) => String(l.msg).includes('reloaded: defaults unchanged; changed tenants: acme')),
    5000,
  );
}

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-session-owner-'));
  const pluginsDir = path.join(work, 'plugins');
  mkdirSync(pluginsDir);
  // Linked, not copied: their dependencies (yaml) resolve from the repository.
  for (const name of ['acl-file', 'settings-file']) {
    const dist = path.join(REPO, 'plugins', name, 'dist');
    if (!existsSync(dist)) throw new Error(`${dist} is missing: build first (npx tsc -b)`);
    symlinkSync(path.join(REPO, 'plugins', name), path.join(pluginsDir, name));
  }
  cpSync(path.join(FIXTURE_PLUGINS, 'valid-auth'), path.join(pluginsDir, 'valid-auth'), { recursive: true });
  const aclFile = path.join(work, 'acl.conf');
  writeFileSync(aclFile, RULES);
  tb = await startTestBroker('', {
    pluginsDir,
    settings: 'tenants:\n  acme:\n    ResumeSessionsOfOtherUsers: false\n',
    plugins: [
      '  auth:',
      "    - use: '@fixtures/valid-auth'",
      '      options: { tenantId: acme }',
      '  acl:',
      "    - use: '@bifro/plugin-acl-file'",
      `      options: { file: ${JSON.stringify(aclFile)}, pollMs: 100 }`,
    ].join('\n'),
  });
});

afterAll(async () => {
  await tb?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('a stored session and another user of the tenant', () => {
  const clients = withClients(() => tb.port);

  /** A connection of `user` with `clientId`, Clean Start 0 (v5: a 600 s session), collecting what it receives. */
  const as = (user: string, clientId: string, protocolVersion: ProtocolVersion = 5, more: IClientOptions = {}) =>
    clients.mqttCollecting({
      protocolVersion,
      protocolId: protocolVersion === 3 ? 'MQIsdp' : 'MQTT',
      clientId,
      username: user,
      password: 'secret',
      clean: false,
      reconnectPeriod: 0,
      ...(protocolVersion === 5 ? { properties: { sessionExpiryInterval: 600 } } : {}),
      ...more,
    });

  /** alice's offline session on `clientId`: subscribed to `filter`, one QoS 1 message queued for it. */
  async function storedSession(clientId: string, filter: string, topic: string, protocolVersion: ProtocolVersion, owner = 'alice') {
    const { client } = await as(owner, clientId, protocolVersion);
    await client.subscribeAsync(filter, { qos: 1 });
    await client.endAsync();
    const { client: publisher } = await as(owner, uniqueName('pub'));
    await publisher.publishAsync(topic, 'queued', { qos: 1 });
  }

  it.each([5, 4] as const)(
    'v%d: bob connecting with alice’s client id gets a fresh session, not her subscriptions or queued messages (default)',
    async (level) => {
      const id = uniqueName('alice-phone');
      await storedSession(id, 'users/alice/#', 'users/alice/inbox', level);
      const bob = await as('bob', id, level);
      expect(bob.connack.sessionPresent).toBe(false);
      const { client: alicePublisher } = await as('alice', uniqueName('alice-pub'));
      await alicePublisher.publishAsync('users/alice/inbox', 'live', { qos: 1 });
      expect(await bob.messages.settle(QUIET_MS)).toEqual([]);
      // The session bob made is his: alice coming back does not find hers either (it ended).
      await bob.client.endAsync();
      const alice = await as('alice', id, level);
      expect(alice.connack.sessionPresent).toBe(false);
      expect(await alice.messages.settle(QUIET_MS)).toEqual([]);
    },
  );

  it('the same user resumes as before: Session Present 1, the queued message delivered', async () => {
    const id = uniqueName('alice-tablet');
    await storedSession(id, 'users/alice/#', 'users/alice/inbox', 5);
    const alice = await as('alice', id);
    expect(alice.connack.sessionPresent).toBe(true);
    expect((await alice.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['queued']);
  });

  it('a connected alice is taken over (0x8E) and her session does not follow bob', async () => {
    const id = uniqueName('alice-live');
    const alice = await as('alice', id);
    await alice.client.subscribeAsync('users/alice/#', { qos: 1 });
    const taken = disconnectOf(alice.client);
    const bob = await as('bob', id);
    expect((await taken)?.reasonCode).toBe(0x8e);
    expect(bob.connack.sessionPresent).toBe(false);
    const { client: publisher } = await as('alice', uniqueName('alice-pub'));
    await publisher.publishAsync('users/alice/x', 'not for bob', { qos: 1 });
    expect(await bob.messages.settle(QUIET_MS)).toEqual([]);
  });

  it('alice’s pending will (delay 30 s) is published when bob takes her client id, not cancelled', async () => {
    const id = uniqueName('alice-will');
    const watcher = await as('alice', uniqueName('alice-watch'));
    await watcher.client.subscribeAsync('users/alice/status', { qos: 1 });
    const alice = await as('alice', id, 5, {
      will: { topic: 'users/alice/status', payload: Buffer.from('gone'), qos: 1, retain: false, properties: { willDelayInterval: 30 } },
    });
    alice.client.stream.destroy(); // no DISCONNECT: the will is due in 30 s
    await waitUntil(() => !alice.client.connected, 5000);
    expect(await watcher.messages.settle(QUIET_MS)).toEqual([]);
    await as('bob', id);
    expect((await watcher.messages.waitFor(1, 5000)).map((m) => m.payload.toString())).toEqual(['gone']);
  });

  describe('with ResumeSessionsOfOtherUsers true', () => {
    beforeAll(async () => expect(await setResume(true)).toBe(true));
    afterAll(async () => expect(await setResume(false)).toBe(true));

    it('dave resumes carol’s session when access control allows him every stored subscription', async () => {
      const id = uniqueName('shared-console');
      await storedSession(id, 'shared/#', 'shared/news', 5, 'carol');
      const dave = await as('dave', id);
      expect(dave.connack.sessionPresent).toBe(true);
      expect((await dave.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['queued']);
    });

    it('bob still gets a fresh session where a stored subscription (users/alice/#) is denied to him', async () => {
      const id = uniqueName('alice-laptop');
      await storedSession(id, 'users/alice/#', 'users/alice/inbox', 5);
      const bob = await as('bob', id);
      expect(bob.connack.sessionPresent).toBe(false);
      expect(await bob.messages.settle(QUIET_MS)).toEqual([]);
      expect(tb.logs.some((l) => String(l.msg).includes('not resumed by user bob: access control denies it a stored subscription'))).toBe(
        true,
      );
    });
  });
});
