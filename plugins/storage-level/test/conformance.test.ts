import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Storage } from '@bifro/spi';
import { registerConformance, storageConformance, testPluginContext } from '@bifro/spi/testing';
import plugin, { LevelStorage } from '../src';
import { removeTempDirs, tempDir } from './temp-dirs';

afterAll(removeTempDirs);

const pathOf = (s: Storage): string => (s as LevelStorage).path;

describe('level storage: storage conformance kit, with close and reopen', () => {
  registerConformance(
    storageConformance({
      create: async () => new LevelStorage({ path: tempDir('db') }),
      reopen: async (previous) => new LevelStorage({ path: pathOf(previous) }),
      destroy: async (s) => rm(dirname(pathOf(s)), { recursive: true, force: true }),
      durable: true,
      bans: true,
    }),
    { it },
  );
});

describe('level storage: conformance with sync off, no group commit window and tiny batches', () => {
  // Batches cut after every call and written on the next event-loop turn: the kit must still pass.
  const options = { sync: false, groupCommitMs: 0, maxBatchOps: 1, maxCachedSessions: 2 };
  registerConformance(
    storageConformance({
      create: async () => new LevelStorage({ path: tempDir('db'), ...options }),
      reopen: async (previous) => new LevelStorage({ path: pathOf(previous), ...options }),
      destroy: async (s) => rm(dirname(pathOf(s)), { recursive: true, force: true }),
      durable: true,
      bans: true,
    }),
    { it },
  );
});

describe('level storage: conformance through the plugin factory', () => {
  registerConformance(
    storageConformance({
      create: async (): Promise<Storage> => {
        const factory = plugin.storage;
        if (factory === undefined) throw new Error('the plugin must provide storage');
        return factory(testPluginContext({ dataDir: tempDir() }));
      },
      reopen: async (previous) => new LevelStorage({ path: pathOf(previous) }),
      destroy: async (s) => rm(dirname(pathOf(s)), { recursive: true, force: true }),
      durable: true,
      bans: true,
    }),
    { it },
  );
});
