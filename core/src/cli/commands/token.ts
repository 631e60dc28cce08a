import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { tenantIdProblem } from '@bifro/spi';
import { tokenHash } from '../../api/api-auth';
import { UsageError } from '../cli-errors';
import { EXIT, type CliIo } from '../cli-io';

/** Same rule as the `api.tokens[].name` schema (core/src/runtime/config-schema.ts). */
const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

/**
 * `bifro token create --name N [--tenant T]`: a new random admin API token (32 random bytes,
 * base64url) and the `api.tokens` line to paste, which holds only its SHA-256. The token is shown
 * once; the broker never stores it.
 */
export async function tokenCommand(args: readonly string[], io: CliIo, usage: string): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { name: { type: 'string' }, tenant: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    io.out(usage);
    return EXIT.OK;
  }
  const [action, extra] = positionals;
  if (action !== 'create')
    throw new UsageError(action === undefined ? 'bifro token: expected "create"' : `bifro token: unknown action "${action}"`);
  if (extra !== undefined) throw new UsageError(`bifro token create: unexpected argument "${extra}"`);
  const name = values.name;
  if (name === undefined) throw new UsageError('bifro token create: --name is required (shown in request logs instead of the token)');
  if (!NAME.test(name)) throw new UsageError(`bifro token create: --name "${name}": expected 1-64 letters, digits, ".", "_", "@" or "-"`);
  const tenant = values.tenant;
  // A tenant no client can log into (and no API route can address) would be a token for nothing.
  const problem = tenant === undefined ? undefined : tenantIdProblem(tenant);
  if (problem !== undefined) throw new UsageError(`bifro token create: --tenant ${JSON.stringify(tenant)}: ${problem}`);
  const token = randomBytes(32).toString('base64url');
  const line = `    - { name: ${name}, hash: "${tokenHash(token)}"${tenant !== undefined ? `, tenant: ${JSON.stringify(tenant)}` : ''} }`;
  io.out(token);
  io.err(
    [
      '',
      `The token above is shown once: keep it secret (it grants ${tenant === undefined ? 'admin access to every tenant' : `access to tenant "${tenant}"`}).`,
      'Paste this line under api.tokens in the broker configuration (it holds only the SHA-256 of the token), then restart the broker:',
      '',
      line,
      '',
      'Use it as: curl -H "Authorization: Bearer <token>" http://127.0.0.1:8091/api/v1/tenants',
    ].join('\n'),
  );
  return EXIT.OK;
}
