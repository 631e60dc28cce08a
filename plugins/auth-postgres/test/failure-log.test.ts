import { testPluginContext } from '@bifro/spi/testing';
import { AuthPostgresError } from '../src/errors';
import { FailureLog } from '../src/failure-log';

describe('auth-postgres: failure log lines (injected clock)', () => {
  it('at most one warn line per code every 5 s, with the count left out; one info line when the database answers again', () => {
    let now = 0;
    const ctx = testPluginContext();
    const log = new FailureLog(ctx.logger, 'postgres://u:***@h/db', () => now);
    const down = new AuthPostgresError(
      'BIFRO_AUTH_POSTGRES_UNAVAILABLE',
      'the database postgres://u:***@h/db is unavailable: cannot connect (ECONNREFUSED)',
    );
    log.failed(down);
    now = 1_000;
    log.failed(down);
    log.failed(down);
    log.failed(new AuthPostgresError('BIFRO_AUTH_POSTGRES_QUERY_FAILED', 'authQuery failed'));
    expect(ctx.logged.map((l) => [l.level, l.msg])).toEqual([
      [
        'warn',
        'BIFRO_AUTH_POSTGRES_UNAVAILABLE: @bifro/plugin-auth-postgres: the database postgres://u:***@h/db is unavailable: cannot connect (ECONNREFUSED)',
      ],
      ['warn', 'BIFRO_AUTH_POSTGRES_QUERY_FAILED: @bifro/plugin-auth-postgres: authQuery failed'],
    ]);
    expect(ctx.logged[0]!.fields).toEqual({ code: 'BIFRO_AUTH_POSTGRES_UNAVAILABLE', target: 'postgres://u:***@h/db', suppressed: 0 });
    now = 5_000;
    log.failed(down);
    expect(ctx.logged).toHaveLength(3);
    expect(ctx.logged[2]!.msg).toMatch(/\(and 2 more like it since the previous line\)$/);
    expect(ctx.logged[2]!.fields).toMatchObject({ suppressed: 2 });
    now = 7_500;
    log.succeeded();
    expect(ctx.logged[3]).toEqual({
      level: 'info',
      msg: '@bifro/plugin-auth-postgres: the database postgres://u:***@h/db answers again (4 lookup(s) failed over 7500 ms)',
      fields: { target: 'postgres://u:***@h/db', failed: 4, downMs: 7500 },
    });
    log.succeeded();
    expect(ctx.logged).toHaveLength(4);
    // After recovery, the next outage is logged at once.
    now = 8_000;
    log.failed(down);
    expect(ctx.logged).toHaveLength(5);
  });
});
