import type { AuthRequest } from '@bifro/spi';
import { sampleAuthRequest, testPluginContext, type TestPluginContext } from '@bifro/spi/testing';
import { HttpAuthProvider, parseAuthOptions, type HttpAuthDeps } from '../src';

/** A clock the test moves by hand. */
export class ManualClock {
  constructor(public t = 1_700_000_000_000) {}
  readonly now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

/** A provider made from options, with its context (logged lines) and closed by {@link closeAll}. */
export interface Made {
  readonly provider: HttpAuthProvider;
  readonly ctx: TestPluginContext;
  warnings(): string[];
}

const open: HttpAuthProvider[] = [];

export async function make(options: Record<string, unknown>, deps: HttpAuthDeps = {}, configDir?: string): Promise<Made> {
  const ctx = testPluginContext({ options, ...(configDir === undefined ? {} : { configDir }) });
  const provider = new HttpAuthProvider(parseAuthOptions(options), ctx.logger, ctx.configDir, deps);
  open.push(provider);
  await provider.init();
  return { provider, ctx, warnings: () => ctx.logged.filter((l) => l.level === 'warn').map((l) => l.msg) };
}

export function closeAll(): void {
  for (const p of open.splice(0)) p.close();
}

/** A CONNECT with a username and a UTF-8 password. */
export function connect(username: string, password: string, more: Partial<AuthRequest> = {}): AuthRequest {
  return sampleAuthRequest({ clientId: `c-${username}`, username, password: Buffer.from(password), ...more });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
