import type { AuthRejectReason, AuthRequest, AuthResult, ExtendedAuthRequest, ExtendedAuthResult, MaybePromise } from '@bifro/spi';
import { isThenable } from './call-timeout';
import type { AuthManager, AuthOutcome } from './managers';
import { CALL_FAILED, type GuardedPlugin } from './plugin-call-guard';

type SettledExtendedAuth = Exclude<ExtendedAuthResult, { type: 'defer' }>;

const REJECT_REASONS: ReadonlySet<string> = new Set<AuthRejectReason>([
  'badCredentials',
  'notAuthorized',
  'banned',
  'badAuthMethod',
  'error',
]);

const NOBODY_ACCEPTED: AuthOutcome = { type: 'reject', reason: 'notAuthorized', text: 'no auth provider accepted the client' };

function providerFailed(plugin: GuardedPlugin<'auth'>): AuthOutcome {
  return { type: 'reject', reason: 'error', text: `auth provider ${plugin.name} failed` };
}

/** `expiresAt` (SPI 1.2.0), when given, is a time: a finite number of ms since the epoch. */
function expiresAtProblem(result: object): string | undefined {
  const at = (result as { expiresAt?: unknown }).expiresAt;
  return at === undefined || (typeof at === 'number' && Number.isFinite(at) && at > 0)
    ? undefined
    : `answered expiresAt ${String(at)}, not a time`;
}

/** Why an auth answer is unusable, or undefined when it is fine. */
function authResultProblem(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) return `answered ${String(result)} instead of an AuthResult`;
  const r = result as { type?: unknown; tenantId?: unknown; userId?: unknown; reason?: unknown };
  if (r.type === 'defer') return undefined;
  if (r.type === 'ok') {
    if (typeof r.tenantId !== 'string' || r.tenantId === '') return 'answered ok without a tenantId';
    if (typeof r.userId !== 'string') return 'answered ok without a userId';
    return expiresAtProblem(result);
  }
  if (r.type === 'reject')
    return typeof r.reason === 'string' && REJECT_REASONS.has(r.reason) ? undefined : `rejected with unknown reason ${String(r.reason)}`;
  return `answered unknown type ${String(r.type)}`;
}

function extendedResultProblem(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) return `answered ${String(result)} instead of an ExtendedAuthResult`;
  const r = result as { type?: unknown; tenantId?: unknown; userId?: unknown; reason?: unknown };
  switch (r.type) {
    case 'defer':
    case 'continue':
      return undefined;
    case 'success':
      return typeof r.tenantId === 'string' && r.tenantId !== '' && typeof r.userId === 'string'
        ? expiresAtProblem(result)
        : 'answered success without tenantId/userId';
    case 'failed':
      return typeof r.reason === 'string' && REJECT_REASONS.has(r.reason) ? undefined : `failed with unknown reason ${String(r.reason)}`;
    default:
      return `answered unknown type ${String(r.type)}`;
  }
}

/**
 * The auth chain: providers are asked in order, the first answer that is not `defer` decides;
 * when all defer the client is refused `notAuthorized`. A throw, a rejection, a timeout or an
 * invalid answer refuses the client with `error`. Synchronous providers cost no promise.
 */
export class GuardedAuthManager implements AuthManager {
  private readonly byMethod = new Map<string, GuardedPlugin<'auth'>[]>();

  constructor(private readonly chain: readonly GuardedPlugin<'auth'>[]) {
    for (const plugin of chain) {
      for (const method of plugin.instance.authMethods ?? []) {
        const handlers = this.byMethod.get(method);
        if (handlers === undefined) this.byMethod.set(method, [plugin]);
        else handlers.push(plugin);
      }
    }
  }

  authenticate(request: AuthRequest): MaybePromise<AuthOutcome> {
    return this.askFrom(0, request);
  }

  supportsMethod(method: string): boolean {
    return this.byMethod.has(method);
  }

  extendedAuth(request: ExtendedAuthRequest): MaybePromise<SettledExtendedAuth> {
    const handlers = this.byMethod.get(request.method);
    if (handlers === undefined)
      return { type: 'failed', reason: 'badAuthMethod', text: `no auth provider handles method ${request.method}` };
    return this.askExtendedFrom(handlers, 0, request);
  }

  private askFrom(index: number, request: AuthRequest): MaybePromise<AuthOutcome> {
    const chain = this.chain;
    for (let i = index; i < chain.length; i++) {
      const plugin = chain[i]!;
      const start = plugin.start();
      let answer: MaybePromise<AuthResult>;
      try {
        answer = plugin.instance.authenticate(request);
      } catch (err) {
        plugin.failed(start, 'authenticate', 'error', err, { clientId: request.clientId });
        return providerFailed(plugin);
      }
      if (isThenable(answer)) {
        return plugin.settle(answer, start, 'authenticate', { clientId: request.clientId }).then((settled) => {
          if (settled === CALL_FAILED) return providerFailed(plugin);
          const outcome = this.accept(plugin, start, settled, request);
          return outcome === undefined ? this.askFrom(i + 1, request) : outcome;
        });
      }
      const outcome = this.accept(plugin, start, answer, request);
      if (outcome !== undefined) return outcome;
    }
    return NOBODY_ACCEPTED;
  }

  /** Counts the answer; undefined means defer (ask the next provider). */
  private accept(plugin: GuardedPlugin<'auth'>, start: number, answer: AuthResult, request: AuthRequest): AuthOutcome | undefined {
    const problem = authResultProblem(answer);
    if (problem !== undefined) {
      plugin.failed(start, 'authenticate', 'invalidResult', problem, { clientId: request.clientId });
      return providerFailed(plugin);
    }
    plugin.succeeded(start);
    return answer.type === 'defer' ? undefined : answer;
  }

  private askExtendedFrom(
    handlers: readonly GuardedPlugin<'auth'>[],
    index: number,
    request: ExtendedAuthRequest,
  ): MaybePromise<SettledExtendedAuth> {
    const subject = { clientId: request.clientId, tenantId: request.client?.tenantId, userId: request.client?.userId };
    for (let i = index; i < handlers.length; i++) {
      const plugin = handlers[i]!;
      const extendedAuth = plugin.instance.extendedAuth;
      if (extendedAuth === undefined) continue;
      const start = plugin.start();
      let answer: MaybePromise<ExtendedAuthResult>;
      try {
        answer = extendedAuth.call(plugin.instance, request);
      } catch (err) {
        plugin.failed(start, 'extendedAuth', 'error', err, subject);
        return extendedFailed(plugin);
      }
      if (isThenable(answer)) {
        return plugin.settle(answer, start, 'extendedAuth', subject).then((settled) => {
          if (settled === CALL_FAILED) return extendedFailed(plugin);
          const outcome = acceptExtended(plugin, start, settled, subject);
          return outcome === undefined ? this.askExtendedFrom(handlers, i + 1, request) : outcome;
        });
      }
      const outcome = acceptExtended(plugin, start, answer, subject);
      if (outcome !== undefined) return outcome;
    }
    return { type: 'failed', reason: 'badAuthMethod', text: `no auth provider accepted method ${request.method}` };
  }
}

function extendedFailed(plugin: GuardedPlugin<'auth'>): SettledExtendedAuth {
  return { type: 'failed', reason: 'error', text: `auth provider ${plugin.name} failed` };
}

function acceptExtended(
  plugin: GuardedPlugin<'auth'>,
  start: number,
  answer: ExtendedAuthResult,
  subject: { clientId: string; tenantId: string | undefined; userId: string | undefined },
): SettledExtendedAuth | undefined {
  const problem = extendedResultProblem(answer);
  if (problem !== undefined) {
    plugin.failed(start, 'extendedAuth', 'invalidResult', problem, subject);
    return extendedFailed(plugin);
  }
  plugin.succeeded(start);
  return answer.type === 'defer' ? undefined : answer;
}
