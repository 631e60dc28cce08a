import { definePlugin } from '@bifro/spi';
import { AUTH_FILE_ERRORS } from './errors';
import { parseOptions } from './options';
import { FileAuthProvider } from './provider';
import { applyPasswd, precheckPasswd, writeFileAtomic } from './passwd';

export { AUTH_FILE_ERRORS, AuthFileError, PLUGIN_NAME, type AuthFileErrorCode } from './errors';
export {
  parseOptions,
  DEFAULT_TENANT,
  DEFAULT_CACHE_TTL_MS,
  DEFAULT_CACHE_MAX_ENTRIES,
  DEFAULT_POLL_MS,
  type AuthFileOptions,
  type CertificateOptions,
} from './options';
export { FileAuthProvider, checkAclAttr } from './provider';
export {
  hashPassword,
  verifyPassword,
  parseHash,
  formatHash,
  SCRYPT_DEFAULTS,
  type PasswordHash,
  type ScryptHash,
  type Pbkdf2Hash,
} from './hashes';
export {
  parsePasswordFile,
  parseLine,
  formatEntryLine,
  loginNames,
  type PasswordEntry,
  type PasswordTable,
  type LineProblem,
  type EntryFields,
} from './password-file';
export {
  SCRAM_METHODS,
  SCRAM_DEFAULT_ITERATIONS,
  ScramClient,
  deriveScramCredentials,
  formatScramCredentials,
  parseClientFirst,
  serverFirst,
  verifyClientFinal,
  type ScramMethod,
  type ScramCredentials,
} from './scram';
export { applyPasswd, precheckPasswd, writeFileAtomic, type PasswdRequest, type PasswdOutcome } from './passwd';
export { certificateIdentity, parseSubjectAltName } from './certificate';

/**
 * What `bifro passwd` uses (loaded at run time by the core CLI, which imports no plugin
 * statically): check a request before prompting, then apply it to the file.
 */
export const passwordFile = { precheck: precheckPasswd, apply: applyPasswd, writeFileAtomic } as const;

/**
 * The auth-file plugin: users from a password file (`options.file`, relative to the config
 * folder): scrypt or mosquitto `$7$` hashes, SCRAM-SHA-256/512 over MQTT 5 AUTH, optional identity
 * from verified client certificates; reloaded on change. Options and formats: README.md.
 */
export default definePlugin({
  auth: (ctx) => new FileAuthProvider(parseOptions(ctx.options, ctx.configDir), ctx.logger),
  errors: AUTH_FILE_ERRORS,
});
