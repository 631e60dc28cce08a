import * as fs from 'node:fs';
import * as path from 'node:path';
import { testPluginContext } from '@bifro/spi/testing';
import plugin from '../src';
import { parseOptions } from '../src/options';
import { harness, sleep, waitFor, writeAtomic, type Harness } from './helpers';

const BASE = `
defaults:        # apply to every tenant
  MaxTopicLevels: 16
tenants:
  acme:
    MaximumQoS: 1
    SessionInboxSize: 500
  beta:
    RetainEnabled: false
`;

/** How long a change may take to apply (the requirement is 2 s). */
const APPLY_MS = 2000;

let open: Harness[] = [];

async function start(text: string | undefined, options: Record<string, unknown> = {}): Promise<Harness> {
  const h = await harness(text, options);
  open.push(h);
  return h;
}

afterEach(async () => {
  await Promise.all(open.map((h) => h.dispose()));
  open = [];
});

/** Waits for a warning whose message contains every fragment. */
async function warned(h: Harness, ...fragments: string[]): Promise<string> {
  const find = (): string | undefined => h.lines('warn').find((l) => fragments.every((f) => l.msg.includes(f)))?.msg;
  await waitFor(() => find() !== undefined, APPLY_MS, `a warning with ${fragments.join(', ')}`);
  return find()!;
}

describe('settings-file: loading', () => {
  it('reads defaults and tenant overrides: tenant, then defaults, then undefined', async () => {
    const h = await start(BASE);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
    expect(h.provider.provide('SessionInboxSize', 'acme')).toBe(500);
    expect(h.provider.provide('MaxTopicLevels', 'acme')).toBe(16);
    expect(h.provider.provide('RetainEnabled', 'beta')).toBe(false);
    expect(h.provider.provide('MaximumQoS', 'beta')).toBeUndefined();
    expect(h.provider.provide('MaxTopicLevels', 'other')).toBe(16);
    expect(h.provider.provide('MaximumQoS', 'other')).toBeUndefined();
    expect(h.lines('warn')).toEqual([]);
    expect(h.lines('info').some((l) => l.msg.includes('loaded') && l.msg.includes(h.file))).toBe(true);
  });

  it('a tenant override wins over the defaults section, even when it is false or 0', async () => {
    const h = await start(
      'defaults:\n  RetainEnabled: true\n  MaxTopicAlias: 10\ntenants:\n  t:\n    RetainEnabled: false\n    MaxTopicAlias: 0\n',
    );
    expect(h.provider.provide('RetainEnabled', 't')).toBe(false);
    expect(h.provider.provide('MaxTopicAlias', 't')).toBe(0);
    expect(h.provider.provide('MaxTopicAlias', 'u')).toBe(10);
  });

  it('resolves the file option against the config folder and accepts an absolute path', async () => {
    const h = await start(undefined, { file: 'custom/tenants.yaml' });
    expect(h.lines('info').some((l) => l.msg.includes(path.join(h.dir, 'custom', 'tenants.yaml')))).toBe(true);
    expect(parseOptions({ file: '/etc/bifro/s.yml' }, '/conf').file).toBe(path.resolve('/etc/bifro/s.yml'));
    expect(parseOptions({}, '/conf')).toMatchObject({
      file: path.resolve('/conf', 'settings.yml'),
      pollMs: 500,
      missingOk: true,
      watch: true,
    });
  });

  it('an empty file or empty sections mean registry defaults, without warnings', async () => {
    const h = await start('# nothing yet\ndefaults:\ntenants:\n  acme:\n');
    expect(h.provider.provide('MaximumQoS', 'acme')).toBeUndefined();
    expect(h.lines('warn')).toEqual([]);
  });

  it('a missing file means undefined everywhere, with an info line', async () => {
    const h = await start(undefined);
    for (const tenant of ['acme', 'default', '']) {
      expect(h.provider.provide('MaximumQoS', tenant)).toBeUndefined();
      expect(h.provider.provide('RetainEnabled', tenant)).toBeUndefined();
    }
    expect(h.lines('info').some((l) => l.msg.includes('not found') && l.msg.includes(h.file))).toBe(true);
    expect(h.lines('warn')).toEqual([]);
  });

  it('a missing file fails init when missingOk is false', async () => {
    await expect(harness(undefined, { missingOk: false })).rejects.toThrow(/does not exist/);
  });

  it('a file created after the start is picked up', async () => {
    const h = await start(undefined);
    fs.writeFileSync(h.file, 'tenants:\n  acme:\n    MaximumQoS: 0\n');
    await waitFor(() => h.changes.length > 0, APPLY_MS, 'a change');
    expect(h.changes).toEqual([{ tenantId: 'acme' }]);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(0);
  });

  it('rejects bad options, naming them', () => {
    const make = (options: Record<string, unknown>): unknown => plugin.settings!(testPluginContext({ options }));
    expect(() => make({ pollMs: 5 })).toThrow(/pollMs/);
    expect(() => make({ pollMs: 5000 })).toThrow(/pollMs/);
    expect(() => make({ pollMs: '500' })).toThrow(/pollMs/);
    expect(() => make({ missingOk: 'yes' })).toThrow(/missingOk/);
    expect(() => make({ watch: 1 })).toThrow(/watch/);
    expect(() => make({ file: '' })).toThrow(/file/);
    expect(() => make({ fille: 'x.yml' })).toThrow(/unknown option "fille"/);
  });
});

describe('settings-file: validation', () => {
  it('an invalid value on the first load is rejected with a warning naming tenant, key, value and what was expected', async () => {
    const h = await start(
      'defaults:\n  MaxTopicLevels: 0\ntenants:\n  acme:\n    MaximumQoS: 3\n    RetainEnabled: "yes"\n    SessionInboxSize: 1.5\n',
    );
    expect(h.provider.provide('MaximumQoS', 'acme')).toBeUndefined();
    expect(h.provider.provide('RetainEnabled', 'acme')).toBeUndefined();
    expect(h.provider.provide('SessionInboxSize', 'acme')).toBeUndefined();
    expect(h.provider.provide('MaxTopicLevels', 'acme')).toBeUndefined();
    const warnings = h.lines('warn');
    expect(warnings).toHaveLength(4);
    const qos = warnings.find((l) => l.msg.includes('MaximumQoS'))!;
    expect(qos.msg).toContain('tenant acme');
    expect(qos.msg).toContain('invalid value 3');
    expect(qos.msg).toContain('an integer from 0 to 2');
    expect(qos.msg).toContain('line 5');
    expect(qos.fields).toMatchObject({ tenantId: 'acme', setting: 'MaximumQoS', value: '3', expected: 'an integer from 0 to 2', line: 5 });
    expect(warnings.find((l) => l.msg.includes('RetainEnabled'))!.msg).toMatch(/invalid value "yes" .*expected true or false/);
    expect(warnings.find((l) => l.msg.includes('SessionInboxSize'))!.msg).toContain('invalid value 1.5');
    const levels = warnings.find((l) => l.msg.includes('MaxTopicLevels'))!;
    expect(levels.msg).toMatch(/defaults: invalid value 0 for MaxTopicLevels .*the registry default 128 applies/);
    expect(levels.fields).toMatchObject({ scope: 'defaults', setting: 'MaxTopicLevels', value: '0' });
  });

  it('an invalid edit keeps the previous value of that tenant and key and warns; the rest of the edit applies', async () => {
    const h = await start(BASE);
    writeAtomic(h.file, BASE.replace('MaximumQoS: 1', 'MaximumQoS: 7').replace('SessionInboxSize: 500', 'SessionInboxSize: 600'));
    await waitFor(() => h.changes.length > 0, APPLY_MS, 'a change');
    expect(h.provider.provide('SessionInboxSize', 'acme')).toBe(600);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
    const msg = await warned(h, 'tenant acme', 'MaximumQoS', '7');
    expect(msg).toContain(h.file);
    expect(msg).toContain('expected an integer from 0 to 2');
    expect(msg).toContain('the previous value 1 stays');
    // A valid value in a later edit replaces the kept one.
    writeAtomic(h.file, BASE.replace('MaximumQoS: 1', 'MaximumQoS: 0'));
    await waitFor(() => h.provider.provide('MaximumQoS', 'acme') === 0, APPLY_MS, 'the fixed value');
  });

  it('an unknown setting is reported naming file, tenant (or defaults) and key, and ignored', async () => {
    const h = await start('defaults:\n  MaxTopicLevel: 3\ntenants:\n  acme:\n    maximumqos: 1\n    Bogus: true\n    MaximumQoS: 0\n');
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(0);
    const msgs = h.lines('warn').map((l) => l.msg);
    expect(msgs).toHaveLength(3);
    expect(msgs[0]).toContain(h.file);
    expect(msgs[0]).toContain('defaults: unknown setting MaxTopicLevel at line 2');
    expect(msgs[1]).toContain('tenant acme: unknown setting maximumqos at line 5 (did you mean MaximumQoS?)');
    expect(msgs[2]).toContain('tenant acme: unknown setting Bogus');
    expect(h.lines('warn')[2].fields).toMatchObject({ file: h.file, tenantId: 'acme', setting: 'Bogus' });
  });

  it('unknown top-level keys and sections of the wrong shape are reported', async () => {
    const h = await start(BASE);
    writeAtomic(h.file, 'MaximumQoS: 1\nacme:\n  MaximumQoS: 1\ndefaults: 5\ntenants:\n  acme: [1, 2]\n  beta:\n    RetainEnabled: true\n');
    await waitFor(() => h.changes.length > 0, APPLY_MS, 'a change');
    const msgs = h.lines('warn').map((l) => l.msg);
    expect(msgs.some((m) => m.includes('unknown top-level key MaximumQoS') && m.includes('settings go under defaults'))).toBe(true);
    expect(msgs.some((m) => m.includes('unknown top-level key acme') && m.includes('tenants:'))).toBe(true);
    expect(msgs.some((m) => m.includes('defaults must be a mapping') && m.includes('line 4'))).toBe(true);
    expect(msgs.some((m) => m.includes('tenant acme must be a mapping') && m.includes('line 6'))).toBe(true);
    // Sections of the wrong shape keep their previous values; the valid part applies.
    expect(h.provider.provide('MaxTopicLevels', 'x')).toBe(16);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
    expect(h.provider.provide('RetainEnabled', 'beta')).toBe(true);
    expect(h.changes).toEqual([{ tenantId: 'beta' }]);
  });

  it('a YAML syntax error on reload keeps everything and warns naming file and line', async () => {
    const h = await start(BASE);
    writeAtomic(h.file, 'defaults:\n  MaxTopicLevels: 2\ntenants:\n  acme: {MaximumQoS: 0\n');
    const msg = await warned(h, 'YAML error');
    expect(msg).toContain(h.file);
    expect(msg).toMatch(/at line \d+/);
    expect(h.lines('warn').find((l) => l.msg === msg)!.fields).toMatchObject({ file: h.file });
    expect(h.provider.provide('MaxTopicLevels', 'acme')).toBe(16);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
    expect(h.changes).toEqual([]);
  });

  it('a duplicate key is a YAML error with its line', async () => {
    const h = await start(BASE);
    writeAtomic(h.file, 'defaults:\n  MaxTopicLevels: 2\n  MaxTopicLevels: 3\n');
    const msg = await warned(h, 'YAML error', 'line 3');
    expect(msg).toContain('unique');
    expect(h.provider.provide('MaxTopicLevels', 'acme')).toBe(16);
  });

  it('a YAML error on the first load starts with registry defaults and picks up the fixed file', async () => {
    const h = await start('tenants:\n  acme: {MaximumQoS: 0\n');
    expect(h.lines('warn').some((l) => l.msg.includes('YAML error') && /line \d+/.test(l.msg))).toBe(true);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBeUndefined();
    writeAtomic(h.file, 'tenants:\n  acme: {MaximumQoS: 0}\n');
    await waitFor(() => h.provider.provide('MaximumQoS', 'acme') === 0, APPLY_MS, 'the fixed file');
  });

  it('follows YAML anchors and aliases', async () => {
    const h = await start('tenants:\n  acme: &small\n    MaximumQoS: 0\n  beta: *small\n');
    expect(h.provider.provide('MaximumQoS', 'beta')).toBe(0);
    expect(h.lines('warn')).toEqual([]);
  });

  it('a top level that is not a mapping keeps everything', async () => {
    const h = await start(BASE);
    writeAtomic(h.file, '- MaximumQoS: 1\n');
    await warned(h, 'top level must be a mapping');
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
    expect(h.changes).toEqual([]);
  });
});

describe('settings-file: hot reload', () => {
  it('applies an edit within 2 s and announces the changed tenant', async () => {
    const h = await start(BASE);
    const started = Date.now();
    fs.writeFileSync(h.file, BASE.replace('MaximumQoS: 1', 'MaximumQoS: 2'));
    await waitFor(() => h.changes.length > 0, APPLY_MS, 'a change');
    expect(Date.now() - started).toBeLessThan(APPLY_MS);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(2);
    await sleep(50);
    expect(h.changes).toEqual([{ tenantId: 'acme' }]);
  });

  it('applies an edit within 2 s by polling alone (watch: false)', async () => {
    const h = await start(BASE, { watch: false, pollMs: 200 });
    const started = Date.now();
    writeAtomic(h.file, BASE.replace('SessionInboxSize: 500', 'SessionInboxSize: 501'));
    await waitFor(() => h.provider.provide('SessionInboxSize', 'acme') === 501, APPLY_MS, 'the new value');
    expect(Date.now() - started).toBeLessThan(APPLY_MS);
    expect(h.changes).toEqual([{ tenantId: 'acme' }]);
  });

  it('announces each changed tenant once, {} once when the defaults changed, and nothing for unchanged tenants', async () => {
    const h = await start(BASE);
    writeAtomic(
      h.file,
      'defaults:\n  MaxTopicLevels: 17\ntenants:\n  acme:\n    MaximumQoS: 1\n    SessionInboxSize: 500\n  gamma:\n    MaximumQoS: 0\n',
    );
    await waitFor(() => h.changes.length > 0, APPLY_MS, 'a change');
    await sleep(50);
    expect(h.changes).toHaveLength(3);
    expect(h.changes).toEqual(expect.arrayContaining([{ tenantId: 'gamma' }, { tenantId: 'beta' }, {}]));
    expect(h.provider.provide('RetainEnabled', 'beta')).toBeUndefined();
    expect(h.provider.provide('MaxTopicLevels', 'beta')).toBe(17);
    expect(h.provider.provide('MaximumQoS', 'gamma')).toBe(0);
  });

  it('an edit that changes no value (comments, order) announces nothing', async () => {
    const h = await start(BASE);
    writeAtomic(
      h.file,
      `# reordered\ntenants:\n  beta: {RetainEnabled: false}\n  acme: {SessionInboxSize: 500, MaximumQoS: 1}\ndefaults: {MaxTopicLevels: 16}\n`,
    );
    await waitFor(() => h.lines('debug').some((l) => l.msg.includes('no value changed')), APPLY_MS, 'the reload');
    expect(h.changes).toEqual([]);
  });

  it('a deleted file is treated as empty: registry defaults, every tenant and the defaults announced, a warning', async () => {
    const h = await start(BASE);
    fs.unlinkSync(h.file);
    await waitFor(() => h.changes.length > 0, APPLY_MS, 'a change');
    await sleep(50);
    expect(h.changes).toEqual(expect.arrayContaining([{ tenantId: 'acme' }, { tenantId: 'beta' }, {}]));
    expect(h.changes).toHaveLength(3);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBeUndefined();
    expect(h.provider.provide('MaxTopicLevels', 'acme')).toBeUndefined();
    await warned(h, 'was removed', h.file);
    fs.writeFileSync(h.file, BASE);
    await waitFor(() => h.provider.provide('MaximumQoS', 'acme') === 1, APPLY_MS, 'the file back');
  });

  it('a listener that throws is logged and does not stop the others; unsubscribed listeners hear nothing', async () => {
    const h = await start(BASE);
    const heard: string[] = [];
    h.provider.onChange!(() => {
      throw new Error('boom');
    });
    const unsubscribe = h.provider.onChange!(() => heard.push('dropped'));
    h.provider.onChange!((c) => heard.push(c.tenantId ?? '*'));
    unsubscribe();
    writeAtomic(h.file, BASE.replace('MaximumQoS: 1', 'MaximumQoS: 0'));
    await waitFor(() => heard.length > 0, APPLY_MS, 'a change');
    expect(heard).toEqual(['acme']);
    expect(h.lines('error').some((l) => l.msg.includes('listener threw') && l.fields?.err === 'boom')).toBe(true);
  });

  it('close stops watching: later edits are not applied', async () => {
    const h = await start(BASE, { pollMs: 50 });
    await h.provider.close?.();
    writeAtomic(h.file, BASE.replace('MaximumQoS: 1', 'MaximumQoS: 0'));
    await sleep(400);
    expect(h.changes).toEqual([]);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
  });

  it('several quick writes are applied once they settle', async () => {
    const h = await start(BASE);
    for (let i = 0; i < 5; i++) fs.writeFileSync(h.file, BASE.replace('SessionInboxSize: 500', `SessionInboxSize: ${510 + i}`));
    await waitFor(() => h.provider.provide('SessionInboxSize', 'acme') === 514, APPLY_MS, 'the last value');
    await sleep(50);
    expect(h.changes).toEqual([{ tenantId: 'acme' }]);
  });
});
