import * as fs from 'node:fs';
import * as path from 'node:path';
import { testPluginContext } from '@bifro/spi/testing';
import plugin, { ACL_FILE_ERRORS, parseOptions } from '../src';
import { client, harness, makeTempDir, pub, removeTempDir, sleep, sub, waitFor, writeAtomic, type Harness } from './helpers';

const FILE = `
# everyone
allow subscribe $SYS/broker/#
deny all secret/#

tenant acme
  allow all shared/#
  deny publish shared/readonly/#
  allow publish sensors/%u/#
  allow subscribe sensors/#
  user alice
    allow publish shared/readonly/alice
    deny subscribe sensors/private/#
  client gw-*
    allow all gateways/%c/#
  client gw-1
    deny all gateways/gw-1/off
`;

describe('acl-file: decisions', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(FILE);
  });
  afterAll(() => h.dispose());

  it('global rules apply to every tenant', () => {
    expect(h.acl.checkPermission(client({ tenantId: 'zzz' }), sub('$SYS/broker/load'))).toBe('granted');
    expect(h.acl.checkPermission(client({ tenantId: 'zzz' }), pub('secret/x'))).toBe('denied');
    expect(h.acl.checkPermission(client({ tenantId: 'zzz' }), pub('shared/x'))).toBe('defer');
  });

  it('tenant rules apply to the tenant only, first match in the scope decides', () => {
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('shared/x'))).toBe('granted');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('shared/readonly/x'))).toBe('granted'); // allow all shared/# comes first
    expect(h.acl.checkPermission(client({ userId: 'bob', tenantId: 'other' }), pub('shared/x'))).toBe('defer');
  });

  it('%u gives each user their own topics', () => {
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('sensors/bob/t'))).toBe('granted');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('sensors/alice/t'))).toBe('defer');
    expect(h.acl.checkPermission(client({ userId: '+' }), pub('sensors/bob/t'))).toBe('defer');
  });

  it('a user scope comes before its tenant scope', () => {
    expect(h.acl.checkPermission(client({ userId: 'alice' }), sub('sensors/private/x'))).toBe('denied');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), sub('sensors/private/x'))).toBe('granted');
    // a deny cannot be dodged with a wider filter: sensors/# overlaps sensors/private/#
    expect(h.acl.checkPermission(client({ userId: 'alice' }), sub('sensors/#'))).toBe('denied');
  });

  it('the global scope comes after the tenant scopes (deny all secret/# still applies where no tenant rule matched)', () => {
    expect(h.acl.checkPermission(client(), pub('secret/x'))).toBe('denied');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), sub('#'))).toBe('denied');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), sub('shared/#'))).toBe('granted');
  });

  it('client globs and exact client ids, with %c', () => {
    expect(h.acl.checkPermission(client({ clientId: 'gw-7' }), pub('gateways/gw-7/on'))).toBe('granted');
    expect(h.acl.checkPermission(client({ clientId: 'gw-7' }), pub('gateways/gw-8/on'))).toBe('defer');
    expect(h.acl.checkPermission(client({ clientId: 'gw-1' }), pub('gateways/gw-1/off'))).toBe('denied');
    expect(h.acl.checkPermission(client({ clientId: 'gw-1' }), pub('gateways/gw-1/on'))).toBe('granted');
    expect(h.acl.checkPermission(client({ clientId: 'x-gw-7' }), pub('gateways/x-gw-7/on'))).toBe('defer');
  });

  it('connect and unsubscribe are granted by default', () => {
    expect(h.acl.checkPermission(client({ tenantId: 'nobody' }), { type: 'connect' })).toBe('granted');
    expect(h.acl.checkPermission(client(), { type: 'unsubscribe', filter: 'secret/#' })).toBe('granted');
  });
});

describe('acl-file: substituted ids that are not one topic level', () => {
  // The README's per-device pattern; the devices/ and users/ trees are denied otherwise.
  const RULES = `
allow all clients/%c/#
allow all users/%u/#
deny all clients/#
deny all users/#
tenant acme
  client gw-*
    allow all gateways/%c/#
`;
  let h: Harness;
  let alone: Harness;
  beforeAll(async () => {
    h = await harness(RULES);
    alone = await harness('allow all clients/%c/#\n', { otherwise: 'deny' });
  });
  afterAll(async () => {
    await h.dispose();
    await alone.dispose();
  });

  it('a client id with / cannot read or publish into the subtree of the id before its /', () => {
    const telemetry = client({ clientId: 'sensor1/telemetry' });
    expect(h.acl.checkPermission(telemetry, sub('clients/sensor1/telemetry/temp'))).toBe('denied');
    expect(h.acl.checkPermission(telemetry, sub('clients/sensor1/#'))).toBe('denied');
    expect(h.acl.checkPermission(telemetry, pub('clients/sensor1/telemetry/temp'))).toBe('denied');
    const cmd = client({ clientId: 'sensor1/cmd' });
    expect(h.acl.checkPermission(cmd, pub('clients/sensor1/cmd'))).toBe('denied');
    expect(h.acl.checkPermission(cmd, pub('clients/sensor1/cmd/reboot', true))).toBe('denied');
    // the id itself still owns its subtree
    expect(h.acl.checkPermission(client({ clientId: 'sensor1' }), pub('clients/sensor1/cmd/reboot'))).toBe('granted');
    // with the rule alone, the answer for what no rule decides applies
    expect(alone.acl.checkPermission(telemetry, sub('clients/sensor1/telemetry/temp'))).toBe('denied');
    expect(alone.acl.checkPermission(cmd, pub('clients/sensor1/cmd'))).toBe('denied');
    expect(alone.acl.checkPermission(client({ clientId: 'sensor1' }), pub('clients/sensor1/cmd'))).toBe('granted');
  });

  it('user ids and client ids with /, +, #, U+0000 or nothing match no %u / %c rule, in client glob scopes too', () => {
    for (const userId of ['bob/x', '+', '#', 'a\u0000b', '']) {
      expect(h.acl.checkPermission(client({ userId }), pub(`users/${userId}/x`))).toBe('denied');
      expect(h.acl.checkPermission(client({ userId }), sub('users/+/x'))).toBe('denied');
    }
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('users/bob/x'))).toBe('granted');
    // gw-* matches gw-1/x, but %c cannot stand for it in one level: gw-1's topics stay out of reach
    expect(h.acl.checkPermission(client({ clientId: 'gw-1/x' }), pub('gateways/gw-1/x/on'))).toBe('defer');
    expect(h.acl.checkPermission(client({ clientId: 'gw-1' }), pub('gateways/gw-1/x/on'))).toBe('granted');
  });
});

describe('acl-file: retain across scopes', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness('deny retain nokeep/#\nallow retain #\ntenant acme\n  allow publish #\n  user alice\n    deny retain #\n');
  });
  afterAll(() => h.dispose());

  it('a retained publish needs the publish question and the retain question granted, each answered through the scopes', () => {
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('a', true))).toBe('granted');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('nokeep/a', true))).toBe('denied');
    expect(h.acl.checkPermission(client({ userId: 'bob' }), pub('nokeep/a', false))).toBe('granted');
    expect(h.acl.checkPermission(client({ userId: 'alice' }), pub('a', true))).toBe('denied');
    expect(h.acl.checkPermission(client({ userId: 'alice' }), pub('a', false))).toBe('granted');
    expect(h.acl.checkPermission(client({ tenantId: 'other' }), pub('a', true))).toBe('defer');
  });
});

describe('acl-file: options', () => {
  it('otherwise, connect and unsubscribe change the answers nothing decides', async () => {
    const h = await harness('allow publish a\n', { otherwise: 'deny', connect: 'defer', unsubscribe: 'defer' });
    try {
      expect(h.acl.checkPermission(client(), pub('a'))).toBe('granted');
      expect(h.acl.checkPermission(client(), pub('b'))).toBe('denied');
      expect(h.acl.checkPermission(client(), pub('a', true))).toBe('denied');
      expect(h.acl.checkPermission(client(), sub('a'))).toBe('denied');
      expect(h.acl.checkPermission(client(), { type: 'connect' })).toBe('defer');
      expect(h.acl.checkPermission(client(), { type: 'unsubscribe', filter: 'a' })).toBe('defer');
    } finally {
      await h.dispose();
    }
    const g = await harness('deny publish a\n', { otherwise: 'grant' });
    try {
      expect(g.acl.checkPermission(client(), pub('a'))).toBe('denied');
      expect(g.acl.checkPermission(client(), pub('b', true))).toBe('granted');
    } finally {
      await g.dispose();
    }
  });

  it('defaults: acl.conf next to the config, otherwise defer, connect and unsubscribe grant, poll 500 ms, watch', () => {
    expect(parseOptions({}, '/etc/bifro')).toEqual({
      file: path.resolve('/etc/bifro', 'acl.conf'),
      otherwise: 'defer',
      connect: 'grant',
      unsubscribe: 'grant',
      pollMs: 500,
      watch: true,
      debounceMs: 100,
    });
    expect(parseOptions({ file: '/abs/x.acl' }, '/etc/bifro').file).toBe('/abs/x.acl');
  });

  const bad: Array<[options: Record<string, unknown>, message: string]> = [
    [{ file: 3 }, 'options.file must be a non-empty path (got 3)'],
    [{ file: ' ' }, 'options.file must be a non-empty path'],
    [{ otherwise: 'allow' }, 'options.otherwise must be one of "defer", "deny", "grant" (got "allow")'],
    [{ connect: true }, 'options.connect must be one of "grant", "defer" (got true)'],
    [{ unsubscribe: 'deny' }, 'options.unsubscribe must be one of "grant", "defer"'],
    [{ pollMs: 5 }, 'options.pollMs must be an integer from 10 to 1800 (got 5)'],
    [{ pollMs: 1.5 }, 'options.pollMs must be an integer'],
    [{ watch: 'yes' }, 'options.watch must be true or false (got "yes")'],
    [{ fiel: 'acl.conf' }, 'unknown option options.fiel'],
  ];
  it.each(bad)('the factory refuses %j with a coded error naming the key', (options, message) => {
    let thrown: unknown;
    try {
      plugin.acl(testPluginContext({ options }));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Error);
    const e = thrown as Error & { code?: string };
    expect(e.message.startsWith('BIFRO_ACL_FILE_OPTIONS_INVALID: @bifro/plugin-acl-file: ')).toBe(true);
    expect(e.message).toContain(message);
    expect(e.code).toBe('BIFRO_ACL_FILE_OPTIONS_INVALID');
    expect(Object.keys(ACL_FILE_ERRORS)).toContain(e.code);
  });

  it('declares its codes with the BIFRO_ACL_FILE_ prefix', () => {
    expect(plugin.errors).toBe(ACL_FILE_ERRORS);
    for (const code of Object.keys(ACL_FILE_ERRORS)) expect(code.startsWith('BIFRO_ACL_FILE_')).toBe(true);
  });
});

describe('acl-file: init', () => {
  it('a missing file fails init with BIFRO_ACL_FILE_UNREADABLE', async () => {
    await expect(harness(undefined)).rejects.toMatchObject({
      code: 'BIFRO_ACL_FILE_UNREADABLE',
      message: expect.stringMatching(/^BIFRO_ACL_FILE_UNREADABLE: @bifro\/plugin-acl-file: cannot read the ACL file .*acl\.conf/),
    });
  });

  it('an invalid file fails init with BIFRO_ACL_FILE_INVALID and file:line', async () => {
    await expect(harness('allow publish a\ntenant acme\n  allow publsh b\n')).rejects.toMatchObject({
      code: 'BIFRO_ACL_FILE_INVALID',
      message: expect.stringMatching(/^BIFRO_ACL_FILE_INVALID: @bifro\/plugin-acl-file: .*acl\.conf:3: unknown action "publsh"/),
    });
  });

  it('logs what it loaded', async () => {
    const h = await harness(FILE);
    try {
      expect(h.lines('info').map((l) => l.msg)).toContainEqual(
        expect.stringMatching(/acl file .*acl\.conf loaded: 10 rule\(s\) in 5 scope\(s\)/),
      );
    } finally {
      await h.dispose();
    }
  });
});

describe('acl-file: reload', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await harness('tenant acme\n  allow publish a\n', { pollMs: 50 });
  });
  afterEach(() => h.dispose());

  it('a change applies without a restart (new rules, cached scopes dropped)', async () => {
    const c = client();
    expect(h.acl.checkPermission(c, pub('a'))).toBe('granted');
    expect(h.acl.checkPermission(c, pub('b'))).toBe('defer');
    writeAtomic(h.file, 'tenant acme\n  user alice\n    allow publish b\n');
    await waitFor(() => h.acl.checkPermission(c, pub('b')) === 'granted', 3000, 'the new rule');
    expect(h.acl.checkPermission(c, pub('a'))).toBe('defer');
    expect(h.lines('info').map((l) => l.msg)).toContainEqual(expect.stringMatching(/reloaded: 1 rule\(s\) in 1 scope\(s\)/));
  });

  it('an invalid file keeps the previous rules and logs file:line: message; fixing it applies', async () => {
    const c = client();
    fs.writeFileSync(h.file, 'tenant acme\n  allow publish b\n  allow publish c/#/d\n');
    await waitFor(() => h.lines('warn').some((l) => l.msg.includes('is invalid')), 3000, 'the warning');
    expect(h.lines('warn').map((l) => l.msg)).toContain(`${h.file}:3: topic "c/#/d": "#" must be the last level (level 2 of "c/#/d")`);
    expect(h.lines('warn').find((l) => l.msg.includes('is invalid'))?.fields).toMatchObject({
      code: 'BIFRO_ACL_FILE_INVALID',
      file: h.file,
    });
    expect(h.acl.checkPermission(c, pub('a'))).toBe('granted');
    expect(h.acl.checkPermission(c, pub('b'))).toBe('defer');
    fs.writeFileSync(h.file, 'tenant acme\n  allow publish b\n');
    await waitFor(() => h.acl.checkPermission(c, pub('b')) === 'granted', 3000, 'the fixed file');
    expect(h.acl.checkPermission(c, pub('a'))).toBe('defer');
  });

  it('a removed file keeps the previous rules (and says so)', async () => {
    fs.rmSync(h.file);
    await waitFor(() => h.lines('warn').some((l) => l.msg.includes('cannot be read')), 3000, 'the warning');
    expect(h.acl.checkPermission(client(), pub('a'))).toBe('granted');
  });

  it('after close, changes are not read any more', async () => {
    h.acl.close();
    writeAtomic(h.file, 'tenant acme\n  allow publish b\n');
    await sleep(400);
    expect(h.acl.checkPermission(client(), pub('b'))).toBe('defer');
  });
});

describe('acl-file: many rules', () => {
  it('compiles 10,000 rules per tenant scope and answers from the index', async () => {
    const dir = makeTempDir();
    try {
      const lines = ['tenant acme'];
      for (let i = 0; i < 10_000; i++) lines.push(`  allow publish dev${i}/+/state`);
      fs.writeFileSync(path.join(dir, 'acl.conf'), lines.join('\n'));
      const acl = await plugin.acl(testPluginContext({ configDir: dir, options: { watch: false } }));
      await acl.init?.();
      try {
        const c = client();
        expect(acl.checkPermission(c, pub('dev9999/x/state'))).toBe('granted');
        expect(acl.checkPermission(c, pub('dev10000/x/state'))).toBe('defer');
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < 100_000; i++) acl.checkPermission(c, pub(`dev${i % 10_000}/x/state`));
        const ns = Number(process.hrtime.bigint() - t0) / 100_000;
        process.stdout.write(`acl-file: 10,000 rules in one scope, ${ns.toFixed(0)} ns per publish check\n`);
      } finally {
        await acl.close?.();
      }
    } finally {
      removeTempDir(dir);
    }
  });
});
