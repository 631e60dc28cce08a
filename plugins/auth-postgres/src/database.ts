import { DatabaseError, Pool, type PoolClient, type PoolConfig } from 'pg';
import { AuthPostgresError, describeError } from './errors';
import type { AuthPostgresOptions } from './options';
import type { CompiledQuery, PlaceholderValues } from './query-template';
import type { QueryRows } from './rows';

/** Runs one compiled query with the values of its placeholders. */
export type RunQuery = (query: CompiledQuery, values: PlaceholderValues) => Promise<QueryRows>;

/**
 * SQLSTATEs that say the database (not the query) is the problem: connection exceptions (08),
 * insufficient resources (53: too many connections, out of memory, disk full), operator
 * intervention (57: shutdown, cannot connect now, statement timeout / cancel), and the class 28
 * and 3D errors of a refused login or a missing database.
 */
function serverUnavailable(code: string): boolean {
  return code.startsWith('08') || code.startsWith('53') || code.startsWith('57') || code.startsWith('28') || code === '3D000';
}

/** The pool settings handed to `pg`. */
export function poolConfig(options: AuthPostgresOptions): PoolConfig {
  const config: PoolConfig = {
    connectionString: options.connectionString,
    max: options.pool.max,
    idleTimeoutMillis: options.pool.idleTimeoutMs,
    connectionTimeoutMillis: options.pool.connectionTimeoutMs,
    // Client side (the answer does not come: network, a stopped server) and server side (the
    // server cancels the statement).
    query_timeout: options.queryTimeoutMs,
    statement_timeout: options.queryTimeoutMs,
    application_name: 'bifro-auth-postgres',
    keepAlive: true,
  };
  if (options.ssl !== false) config.ssl = { ...options.ssl };
  return config;
}

/**
 * The connection pool and the classification of its failures: a failure to connect, a timeout or
 * a lost connection is `BIFRO_AUTH_POSTGRES_UNAVAILABLE`; an error PostgreSQL reports about the
 * query itself (syntax, a missing relation, a permission) is `BIFRO_AUTH_POSTGRES_QUERY_FAILED`.
 */
export class Database {
  private readonly pool: Pool;

  constructor(
    private readonly options: AuthPostgresOptions,
    onIdleError: (err: Error) => void,
  ) {
    this.pool = new Pool(poolConfig(options));
    // An idle pooled connection that breaks (server restart) must not crash the broker.
    this.pool.on('error', onIdleError);
  }

  /** Runs `work` on one pooled connection (the auth query, then the ACL query). */
  async session<T>(work: (query: RunQuery) => Promise<T>): Promise<T> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.unavailable('cannot connect', err);
    }
    let broken: Error | undefined;
    const query: RunQuery = async (q, values) => {
      try {
        const result = await client.query<Record<string, unknown>>({ text: q.text, values: q.values(values) });
        return { rows: result.rows, columns: result.fields.map((f) => f.name) };
      } catch (err) {
        if (err instanceof DatabaseError && err.code !== undefined && !serverUnavailable(err.code)) {
          throw new AuthPostgresError(
            'BIFRO_AUTH_POSTGRES_QUERY_FAILED',
            `${q.key} failed: ${err.message} (SQLSTATE ${err.code}${err.position === undefined ? '' : `, at character ${err.position}`}); the query sent was: ${q.text}`,
            { cause: err },
          );
        }
        broken = err instanceof Error ? err : new Error(String(err));
        throw this.unavailable(`${q.key} got no answer`, err);
      }
    };
    try {
      return await work(query);
    } finally {
      client.release(broken);
    }
  }

  /** Checks that the database answers (`SELECT 1`). */
  async ping(): Promise<void> {
    try {
      await this.pool.query('SELECT 1');
    } catch (err) {
      throw this.unavailable('cannot run SELECT 1', err);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private unavailable(what: string, err: unknown): AuthPostgresError {
    return new AuthPostgresError(
      'BIFRO_AUTH_POSTGRES_UNAVAILABLE',
      `the database ${this.options.target} is unavailable: ${what} (${describeError(err)}); the client is refused (fail closed)`,
      { cause: err },
    );
  }
}
