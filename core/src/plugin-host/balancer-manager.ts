import type { ClientInfo, MaybePromise, RedirectDecision } from '@bifro/spi';
import { isThenable } from './call-timeout';
import type { BalancerManager } from './managers';
import { CALL_FAILED, clientSubject, type GuardedPlugin } from './plugin-call-guard';

const NO_REDIRECT: RedirectDecision = { type: 'none' };

function decisionProblem(decision: unknown): string | undefined {
  if (typeof decision !== 'object' || decision === null) return `answered ${String(decision)} instead of a RedirectDecision`;
  const d = decision as { type?: unknown; permanent?: unknown; serverReference?: unknown };
  if (d.type === 'none') return undefined;
  if (d.type === 'redirect') {
    if (typeof d.permanent !== 'boolean') return 'answered redirect without a boolean `permanent`';
    if (typeof d.serverReference !== 'string' || d.serverReference === '') return 'answered redirect without a serverReference';
    return undefined;
  }
  return `answered unknown type ${String(d.type)}`;
}

/** Asks the balancer plugin whether a client should go elsewhere; a throw, a timeout or an invalid answer means no redirect. */
export class GuardedBalancerManager implements BalancerManager {
  constructor(private readonly plugin: GuardedPlugin<'balancer'>) {}

  needRedirect(client: ClientInfo): MaybePromise<RedirectDecision> {
    const plugin = this.plugin;
    const start = plugin.start();
    let answer: MaybePromise<RedirectDecision>;
    try {
      answer = plugin.instance.needRedirect(client);
    } catch (err) {
      plugin.failed(start, 'needRedirect', 'error', err, clientSubject(client));
      return NO_REDIRECT;
    }
    if (isThenable(answer)) {
      return plugin
        .settle(answer, start, 'needRedirect', clientSubject(client))
        .then((settled) => (settled === CALL_FAILED ? NO_REDIRECT : this.accept(start, settled, client)));
    }
    return this.accept(start, answer, client);
  }

  private accept(start: number, answer: RedirectDecision, client: ClientInfo): RedirectDecision {
    const problem = decisionProblem(answer);
    if (problem !== undefined) {
      this.plugin.failed(start, 'needRedirect', 'invalidResult', problem, clientSubject(client));
      return NO_REDIRECT;
    }
    this.plugin.succeeded(start);
    return answer;
  }
}
