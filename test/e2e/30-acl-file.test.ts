import { cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { MqttClient } from 'mqtt';
import type { Packet } from 'mqtt-packet';
import {
  collect,
  expectPacket,
  uniqueName,
  waitUntil,
  withClients,
  QUIET_MS,
  type MessageCollector,
  type ProtocolVersion,
} from '../support/mqtt-helpers';
import { FIXTURE_PLUGINS, REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * @bifro/plugin-acl-file in a real broker, with MQTT.js and raw clients: the fixture auth plugin
 * `valid-auth` (password "secret" → tenant acme, user = username) in front, acl-file first in the
 * ACL chain and the fixture `valid-acl` after it (grants everything but `forbidden/`, which it
 * denies). The plugin is loaded from its build (`npx tsc -b` first). A second broker puts the
 * fixture `acl-errors` (failing for some topics) in front of acl-file, to check that a plugin that
 * cannot decide denies by default instead of skipping the file's rules.
 */

jest.setTimeout(60000);

const PASSWORD = 'secret';

/** The rules every test starts from; the reload tests write other versions and put this one back. */
const BASE_RULES = `
# global
deny publish admin/#

tenant acme
  deny retain nokeep/#
  allow all users/%u/#
  deny all users/#
  allow all devices/%c/#
  deny all devices/#
  allow all forbidden/override
  user alice
    allow subscribe users/#
`;

let work: string;
let aclFile: string;
let tb: TestBroker;

function writeRules(text: string): void {
  const tmp = `${aclFile}.${Date.now()}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, aclFile);
}

/** Waits for the log line of the plugin that says the file was reloaded, after `from` lines. */
async function reloaded(from: number): Promise<void> {
  const ok = await waitUntil(() => tb.logs.slice(from).some((l) => String(l.msg).startsWith(`acl file ${aclFile} reloaded`)), 5000);
  expect(ok).toBe(true);
}

beforeAll(async () => {
  const dist = path.join(REPO, 'plugins', 'acl-file', 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error(`${dist} is missing: build first (npx tsc -b)`);
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-acl-file-'));
  const pluginsDir = path.join(work, 'plugins');
  mkdirSync(path.join(pluginsDir, 'acl-file'), { recursive: true });
  cpSync(path.join(REPO, 'plugins', 'acl-file', 'package.json'), path.join(pluginsDir, 'acl-file', 'package.json'));
  cpSync(path.join(REPO, 'plugins', 'acl-file', 'dist'), path.join(pluginsDir, 'acl-file', 'dist'), { recursive: true });
  for (const fixture of ['valid-auth', 'valid-acl', 'acl-errors'])
    cpSync(path.join(FIXTURE_PLUGINS, fixture), path.join(pluginsDir, fixture), { recursive: true });
  aclFile = path.join(work, 'acl.conf');
  writeFileSync(aclFile, BASE_RULES);
  tb = await startTestBroker(
    [
      'plugins:',
      '  auth:',
      "    - use: '@fixtures/valid-auth'",
      '      options: { tenantId: acme }',
      '  acl:',
      "    - use: '@bifro/plugin-acl-file'",
      `      options: { file: ${JSON.stringify(aclFile)}, pollMs: 100 }`,
      "    - use: '@fixtures/valid-acl'",
    ].join('\n'),
    { pluginsDir },
  );
});

afterAll(async () => {
  await tb?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('acl-file in a broker', () => {
  const clients = withClients(() => tb.port);

  async function user(name: string, protocolVersion: ProtocolVersion = 5, clientId = uniqueName(name)): Promise<MqttClient> {
    const protocolId = protocolVersion === 3 ? 'MQIsdp' : 'MQTT';
    return (await clients.mqtt({ protocolVersion, protocolId, clientId, username: name, password: PASSWORD })).client;
  }

  /** A client subscribed to `filter` (granted), collecting what it receives. */
  async function listener(name: string, filter: string): Promise<{ client: MqttClient; messages: MessageCollector }> {
    const client = await user(name);
    const messages = collect(client);
    await client.subscribeAsync(filter, { qos: 1 });
    return { client, messages };
  }

  /** The SUBACK codes a raw client gets for `filters` in one SUBSCRIBE. */
  async function subackCodes(name: string, protocolVersion: ProtocolVersion, filters: string[]): Promise<number[]> {
    const s = await clients.raw({ protocolVersion, clientId: uniqueName(name), username: name, password: Buffer.from(PASSWORD) });
    s.send({ cmd: 'subscribe', messageId: 7, subscriptions: filters.map((topic) => ({ topic, qos: 1 })) } as Packet);
    return (await expectPacket(s.raw, 'suback')).granted as number[];
  }

  it('v5: a denied publish gets PUBACK 0x87, is not delivered, and the connection goes on', async () => {
    const watcher = await listener('root', 'admin/#');
    const bob = await user('bob');
    await expect(bob.publishAsync('admin/reboot', 'no', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await bob.publishAsync('admin/quiet', 'no', { qos: 0 });
    await bob.publishAsync('open/after', 'yes', { qos: 1 });
    expect((await watcher.messages.settle(QUIET_MS)).map((m) => m.topic)).toEqual([]);
    expect(bob.connected).toBe(true);
    // the chain still grants the rest to the same client
    const open = await listener('carol', 'open/#');
    await bob.publishAsync('open/x', 'yes', { qos: 1 });
    expect((await open.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['yes']);
  });

  it.each([3, 4] as const)(
    'v3 (level %d): a denied publish is acknowledged and dropped; the connection stays open (Bifro does not close)',
    async (level) => {
      const watcher = await listener('root', 'admin/#');
      const bob = await user('bob', level);
      await expect(bob.publishAsync('admin/reboot', 'no', { qos: 1 })).resolves.toBeDefined();
      await bob.publishAsync('admin/reboot', 'no', { qos: 0 });
      expect(await watcher.messages.settle(QUIET_MS)).toEqual([]);
      expect(bob.connected).toBe(true);
      const open = await listener('carol', 'open/#');
      await bob.publishAsync('open/v3', 'still here', { qos: 1 });
      expect((await open.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['still here']);
    },
  );

  it('v3.1.1 raw: the PUBACK of a denied publish carries nothing but the packet id', async () => {
    const s = await clients.raw({ protocolVersion: 4, clientId: uniqueName('bob'), username: 'bob', password: Buffer.from(PASSWORD) });
    s.send({ cmd: 'publish', topic: 'admin/x', payload: Buffer.from('x'), qos: 1, messageId: 11, retain: false, dup: false } as Packet);
    const ack = await expectPacket(s.raw, 'puback');
    expect(ack.messageId).toBe(11);
  });

  it('a denied subscribe gets SUBACK 0x87 (v5) / 0x80 (v3) for that filter only', async () => {
    expect(await subackCodes('bob', 5, ['users/bob/#', 'users/alice/#', 'users/+/x', '#'])).toEqual([1, 0x87, 0x87, 0x87]);
    expect(await subackCodes('bob', 4, ['users/bob/#', 'users/alice/#'])).toEqual([1, 0x80]);
    expect(await subackCodes('bob', 3, ['users/alice/#', 'open/#'])).toEqual([0x80, 1]);
    const bob = await user('bob');
    await expect(bob.subscribeAsync('users/alice/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    const bob3 = await user('bob', 4);
    await expect(bob3.subscribeAsync('users/alice/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x80] } });
    // a shared subscription is checked on its inner filter
    expect(await subackCodes('bob', 5, ['$share/g/users/alice/#', '$share/g/users/bob/#'])).toEqual([0x87, 1]);
  });

  it('%u and %c: each user and each device gets its own topics', async () => {
    const alice = await listener('alice', 'users/#');
    const bob = await user('bob');
    await bob.publishAsync('users/bob/temp', '21', { qos: 1 });
    await expect(bob.publishAsync('users/alice/temp', 'spoof', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    const dave = await user('dave');
    await dave.publishAsync('users/dave/temp', '19', { qos: 1 });
    expect((await alice.messages.waitFor(2)).map((m) => `${m.topic}=${m.payload.toString()}`).sort()).toEqual([
      'users/bob/temp=21',
      'users/dave/temp=19',
    ]);
    expect((await alice.messages.settle(QUIET_MS)).length).toBe(2);

    const deviceId = uniqueName('dev');
    const device = await user('bob', 5, deviceId);
    await device.publishAsync(`devices/${deviceId}/state`, 'on', { qos: 1 });
    await expect(device.publishAsync('devices/another-device/state', 'on', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await device.subscribeAsync(`devices/${deviceId}/cmd`, { qos: 1 });
    await expect(device.subscribeAsync('devices/+/cmd', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
  });

  it('deny retain: the retained publish is refused (v5 PUBACK 0x87) and nothing is retained; the plain publish passes', async () => {
    const bob = await user('bob');
    const topic = `nokeep/${uniqueName('r')}`;
    await expect(bob.publishAsync(topic, 'kept?', { qos: 1, retain: true })).rejects.toMatchObject({ code: 0x87 });
    const live = await listener('carol', topic);
    await bob.publishAsync(topic, 'live', { qos: 1 });
    expect((await live.messages.waitFor(1)).map((m) => [m.payload.toString(), m.packet.retain])).toEqual([['live', false]]);
    const late = await listener('erin', topic);
    expect(await late.messages.settle(QUIET_MS)).toEqual([]);
    // a retained publish both questions grant is retained
    const own = `users/bob/${uniqueName('state')}`;
    await bob.publishAsync(own, 'kept', { qos: 1, retain: true });
    const reader = await listener('alice', own);
    expect((await reader.messages.waitFor(1)).map((m) => [m.payload.toString(), m.packet.retain])).toEqual([['kept', true]]);
  });

  it('a chain: acl-file decides its topics, defers the rest to the next plugin', async () => {
    const bob = await user('bob');
    // not in the file: acl-file defers, valid-acl grants
    await expect(bob.publishAsync('open/chain', 'x', { qos: 1 })).resolves.toBeDefined();
    // not in the file: acl-file defers, valid-acl denies forbidden/
    await expect(bob.publishAsync('forbidden/x', 'x', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await expect(bob.subscribeAsync('forbidden/x', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    // in the file: acl-file grants before valid-acl is asked
    await expect(bob.publishAsync('forbidden/override', 'x', { qos: 1 })).resolves.toBeDefined();
    // unsubscribe is granted by acl-file
    await expect(bob.unsubscribeAsync('users/alice/#')).resolves.toBeDefined();
  });

  it('a client id with / cannot reach the subtree of the id before it (devices/%c/#)', async () => {
    const victimId = uniqueName('sensor');
    const victim = await user('bob', 5, victimId);
    const victimMessages = collect(victim);
    await victim.subscribeAsync(`devices/${victimId}/#`, { qos: 1 });
    // "<victim>/cmd" would own devices/<victim>/cmd/# if %c spanned levels: it must own nothing
    const cmd = await user('bob', 5, `${victimId}/cmd`);
    await expect(cmd.publishAsync(`devices/${victimId}/cmd`, 'reboot', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await expect(cmd.publishAsync(`devices/${victimId}/cmd/reboot`, 'now', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await cmd.publishAsync(`devices/${victimId}/cmd/quiet`, 'qos0', { qos: 0 });
    expect(await victimMessages.settle(QUIET_MS)).toEqual([]);
    // "<victim>/telemetry" cannot read the victim's telemetry, with either protocol version
    const telemetry = await user('bob', 5, `${victimId}/telemetry`);
    await expect(telemetry.subscribeAsync(`devices/${victimId}/telemetry/temp`, { qos: 1 })).rejects.toMatchObject({
      packet: { granted: [0x87] },
    });
    await expect(telemetry.subscribeAsync(`devices/${victimId}/telemetry/#`, { qos: 1 })).rejects.toMatchObject({
      packet: { granted: [0x87] },
    });
    const telemetry4 = await user('bob', 4, `${victimId}/telemetry/v4`);
    await expect(telemetry4.subscribeAsync(`devices/${victimId}/telemetry/v4/#`, { qos: 1 })).rejects.toMatchObject({
      packet: { granted: [0x80] },
    });
    // the victim still owns its subtree
    await victim.publishAsync(`devices/${victimId}/telemetry/temp`, '21', { qos: 1 });
    expect((await victimMessages.waitFor(1)).map((m) => m.topic)).toEqual([`devices/${victimId}/telemetry/temp`]);
  });

  it('a user id with / cannot reach the subtree of the user before it (users/%u/#)', async () => {
    const bob = await listener('bob', 'users/bob/admin/#'); // not users/bob/#: an earlier test retained a message there
    const spoof = await user('bob/admin');
    await expect(spoof.publishAsync('users/bob/admin/x', 'spoof', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await expect(spoof.subscribeAsync('users/bob/admin/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    expect(await bob.messages.settle(QUIET_MS)).toEqual([]);
  });

  it.each(['+', '#', 'pump+', 'pump#'])('a client id %j is no wildcard: it owns no devices/ topic', async (clientId) => {
    const device = await user('bob', 5, clientId);
    await expect(device.subscribeAsync('devices/+/state', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    await expect(device.subscribeAsync('devices/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    await expect(device.publishAsync('devices/other/state', 'on', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await expect(device.publishAsync('devices/pump/state', 'on', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
  });

  describe('reload', () => {
    afterEach(async () => {
      const from = tb.logs.length;
      writeRules(BASE_RULES);
      await reloaded(from);
    });

    it('a file change grants a new rule to connected clients without a restart', async () => {
      const bob = await user('bob');
      await expect(bob.publishAsync('forbidden/new', 'x', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
      const from = tb.logs.length;
      writeRules(`${BASE_RULES}\ntenant acme\n  allow publish forbidden/new\n`);
      await reloaded(from);
      await expect(bob.publishAsync('forbidden/new', 'x', { qos: 1 })).resolves.toBeDefined();
      const fresh = await user('frank');
      await expect(fresh.publishAsync('forbidden/new', 'x', { qos: 1 })).resolves.toBeDefined();
    });

    it('a broken file is logged with file:line and the previous rules stay; other clients are unaffected', async () => {
      const watcher = await listener('root', 'admin/#');
      const bob = await user('bob');
      const from = tb.logs.length;
      writeRules('tenant acme\n  allow all admin/#\n  allow publsh forbidden/new\n');
      const line = `${aclFile}:3: unknown action "publsh" (expected publish, subscribe, retain or all)`;
      expect(await waitUntil(() => tb.logs.slice(from).some((l) => l.msg === line), 5000)).toBe(true);
      expect(tb.logs.slice(from).find((l) => String(l.msg).includes('is invalid'))).toMatchObject({ code: 'BIFRO_ACL_FILE_INVALID' });
      // the old rules: admin/ still denied, users/%u still granted
      await expect(bob.publishAsync('admin/x', 'x', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
      await expect(bob.publishAsync('users/bob/x', 'x', { qos: 1 })).resolves.toBeDefined();
      expect(await watcher.messages.settle(QUIET_MS)).toEqual([]);
      const other = await user('gina');
      await expect(other.publishAsync('users/gina/x', 'x', { qos: 1 })).resolves.toBeDefined();
      expect(bob.connected && watcher.client.connected).toBe(true);
    });
  });
});

describe('a failing ACL plugin in front of acl-file', () => {
  let failing: TestBroker;
  const clients = withClients(() => failing.port);

  beforeAll(async () => {
    const file = path.join(work, 'secret.acl');
    writeFileSync(file, ['tenant acme', '  user root', '    allow subscribe secret/#', 'global', '  deny all secret/#', ''].join('\n'));
    failing = await startTestBroker(
      [
        'plugins:',
        '  callTimeoutMs: 300',
        '  auth:',
        "    - use: '@fixtures/valid-auth'",
        '      options: { tenantId: acme }',
        '  acl:',
        "    - use: '@fixtures/acl-errors'",
        "      options: { byPrefix: { 'secret/throw/': throw, 'secret/hang/': hang, 'secret/error/': error } }",
        "    - use: '@bifro/plugin-acl-file'",
        `      options: { file: ${JSON.stringify(file)} }`,
        "    - use: '@fixtures/valid-acl'",
      ].join('\n'),
      { pluginsDir: path.join(work, 'plugins') },
    );
  });
  afterAll(() => failing?.stop());

  async function user(name: string, protocolVersion: ProtocolVersion = 5): Promise<MqttClient> {
    const protocolId = protocolVersion === 3 ? 'MQIsdp' : 'MQTT';
    return (await clients.mqtt({ protocolVersion, protocolId, clientId: uniqueName(name), username: name, password: PASSWORD })).client;
  }

  it.each(['throw', 'hang', 'error'])(
    'a plugin that fails (%s) denies by default: the file rule denying secret/# is not skipped',
    async (mode) => {
      const root = await user('root');
      const seen = collect(root);
      await root.subscribeAsync('secret/#', { qos: 1 });
      const bob = await user('bob');
      await expect(bob.publishAsync(`secret/${mode}/x`, 'leak', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
      await expect(bob.subscribeAsync(`secret/${mode}/#`, { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
      const bob4 = await user('bob', 4);
      await expect(bob4.subscribeAsync(`secret/${mode}/#`, { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x80] } });
      await bob4.publishAsync(`secret/${mode}/v4`, 'leak', { qos: 1 });
      expect(await seen.settle(QUIET_MS)).toEqual([]);
      // the chain still works for what the failing plugin defers
      await expect(bob.publishAsync('open/x', 'ok', { qos: 1 })).resolves.toBeDefined();
      await expect(bob.publishAsync('secret/other', 'no', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
      expect(bob.connected && bob4.connected).toBe(true);
    },
  );

  it('logs the first failure of an episode with the decision', async () => {
    const bob = await user('bob');
    await expect(bob.publishAsync('secret/throw/log', 'x', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    const line = failing.logs.find(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('access control plugin @fixtures/acl-errors threw or rejected'),
    );
    expect(line).toMatchObject({
      level: 40,
      msg: 'access control plugin @fixtures/acl-errors threw or rejected: publish denied (fail closed: ByPassPermCheckError is false for tenant acme)',
      plugin: '@fixtures/acl-errors',
      reason: 'error',
      granted: false,
    });
  });
});
