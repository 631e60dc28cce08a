import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt-packet';
import { DEFAULT_DIR_NAME } from '@bifro/plugin-storage-level';
import { BifroError } from '../../src/base/errors';
import { ConfigError, loadConfig } from '../../src/runtime/config';
import { parseCommandArgs } from '../../src/cli/usage';
import { replayBytes } from '../../src/workers/replay-bytes';
import { fnv1a32, ownerOf } from '../../src/workers/tenant-owner';
import { checkWorkerCount, MARKER_FILE } from '../../src/runtime/worker-marker';
import { DEFAULT_STORAGE_DIR } from '../../src/plugin-host/defaults/default-storage';

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-workers-unit-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe('tenant ownership', () => {
  it('is FNV-1a over UTF-8, fixed forever (a change strands every data directory with workers > 1)', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
    expect(ownerOf('acme', 1)).toBe(0);
    expect(ownerOf('acme', 4)).toBe(fnv1a32('acme') % 4);
  });

  it('spreads many tenants evenly', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[ownerOf(`tenant-${i}`, 4)]!++;
    for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
  });
});

describe('replayBytes', () => {
  const v5 = { protocolVersion: 5 } as const;
  const connect = mqtt.generate(
    {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 5,
      clientId: 'c',
      clean: true,
      keepalive: 0,
      properties: { authenticationMethod: 'M' },
    },
    v5,
  );
  const auth = mqtt.generate(
    { cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'M', authenticationData: Buffer.from('x') } },
    v5,
  );
  const subscribe = mqtt.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 't', qos: 0 }] }, v5);

  it('keeps the CONNECT and what follows it', () => {
    const bytes = Buffer.concat([connect, subscribe]);
    expect(replayBytes(bytes)).toEqual(bytes);
  });

  it('drops the AUTH frames of an exchange the accepting worker ran, keeping a partial frame at the end', () => {
    const bytes = Buffer.concat([connect, auth, auth, subscribe.subarray(0, 3)]);
    expect(replayBytes(bytes)).toEqual(Buffer.concat([connect, subscribe.subarray(0, 3)]));
  });
});

describe('data directory worker count', () => {
  it('records the count at the first start and refuses another one later', async () => {
    const dataDir = path.join(tmp, 'data');
    await checkWorkerCount(dataDir, 2);
    expect(JSON.parse(readFileSync(path.join(dataDir, MARKER_FILE), 'utf8'))).toMatchObject({ workers: 2 });
    await checkWorkerCount(dataDir, 2);
    const err = await checkWorkerCount(dataDir, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BifroError);
    expect((err as BifroError).code).toBe('BIFRO_WORKERS_COUNT_MISMATCH');
    expect((err as BifroError).message).toContain('was used with workers: 2, this start asks for workers: 1');
  });

  it('takes a data directory a single process wrote before the marker existed as one of workers: 1', async () => {
    mkdirSync(path.join(tmp, 'storage-level'));
    await expect(checkWorkerCount(tmp, 2)).rejects.toMatchObject({ code: 'BIFRO_WORKERS_COUNT_MISMATCH' });
    await checkWorkerCount(tmp, 1);
    expect(JSON.parse(readFileSync(path.join(tmp, MARKER_FILE), 'utf8'))).toMatchObject({ workers: 1 });
  });

  it("core's name of the default storage's folder is the level plugin's own default (core does not import the plugin)", () => {
    expect(DEFAULT_STORAGE_DIR).toBe(DEFAULT_DIR_NAME);
  });

  it('reports a damaged marker', async () => {
    writeFileSync(path.join(tmp, MARKER_FILE), '{"workers": "two"}');
    await expect(checkWorkerCount(tmp, 2)).rejects.toMatchObject({ code: 'BIFRO_WORKERS_MARKER_INVALID' });
  });
});

describe('workers in the configuration', () => {
  function write(text: string): string {
    const file = path.join(tmp, 'bifro.yml');
    writeFileSync(file, text);
    return file;
  }

  it('is absent by default and set by the file or --workers', async () => {
    expect((await loadConfig({ cwd: tmp, env: {} })).workers).toBeUndefined();
    const file = write('workers: 3\n');
    expect((await loadConfig({ file, cwd: tmp, env: {} })).workers).toBe(3);
    expect((await loadConfig({ file, cwd: tmp, env: {}, overrides: { workers: 2 } })).workers).toBe(2);
  });

  it('refuses values out of range', async () => {
    const err = (await loadConfig({ file: write('workers: 0\n'), cwd: tmp, env: {} }).catch((e: unknown) => e)) as ConfigError;
    expect(err.code).toBe('BIFRO_CONFIG_INVALID_VALUE');
    expect(err.message).toContain('workers: expected integer 1..64, got 0');
    expect(() => parseCommandArgs('start', ['--workers', 'x'])).toThrow('--workers: expected integer 1..64, got "x"');
    expect(parseCommandArgs('start', ['--workers', '4']).workers).toBe(4);
  });

  it('refuses tls, ws and wss listeners with workers above 1, naming each listener', async () => {
    const file = write(
      [
        'workers: 2',
        'listeners:',
        '  - { name: plain, type: tcp }',
        '  - { name: web, type: ws }',
        '  - { name: web2, type: ws, port: 8090 }',
        '',
      ].join('\n'),
    );
    const err = (await loadConfig({ file, cwd: tmp, env: {} }).catch((e: unknown) => e)) as ConfigError;
    expect(err.issues.map((i) => [i.code, i.path])).toEqual([
      ['BIFRO_CONFIG_WORKERS_LISTENER', 'listeners[1].type'],
      ['BIFRO_CONFIG_WORKERS_LISTENER', 'listeners[2].type'],
    ]);
    expect(err.issues[0]!.message).toContain(`${file}:4:24: listeners[1].type: a ws listener ("web") cannot be used with workers: 2`);
    const one = write(['workers: 1', 'listeners:', '  - { name: web, type: ws }', ''].join('\n'));
    expect((await loadConfig({ file: one, cwd: tmp, env: {} })).listeners[0]!.type).toBe('ws');
  });
});
