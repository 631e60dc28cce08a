import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseDocument } from 'yaml';
import { harness, sleep, writeAtomic, type Harness } from './helpers';

/**
 * The writable side of the provider (SPI 1.3.0): `readOverrides` and `writeOverrides`, which edits the YAML
 * file in place (comments kept), replaces it atomically, applies the change at once and
 * announces it once.
 */

const BASE = `# Tenant settings, edited by hand and by the admin API
defaults: # every tenant
  MaxTopicLevels: 16
tenants:
  # the big customer
  acme:
    MaximumQoS: 1 # no QoS 2 for acme
    SessionInboxSize: 500
  beta:
    RetainEnabled: false
`;

let open: Harness[] = [];

async function start(text: string | undefined, options: Record<string, unknown> = {}): Promise<Harness> {
  const h = await harness(text, { pollMs: 50, ...options });
  open.push(h);
  return h;
}

afterEach(async () => {
  await Promise.all(open.map((h) => h.dispose()));
  open = [];
});

function read(h: Harness): string {
  return fs.readFileSync(h.file, 'utf8');
}

describe('settings-file: readOverrides', () => {
  it('answers the defaults section merged with the tenant section', async () => {
    const h = await start(BASE);
    expect(h.provider.readOverrides!('acme')).toEqual({ MaxTopicLevels: 16, MaximumQoS: 1, SessionInboxSize: 500 });
    expect(h.provider.readOverrides!('nobody')).toEqual({ MaxTopicLevels: 16 });
  });
});

describe('settings-file: writeOverrides', () => {
  it('changes a value in place, keeping every comment, applies it at once and announces it once', async () => {
    const h = await start(BASE);
    await h.provider.writeOverrides!('acme', { MaximumQoS: 2, MaxTopicAlias: 5 });
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(2);
    expect(h.provider.provide('MaxTopicAlias', 'acme')).toBe(5);
    const text = read(h);
    for (const comment of ['# Tenant settings, edited by hand and by the admin API', '# every tenant', '# the big customer'])
      expect(text).toContain(comment);
    expect(text).toContain('MaximumQoS: 2 # no QoS 2 for acme');
    expect(text).toMatch(/SessionInboxSize: 500\n\s+MaxTopicAlias: 5\n\s+beta:/);
    expect(h.changes).toEqual([{ tenantId: 'acme' }]);
    // The watcher sees the new file too, but finds the text it already has: no second announcement.
    await sleep(400);
    expect(h.changes).toEqual([{ tenantId: 'acme' }]);
  });

  it('null removes an override; a tenant left without any is removed from the file', async () => {
    const h = await start(BASE);
    await h.provider.writeOverrides!('acme', { SessionInboxSize: null });
    expect(h.provider.provide('SessionInboxSize', 'acme')).toBeUndefined();
    expect(read(h)).not.toContain('SessionInboxSize');
    await h.provider.writeOverrides!('beta', { RetainEnabled: null, MaximumQoS: null });
    expect(read(h)).not.toContain('beta');
    expect(h.provider.provide('RetainEnabled', 'beta')).toBeUndefined();
    expect(read(h)).toContain('# no QoS 2 for acme');
  });

  it('adds a tenant, creates tenants: when missing, and creates the file when it does not exist', async () => {
    const h = await start('defaults:\n  MaxTopicLevels: 8 # small\n');
    await h.provider.writeOverrides!('new', { RetainEnabled: false });
    expect(read(h)).toBe('defaults:\n  MaxTopicLevels: 8 # small\ntenants:\n  new:\n    RetainEnabled: false\n');
    expect(h.provider.provide('RetainEnabled', 'new')).toBe(false);

    const missing = await start(undefined);
    await missing.provider.writeOverrides!('t', { MaxTopicAlias: 3 });
    expect(parseDocument(read(missing)).toJS()).toEqual({ tenants: { t: { MaxTopicAlias: 3 } } });
    expect(missing.provider.provide('MaxTopicAlias', 't')).toBe(3);
  });

  it('a quoted (invalid) value replaced through update becomes a plain one; a numeric tenant id keeps its key', async () => {
    const h = await start('tenants:\n  acme:\n    RetainEnabled: "no"\n  123:\n    MaximumQoS: 0\n');
    await h.provider.writeOverrides!('acme', { RetainEnabled: false });
    await h.provider.writeOverrides!('123', { MaximumQoS: 1 });
    expect(read(h)).toBe('tenants:\n  acme:\n    RetainEnabled: false\n  123:\n    MaximumQoS: 1\n');
    expect(h.provider.provide('RetainEnabled', 'acme')).toBe(false);
    expect(h.provider.provide('MaximumQoS', '123')).toBe(1);
  });

  it('refuses invalid values and unknown settings, naming each, and writes nothing', async () => {
    const h = await start(BASE);
    const before = fs.statSync(h.file);
    await expect(h.provider.writeOverrides!('acme', { MaximumQoS: 3 as 2, RetainEnabled: 'yes' as unknown as boolean })).rejects.toThrow(
      'invalid MaximumQoS: 3 (above the maximum 2); invalid RetainEnabled: "yes" (expected a boolean)',
    );
    await expect(h.provider.writeOverrides!('acme', { Bogus: 1 } as never)).rejects.toThrow('unknown setting Bogus');
    expect(read(h)).toBe(BASE);
    expect(fs.statSync(h.file).mtimeMs).toBe(before.mtimeMs);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
    expect(h.changes).toEqual([]);
  });

  it('replaces the file atomically: a reader never sees part of it, and no temporary file is left', async () => {
    // A large file, so a write in place would be seen half done by a reader polling it.
    const tenants = Array.from({ length: 600 }, (_, i) => `  tenant-${i}:\n    MaxTopicLevels: ${(i % 100) + 1} # tenant ${i}\n`).join('');
    const h = await start(`tenants:\n${tenants}  zz-last:\n    MaximumQoS: 1\n`);
    let reading = true;
    let reads = 0;
    const bad: string[] = [];
    const reader = (async () => {
      while (reading) {
        const text = fs.readFileSync(h.file, 'utf8');
        reads++;
        if (!text.endsWith('  zz-last:\n    MaximumQoS: 1\n'))
          bad.push(`read ${reads}: ${text.length} chars, ends ${JSON.stringify(text.slice(-40))}`);
        await new Promise((r) => setImmediate(r));
      }
    })();
    for (let i = 0; i < 10; i++) await h.provider.writeOverrides!(`tenant-${i}`, { MaxTopicAlias: i });
    reading = false;
    await reader;
    expect(bad).toEqual([]);
    expect(reads).toBeGreaterThan(10);
    expect(h.provider.provide('MaxTopicAlias', 'tenant-9')).toBe(9);
    expect(fs.readdirSync(h.dir)).toEqual(['settings.yml']);
  });

  it('keeps the permission bits of the file', async () => {
    const h = await start(BASE);
    fs.chmodSync(h.file, 0o640);
    await h.provider.writeOverrides!('acme', { MaximumQoS: 0 });
    expect(fs.statSync(h.file).mode & 0o777).toBe(0o640);
  });

  it('keeps an external edit made just before the update, before the watcher read it', async () => {
    const h = await start(BASE, { watch: false, pollMs: 1800 });
    writeAtomic(h.file, BASE.replace('  beta:\n', '  # added by hand\n  ext:\n    MaxTopicAlias: 2\n  beta:\n'));
    await h.provider.writeOverrides!('acme', { MaximumQoS: 0 });
    const text = read(h);
    expect(text).toContain('# added by hand');
    expect(text).toContain('MaximumQoS: 0 # no QoS 2 for acme');
    // The update applied the whole file it wrote, the external edit included.
    expect(h.provider.provide('MaxTopicAlias', 'ext')).toBe(2);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(0);
  });

  it('refuses to write over a file an external edit broke (YAML error), and leaves it for the editor to fix', async () => {
    const h = await start(BASE);
    const broken = `${BASE}  oops: [unclosed\n`;
    writeAtomic(h.file, broken);
    await expect(h.provider.writeOverrides!('acme', { MaximumQoS: 0 })).rejects.toThrow(/YAML error at line \d+/);
    expect(read(h)).toBe(broken);
    expect(h.provider.provide('MaximumQoS', 'acme')).toBe(1);
  });

  it('concurrent updates take turns: every one of them is in the file', async () => {
    const h = await start(BASE);
    await Promise.all(Array.from({ length: 10 }, (_, i) => h.provider.writeOverrides!(`c${i}`, { MaxTopicAlias: i + 1 })));
    const tenants = (parseDocument(read(h)).toJS() as { tenants: Record<string, { MaxTopicAlias?: number }> }).tenants;
    for (let i = 0; i < 10; i++) expect(tenants[`c${i}`]).toEqual({ MaxTopicAlias: i + 1 });
    expect(tenants.acme).toEqual({ MaximumQoS: 1, SessionInboxSize: 500 });
  });

  it('a file in a folder that does not exist: the update rejects with the reason', async () => {
    const h = await start(undefined, { file: path.join('no', 'such', 'dir', 'settings.yml') });
    await expect(h.provider.writeOverrides!('t', { MaxTopicAlias: 3 })).rejects.toThrow(/ENOENT/);
  });
});
