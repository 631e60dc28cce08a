import { storageConformance, registerConformance, testPluginContext } from '@bifro/spi/testing';
import type { Storage } from '@bifro/spi';
import plugin from '../src';
import { MemoryStorage } from '../src/memory-storage';

describe('memory storage: storage conformance kit', () => {
  registerConformance(storageConformance({ create: async () => new MemoryStorage(), durable: false, bans: true }), { it });
});

describe('memory storage: conformance through the plugin factory', () => {
  registerConformance(
    storageConformance({
      create: async (): Promise<Storage> => {
        const factory = plugin.storage;
        if (factory === undefined) throw new Error('the plugin must provide storage');
        return factory(testPluginContext());
      },
      // The same instance holds the data across a close: checks the kit's durability cases run green on a store that keeps it.
      reopen: async (previous) => previous,
      bans: true,
    }),
    { it },
  );
});
