import { definePlugin } from '@bifro/spi';
import { AUTH_HTTP_ERRORS } from './errors';
import { HttpAcl } from './http-acl';
import { HttpAuthProvider } from './http-auth';
import { parseAclOptions, parseAuthOptions } from './options';

export { AUTH_HTTP_ERRORS, AuthHttpError, type AuthHttpErrorCode } from './errors';
export { HttpAcl } from './http-acl';
export { HttpAuthProvider, type HttpAuthDeps, type HttpAuthStats } from './http-auth';
export { interpretAnswer, interpretJson, type ServiceDecision } from './answer';
export { parseAclOptions, parseAuthOptions, DEFAULTS, DEFAULT_BODY, type AuthHttpOptions, type AclHttpOptions } from './options';
export { parseTemplate, renderTemplate, escapeHeaderValue, PLACEHOLDERS, TemplateValues, type Template } from './template';
export { TtlCache } from './cache';

/**
 * `@bifro/plugin-auth-http`: authentication by an HTTP webhook (`plugins.auth`), and authorization
 * from the ACL rules its answers attach to each session (`plugins.acl`). See the README for the
 * options, the request and answer formats and the reason codes.
 */
export default definePlugin({
  auth: (ctx) => new HttpAuthProvider(parseAuthOptions(ctx.options), ctx.logger, ctx.configDir),
  acl: (ctx) => new HttpAcl(parseAclOptions(ctx.options)),
  errors: AUTH_HTTP_ERRORS,
});
