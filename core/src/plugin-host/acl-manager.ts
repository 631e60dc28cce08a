import type { AccessAction, AccessDecision, ClientInfo, MaybePromise } from '@bifro/spi';
import { isThenable } from './call-timeout';
import type { AclManager, SettingsManager } from './managers';
import { CALL_FAILED, clientSubject, type GuardedPlugin } from './plugin-call-guard';

const DECISIONS: ReadonlySet<string> = new Set<AccessDecision>(['granted', 'denied', 'defer', 'error']);

/**
 * The access control chain: plugins are asked in order, the first answer that is not `defer`
 * decides; when all defer the action is denied. `error` (and a throw, a rejection, a timeout or
 * an invalid answer) is decided by the tenant setting `ByPassPermCheckError`. Synchronous
 * plugins cost no promise.
 */
export class GuardedAclManager implements AclManager {
  constructor(
    private readonly chain: readonly GuardedPlugin<'acl'>[],
    private readonly settings: SettingsManager,
  ) {}

  check(client: ClientInfo, action: AccessAction): MaybePromise<boolean> {
    return this.askFrom(0, client, action);
  }

  private askFrom(index: number, client: ClientInfo, action: AccessAction): MaybePromise<boolean> {
    const chain = this.chain;
    for (let i = index; i < chain.length; i++) {
      const plugin = chain[i]!;
      const start = plugin.start();
      let answer: MaybePromise<AccessDecision>;
      try {
        answer = plugin.instance.checkPermission(client, action);
      } catch (err) {
        plugin.failed(start, 'checkPermission', 'error', err, clientSubject(client));
        return this.onError(client);
      }
      if (isThenable(answer)) {
        return plugin.settle(answer, start, 'checkPermission', clientSubject(client)).then((settled) => {
          if (settled === CALL_FAILED) return this.onError(client);
          const decision = this.accept(plugin, start, settled, client);
          return decision === 'defer' ? this.askFrom(i + 1, client, action) : decision;
        });
      }
      const decision = this.accept(plugin, start, answer, client);
      if (decision !== 'defer') return decision;
    }
    return false;
  }

  private accept(plugin: GuardedPlugin<'acl'>, start: number, answer: AccessDecision, client: ClientInfo): boolean | 'defer' {
    if (!DECISIONS.has(answer)) {
      plugin.failed(
        start,
        'checkPermission',
        'invalidResult',
        `answered ${String(answer)} instead of an AccessDecision`,
        clientSubject(client),
      );
      return this.onError(client);
    }
    plugin.succeeded(start);
    switch (answer) {
      case 'granted':
        return true;
      case 'denied':
        return false;
      case 'defer':
        return 'defer';
      case 'error':
        return this.onError(client);
    }
  }

  private onError(client: ClientInfo): boolean {
    return this.settings.get(client.tenantId, 'ByPassPermCheckError');
  }
}
