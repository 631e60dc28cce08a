import { chmodSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { plainMessage } from '@bifro/spi/testing';
import { LevelStorage } from '../src';
import { removeTempDirs, tempDir } from './temp-dirs';

afterAll(removeTempDirs);

/** Permission bits of the directory and of every file in it, e.g. `{ '.': '700', CURRENT: '600' }`. */
function modes(dir: string): Record<string, string> {
  const out: Record<string, string> = { '.': (statSync(dir).mode & 0o777).toString(8) };
  for (const name of readdirSync(dir)) out[name] = (statSync(join(dir, name)).mode & 0o777).toString(8);
  return out;
}

describe('level storage file permissions', () => {
  it('creates its directory 0700 and leaves its files 0600, whatever the umask', async () => {
    const old = process.umask(0o022);
    const path = tempDir('db');
    const storage = new LevelStorage({ path });
    try {
      await storage.init();
      await storage.retained.put('t', plainMessage('a', { retain: true }));
    } finally {
      process.umask(old);
    }
    const m = modes(path);
    expect(Object.keys(m)).toEqual(expect.arrayContaining(['CURRENT', 'LOCK']));
    for (const [name, mode] of Object.entries(m)) expect(`${name} ${mode}`).toBe(`${name} ${name === '.' ? '700' : '600'}`);
    await storage.close();
  });

  it('restricts a database that an older version left world-readable when it opens it', async () => {
    const path = tempDir('db');
    const first = new LevelStorage({ path });
    await first.init();
    await first.close();
    chmodSync(path, 0o755);
    for (const name of readdirSync(path)) chmodSync(join(path, name), 0o644);
    const second = new LevelStorage({ path });
    await second.init();
    const m = modes(path);
    for (const [name, mode] of Object.entries(m)) expect(`${name} ${mode}`).toBe(`${name} ${name === '.' ? '700' : '600'}`);
    await second.close();
  });
});
