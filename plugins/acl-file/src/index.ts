import { definePlugin } from '@bifro/spi';
import { ACL_FILE_ERRORS } from './errors';
import { FileAccessControl } from './file-access-control';
import { parseOptions } from './options';

export { ACL_FILE_ERRORS, AclFileError, PLUGIN_NAME, type AclFileErrorCode } from './errors';
export { FileAccessControl } from './file-access-control';
export { parseOptions, DEFAULT_FILE, DEFAULT_POLL_MS, type AclFileOptions, type Otherwise } from './options';
export { parseAclFile, scopesFor, globToRegExp, MAX_PROBLEMS, type RuleSet, type CompiledScope, type ParseResult } from './acl-file-format';

/**
 * The acl-file plugin (`plugins.acl: [{ use: "@bifro/plugin-acl-file", options: { file: acl.conf } }]`):
 * ordered allow/deny rules per tenant, user or client id from a file, compiled per scope with the
 * SPI rule helpers and reloaded when the file changes. Options: `file` (default `acl.conf`,
 * relative to the config folder), `otherwise` (default `defer`), `connect` and `unsubscribe`
 * (default `grant`), `pollMs` (default 500), `watch` (default true). See the README.
 */
export default definePlugin({
  acl: (ctx) => new FileAccessControl(parseOptions(ctx.options, ctx.configDir), ctx.logger),
  errors: ACL_FILE_ERRORS,
});
