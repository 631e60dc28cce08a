import type { AccessAction, AccessDecision, ClientInfo, MaybePromise } from '@bifro/spi';
import type { Logger } from '../base/logger';
import { RepeatedWarning } from '../base/repeated-warning';
import { isThenable } from './call-timeout';
import type { AclManager, EventManager, SettingsManager } from './managers';
import { CALL_FAILED, clientSubject, type GuardedPlugin } from './plugin-call-guard';

const DECISIONS: ReadonlySet<string> = new Set<AccessDecision>(['granted', 'denied', 'defer', 'error']);

/**
 * Why a plugin could not decide: it answered `error`, threw or rejected (`error`), did not answer
 * within the call timeout, or answered something that is not a decision.
 */
type AclFailure = 'answeredError' | 'error' | 'timeout' | 'invalidResult';

/** How the log line words each failure. */
const FAILURE_WORDS: Readonly<Record<AclFailure, string>> = {
  answeredError: 'answered error',
  error: 'threw or rejected',
  timeout: 'did not answer in time',
  invalidResult: 'answered something that is not a decision',
};

/**
 * The access control chain: plugins are asked in order, the first answer that is not `defer`
 * decides; when all defer the action is denied. `error` (and a throw, a rejection, a timeout or
 * an invalid answer) ends the chain: the tenant setting `ByPassPermCheckError` decides (default
 * false: denied, so a broken plugin never opens what it or a later plugin would refuse), it is
 * reported as an `accessControlError` event and logged once per episode. Synchronous plugins cost
 * no promise.
 */
export class GuardedAclManager implements AclManager {
  /** One warn line per plugin and outcome while its failures go on (a failing backend fails every check). */
  private readonly warnings: RepeatedWarning | undefined;

  constructor(
    private readonly chain: readonly GuardedPlugin<'acl'>[],
    private readonly settings: SettingsManager,
    private readonly events?: EventManager,
    logger?: Logger,
  ) {
    this.warnings =
      logger === undefined
        ? undefined
        : new RepeatedWarning(logger, (key) => {
            const cut = key.lastIndexOf('\u0000');
            return `access control plugin ${key.slice(0, cut)} could not decide (actions ${key.slice(cut + 1)})`;
          });
  }

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
        return this.onError(client, action, plugin, 'error');
      }
      if (isThenable(answer)) {
        // Only to tell a rejection from a timeout in the event, and only when it is wanted.
        let failure: AclFailure = 'timeout';
        const pending =
          this.events?.wants('accessControlError') === true
            ? Promise.resolve(answer).catch((err: unknown) => {
                failure = 'error';
                throw err;
              })
            : answer;
        return plugin.settle(pending, start, 'checkPermission', clientSubject(client)).then((settled) => {
          if (settled === CALL_FAILED) return this.onError(client, action, plugin, failure);
          const decision = this.accept(plugin, start, settled, client, action);
          return decision === 'defer' ? this.askFrom(i + 1, client, action) : decision;
        });
      }
      const decision = this.accept(plugin, start, answer, client, action);
      if (decision !== 'defer') return decision;
    }
    return false;
  }

  private accept(
    plugin: GuardedPlugin<'acl'>,
    start: number,
    answer: AccessDecision,
    client: ClientInfo,
    action: AccessAction,
  ): boolean | 'defer' {
    if (!DECISIONS.has(answer)) {
      plugin.failed(
        start,
        'checkPermission',
        'invalidResult',
        `answered ${String(answer)} instead of an AccessDecision`,
        clientSubject(client),
      );
      return this.onError(client, action, plugin, 'invalidResult');
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
        return this.onError(client, action, plugin, 'answeredError');
    }
  }

  /**
   * The plugin could not decide: ByPassPermCheckError decides (the later plugins are not asked:
   * one that grants must not open what the failing one would have denied), `accessControlError`
   * is reported and the first failure of an episode is logged.
   */
  private onError(client: ClientInfo, action: AccessAction, plugin: GuardedPlugin<'acl'>, reason: AclFailure): boolean {
    const granted = this.settings.get(client.tenantId, 'ByPassPermCheckError');
    this.warnings?.report(
      `${plugin.name}\u0000${granted ? 'granted' : 'denied'}`,
      {
        plugin: plugin.name,
        reason,
        tenantId: client.tenantId,
        clientId: client.clientId,
        action: action.type,
        topic: action.type === 'publish' ? action.topic : undefined,
        filter: action.type === 'subscribe' || action.type === 'unsubscribe' ? action.filter : undefined,
        granted,
      },
      granted
        ? `access control plugin ${plugin.name} ${FAILURE_WORDS[reason]}: ${action.type} granted (ByPassPermCheckError is true for tenant ${client.tenantId})`
        : `access control plugin ${plugin.name} ${FAILURE_WORDS[reason]}: ${action.type} denied (fail closed: ByPassPermCheckError is false for tenant ${client.tenantId})`,
    );
    const events = this.events;
    if (events !== undefined && events.wants('accessControlError')) {
      events.report({
        type: 'accessControlError',
        group: 'accessControl',
        time: Date.now(),
        tenantId: client.tenantId,
        clientId: client.clientId,
        userId: client.userId,
        detail: {
          plugin: plugin.name,
          action: action.type,
          topic: action.type === 'publish' ? action.topic : undefined,
          filter: action.type === 'subscribe' || action.type === 'unsubscribe' ? action.filter : undefined,
          reason,
          granted,
        },
      });
    }
    return granted;
  }
}
