import type { ClientBalancer, RedirectDecision } from '@bifro/spi';

export const NO_REDIRECT_BALANCER = '@bifro/core:no-redirect-balancer';

const NONE: RedirectDecision = { type: 'none' };

/** Keeps every client here. Loaded when no balancer plugin is configured. */
export function createNoRedirectBalancer(): ClientBalancer {
  return { needRedirect: () => NONE };
}
