import type { ResourceThrottler } from '@bifro/spi';

export const UNLIMITED_THROTTLER = '@bifro/core:unlimited-throttler';

/** Never throttles. Loaded when no throttler plugin is configured. */
export function createUnlimitedThrottler(): ResourceThrottler {
  return { hasResource: () => true };
}
