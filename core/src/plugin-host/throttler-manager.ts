import type { ResourceType } from '@bifro/spi';
import type { ThrottlerManager } from './managers';
import type { GuardedPlugin } from './plugin-call-guard';

/**
 * Asks the throttler plugin whether a tenant still has a resource; fails open (a throw or a
 * non-boolean answer counts as true). Also asks it for a tenant's limits, for display.
 */
export class GuardedThrottlerManager implements ThrottlerManager {
  private refused: ((tenantId: string, resource: ResourceType) => void) | undefined = undefined;

  constructor(private readonly plugin: GuardedPlugin<'throttler'>) {}

  onRefusal(listener: (tenantId: string, resource: ResourceType) => void): void {
    this.refused = listener;
  }

  hasResource(tenantId: string, resource: ResourceType): boolean {
    const plugin = this.plugin;
    const start = plugin.start();
    let answer: boolean;
    try {
      answer = plugin.instance.hasResource(tenantId, resource);
    } catch (err) {
      plugin.failed(start, 'hasResource', 'error', err, { tenantId });
      return true;
    }
    if (typeof answer !== 'boolean') {
      plugin.failed(start, 'hasResource', 'invalidResult', `answered ${String(answer)} instead of a boolean`, { tenantId });
      return true;
    }
    plugin.succeeded(start);
    if (!answer) this.refused?.(tenantId, resource);
    return answer;
  }

  /** The plugin's `quota` when it has one (SPI 1.5.0); a throw or an answer that is not a finite non-negative number counts as undefined, 0 as unlimited. */
  quota(tenantId: string, resource: ResourceType): number | undefined {
    const plugin = this.plugin;
    const instance = plugin.instance;
    if (typeof instance.quota !== 'function') return undefined;
    const start = plugin.start();
    let answer: unknown;
    try {
      answer = instance.quota(tenantId, resource);
    } catch (err) {
      plugin.failed(start, 'quota', 'error', err, { tenantId });
      return undefined;
    }
    if (answer === undefined) {
      plugin.succeeded(start);
      return undefined;
    }
    if (typeof answer !== 'number' || !Number.isFinite(answer) || answer < 0) {
      plugin.failed(start, 'quota', 'invalidResult', `answered ${String(answer)} instead of a finite non-negative number or undefined`, {
        tenantId,
      });
      return undefined;
    }
    plugin.succeeded(start);
    return answer === 0 ? undefined : answer;
  }
}
