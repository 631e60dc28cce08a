import { definePlugin } from '@bifro/spi';
import { JWT_ERRORS } from './errors';
import { JwtAcl } from './jwt-acl';
import { JwtAuthProvider } from './jwt-auth';
import { parseAclOptions, parseAuthOptions } from './options';

export { JWT_ERRORS, JwtPluginError, type JwtErrorCode } from './errors';
export { JwtAcl } from './jwt-acl';
export { JwtAuthProvider, tokenOf, type Verdict } from './jwt-auth';
export { loadJose, type JoseModule } from './jose';
export { parseKeyFile, type KeyFileContent } from './keys';
export {
  parseAclOptions,
  parseAuthOptions,
  DEFAULTS,
  SUPPORTED_ALGORITHMS,
  HMAC_ALGORITHMS,
  ASYMMETRIC_ALGORITHMS,
  type JwtAclOptions,
  type JwtAlgorithm,
  type JwtAuthOptions,
  type KeySource,
} from './options';

/**
 * `@bifro/plugin-auth-jwt`: clients authenticate with a JWT as the password (or as MQTT 5
 * Authentication Data, method `JWT`), verified with jose against a secret, a public key file or a
 * JWKS URL; the claims give the tenant, the user, attributes and the session's ACL rules, which
 * the `acl` kind enforces; the session ends when the token expires (see the README).
 */
export default definePlugin({
  auth: (ctx) => new JwtAuthProvider(parseAuthOptions(ctx.options, ctx.configDir), ctx.logger),
  acl: (ctx) => new JwtAcl(parseAclOptions(ctx.options)),
  errors: JWT_ERRORS,
});
