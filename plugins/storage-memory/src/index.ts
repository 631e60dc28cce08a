import { definePlugin } from '@bifro/spi';
import { MemoryStorage } from './memory-storage';

export { MemoryStorage } from './memory-storage';

/**
 * The in-memory storage plugin (`plugins.storage: "@bifro/plugin-storage-memory"` in the
 * broker config). Takes no options. Nothing it stores survives a restart.
 */
export default definePlugin({
  storage: (ctx) => {
    ctx.logger.info('in-memory storage: sessions, inboxes and retained messages are lost when the broker stops');
    return new MemoryStorage();
  },
});
