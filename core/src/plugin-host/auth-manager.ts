import {
  tenantIdProblem,
  userIdProblem,
  type AuthRejectReason,
  type AuthRequest,
  type AuthResult,
  type ExtendedAuthRequest,
  type ExtendedAuthResult,
  type MaybePromise,
} from '@bifro/spi';
import { scramLogin, type LoginFailures } from '../security/login-failures';
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
/** An attempt refused by the back-off of password guessing: the answer a wrong password gets (v5 0x86, v3 4), no plugin asked. */
const BACKING_OFF_TEXT = 'too many failed logins: try again later';
const BACKING_OFF: AuthOutcome = { type: 'reject', reason: 'badCredentials', text: BACKING_OFF_TEXT };
const BACKING_OFF_EXTENDED: SettledExtendedAuth = { type: 'failed', reason: 'badCredentials', text: BACKING_OFF_TEXT };

/** Outcomes that count as a failed login: a wrong password, or a login nobody knew. Errors and bans do not. */
function isFailedLogin(reason: AuthRejectReason): boolean {
  return reason === 'badCredentials' || reason === 'notAuthorized';
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The login of an exchange's first step: the SCRAM `n=` user (the CONNECT user name is ignored there), else the user name. */
function extendedLogin(request: ExtendedAuthRequest): string | undefined {
  const login = request.method.startsWith('SCRAM-') ? scramLogin(request.data) : request.username;
  return login === '' ? undefined : login;
}

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

/** Why the identity of an accepting answer is unusable (checked once here, for every auth plugin: docs/tenancy.md § Tenant ids). */
function identityProblem(result: object): string | undefined {
  const r = result as { tenantId?: unknown; userId?: unknown };
  if (typeof r.tenantId !== 'string' || typeof r.userId !== 'string') return 'answered without a tenantId and a userId';
  const tenant = tenantIdProblem(r.tenantId);
  if (tenant !== undefined) return `answered tenantId ${JSON.stringify(r.tenantId)}: ${tenant}`;
  const user = userIdProblem(r.userId);
  if (user !== undefined) return `answered userId ${JSON.stringify(r.userId)}: ${user}`;
  return expiresAtProblem(result);
}

/** Why an auth answer is unusable, or undefined when it is fine. */
function authResultProblem(result: unknown): string | undefined {
  if (typeof result !== 'object' || result === null) return `answered ${String(result)} instead of an AuthResult`;
  const r = result as { type?: unknown; tenantId?: unknown; userId?: unknown; reason?: unknown };
  if (r.type === 'defer') return undefined;
  if (r.type === 'ok') return identityProblem(result);
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
      return identityProblem(result);
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
 *
 * With `failures`, every attempt (CONNECT, and the first step of an enhanced-auth exchange) first
 * passes the back-off of password guessing (see {@link LoginFailures}), so every auth plugin is
 * covered: a refused attempt never reaches the chain, a delayed one reaches it later.
 */
export class GuardedAuthManager implements AuthManager {
  private readonly byMethod = new Map<string, GuardedPlugin<'auth'>[]>();
  /** The login of each enhanced-auth exchange under way, by its state map (the steps after the first do not name it). */
  private readonly exchangeLogins = new WeakMap<Map<string, unknown>, string | undefined>();

  constructor(
    private readonly chain: readonly GuardedPlugin<'auth'>[],
    private readonly failures?: LoginFailures,
  ) {
    for (const plugin of chain) {
      for (const method of plugin.instance.authMethods ?? []) {
        const handlers = this.byMethod.get(method);
        if (handlers === undefined) this.byMethod.set(method, [plugin]);
        else handlers.push(plugin);
      }
    }
  }

  authenticate(request: AuthRequest): MaybePromise<AuthOutcome> {
    const failures = this.failures;
    if (failures === undefined || !failures.enabled) return this.askFrom(0, request);
    const address = request.remoteAddress;
    const login = request.username === '' ? undefined : request.username;
    const admission = failures.admit(address, login);
    if (admission.type === 'refuse') return BACKING_OFF;
    const ask = (): MaybePromise<AuthOutcome> => {
      const outcome = this.askFrom(0, request);
      return isThenable(outcome) ? outcome.then((o) => counted(failures, address, login, o)) : counted(failures, address, login, outcome);
    };
    return admission.delayMs > 0 ? delay(admission.delayMs).then(ask) : ask();
  }

  supportsMethod(method: string): boolean {
    return this.byMethod.has(method);
  }

  extendedAuth(request: ExtendedAuthRequest): MaybePromise<SettledExtendedAuth> {
    const handlers = this.byMethod.get(request.method);
    if (handlers === undefined)
      return { type: 'failed', reason: 'badAuthMethod', text: `no auth provider handles method ${request.method}` };
    const failures = this.failures;
    if (failures === undefined || !failures.enabled) return this.askExtendedFrom(handlers, 0, request);
    const address = request.remoteAddress;
    let login: string | undefined;
    let wait = 0;
    if (request.phase === 'continue') login = this.exchangeLogins.get(request.state);
    else {
      // A new exchange (CONNECT or re-authentication) is an attempt; its later steps are not.
      login = extendedLogin(request);
      const admission = failures.admit(address, login);
      if (admission.type === 'refuse') return BACKING_OFF_EXTENDED;
      wait = admission.delayMs;
      this.exchangeLogins.set(request.state, login);
    }
    const ask = (): MaybePromise<SettledExtendedAuth> => {
      const result = this.askExtendedFrom(handlers, 0, request);
      const count = (r: SettledExtendedAuth): SettledExtendedAuth => {
        if (r.type === 'failed' && isFailedLogin(r.reason)) failures.failed(address, login);
        else if (r.type === 'success') failures.succeeded(login);
        if (r.type !== 'continue') this.exchangeLogins.delete(request.state);
        return r;
      };
      return isThenable(result) ? result.then(count) : count(result);
    };
    return wait > 0 ? delay(wait).then(ask) : ask();
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

/** Tells the back-off how an attempt ended; returns the outcome. */
function counted(failures: LoginFailures, address: string, login: string | undefined, outcome: AuthOutcome): AuthOutcome {
  if (outcome.type === 'ok') failures.succeeded(login);
  else if (isFailedLogin(outcome.reason)) failures.failed(address, login);
  return outcome;
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
