import path from 'node:path';
import type { Writable } from 'node:stream';
import type { AuthRequest, ClientInfo, ResourceType, TenantUsageReader } from '@bifro/spi';
import type { BrokerConfig, PluginRef, PluginsConfig } from '../../src/base/config-types';
import { DEFAULT_SECURITY } from '../../src/runtime/config';
import { createLogger, type Logger } from '../../src/base/logger';

/** The fixture plugins, one folder per failure mode (test/fixtures/plugins). */
export const FIXTURES_DIR = path.resolve(__dirname, '../../../test/fixtures/plugins');

/** A plugin ref for the fixture `folder` (package `@fixtures/<folder>`). */
export function fixture(folder: string, options: Readonly<Record<string, unknown>> = {}, required = true): PluginRef {
  return { use: `@fixtures/${folder}`, required, options };
}

/** A complete broker config over the fixtures directory; storage is the valid-storage fixture unless overridden. */
export function configWith(plugins: Partial<PluginsConfig>, overrides: Partial<BrokerConfig> = {}): BrokerConfig {
  return {
    file: undefined,
    configDir: FIXTURES_DIR,
    nodeId: 'test-node',
    dataDir: path.join(FIXTURES_DIR, '..', 'data-unused'),
    pluginsDir: FIXTURES_DIR,
    pidFile: path.join(FIXTURES_DIR, '..', 'bifro.pid'),
    listeners: [],
    mqtt: {
      connectTimeoutMs: 10000,
      maxClientIdLength: 65535,
      writeHighWaterBytes: 1048576,
      slowConsumerTimeoutMs: 30000,
      maxQueuedBytesPerConnection: 8388608,
      redirectCheckIntervalMs: 60000,
      maxKeepAliveSeconds: 3600,
      packetTimeoutMs: 30000,
    },
    security: DEFAULT_SECURITY,
    log: { level: 'debug' },
    sysInterval: 0,
    ...overrides,
    plugins: {
      packages: [],
      initTimeoutMs: 200,
      callTimeoutMs: 100,
      auth: [],
      acl: [],
      events: [],
      storage: fixture('valid-storage'),
      ...plugins,
    },
  };
}

/** One parsed pino line. */
export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export const WARN = 40;

/** A pino logger writing JSON lines into `lines`. */
export function capturingLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const stream = {
    write(chunk: string): boolean {
      for (const line of chunk.split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as LogLine);
      return true;
    },
  } as unknown as Writable;
  return { logger: createLogger({ level: 'debug' }, stream), lines };
}

/** Tenant usage the tests set by hand. */
export class FixedUsage implements TenantUsageReader {
  private readonly values = new Map<string, number>();
  set(tenantId: string, resource: ResourceType, value: number): void {
    this.values.set(`${tenantId}/${resource}`, value);
  }
  get(tenantId: string, resource: ResourceType): number {
    return this.values.get(`${tenantId}/${resource}`) ?? 0;
  }
}

export function authRequest(fields: Partial<AuthRequest> = {}): AuthRequest {
  return { protocolVersion: 5, clientId: 'c1', remoteAddress: '127.0.0.1', remotePort: 50000, listener: 'tcp', ...fields };
}

export function client(fields: Partial<ClientInfo> = {}): ClientInfo {
  return {
    tenantId: 't1',
    userId: 'u1',
    clientId: 'c1',
    protocolVersion: 5,
    remoteAddress: '127.0.0.1',
    remotePort: 50000,
    listener: 'tcp',
    attrs: {},
    ...fields,
  };
}

/** Runs `action` and returns what it threw (failing the test when it did not throw). */
export async function rejectionOf(action: () => Promise<unknown>): Promise<Error & { code?: string; details?: Record<string, unknown> }> {
  try {
    await action();
  } catch (err) {
    return err as Error & { code?: string; details?: Record<string, unknown> };
  }
  throw new Error('expected a rejection');
}
