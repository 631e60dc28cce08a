import type { Storage } from '@bifro/spi';
import { registerConformance, storageConformance, testPluginContext } from '@bifro/spi/testing';
import plugin, { NatsStorage } from '../src';
import { startNatsServer } from '../../../test/support/nats-server';
import { deleteStreams, natsForFile, sameStorage, storageOn, uniquePrefix } from './nats-fixtures';

// One nats-server for the file; every case gets its own prefix (its own streams), removed afterwards.
const env = natsForFile(() => startNatsServer());

const destroy = (s: Storage): Promise<void> => deleteStreams(env.admin, (s as NatsStorage).options.prefix);

describe('NATS storage: storage conformance kit, with close and reopen, and bans', () => {
  registerConformance(
    storageConformance({
      create: () => storageOn(env.nats.urls),
      reopen: async (previous) => sameStorage(previous as NatsStorage),
      destroy,
      durable: true,
      bans: true,
    }),
    { it },
  );
});

describe('NATS storage: conformance through the plugin factory (one partition)', () => {
  registerConformance(
    storageConformance({
      create: async (): Promise<Storage> => {
        const factory = plugin.storage;
        if (factory === undefined) throw new Error('the plugin must provide storage');
        return factory(testPluginContext({ options: { servers: env.nats.urls, prefix: uniquePrefix('f'), partitions: 1, replicas: 1 } }));
      },
      reopen: async (previous) => sameStorage(previous as NatsStorage),
      destroy,
      durable: true,
      bans: true,
    }),
    { it },
  );
});
