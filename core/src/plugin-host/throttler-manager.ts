import type { ResourceType } from '@bifro/spi';
import type { ThrottlerManager } from './managers';
import type { GuardedPlugin } from './plugin-call-guard';

/** Asks the throttler plugin whether a tenant still has a resource; fails open (a throw or a non-boolean answer counts as true). */
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
}
