import type { ErrorCatalogue } from '@bifro/spi';

/**
 * The error codes of the auth-file plugin and of `bifro passwd` (which runs this package's
 * password-file code). Every error thrown here has a message starting with `<CODE>: ` and a `code`
 * property; the plugin declares the codes in its definition (`errors`), so the broker prints their
 * remedy and docs/errors.md lists them.
 */
export const AUTH_FILE_ERRORS = {
  BIFRO_AUTH_FILE_OPTIONS_INVALID: {
    summary: 'An option of @bifro/plugin-auth-file is missing, unknown, or has the wrong type or range.',
    remedy:
      'Fix the `options` of the plugin in the broker config; the message names the key. The option table is in plugins/auth-file/README.md.',
  },
  BIFRO_AUTH_FILE_UNREADABLE: {
    summary: 'The password file cannot be read (missing, a folder, no permission).',
    remedy:
      'Create it with `bifro passwd -c FILE USER`, or point `options.file` at the right file (relative paths are resolved against the config folder); check that the broker user may read it.',
  },
  BIFRO_AUTH_FILE_INVALID: {
    summary: 'A line of the password file is malformed, or uses a hash that is refused (plain text, $6$ salted SHA-512, unknown scheme).',
    remedy:
      'Fix the line named in the message (`file:line: problem`). Re-create refused entries with `bifro passwd FILE USER`. While the broker runs, the previous users stay in force until the file is valid again.',
  },
  BIFRO_AUTH_FILE_NOT_FOUND: {
    summary: '`bifro passwd` was asked to change a password file that does not exist.',
    remedy: 'Add `-c` to create the file, or check the path.',
  },
  BIFRO_AUTH_FILE_EXISTS: {
    summary: '`bifro passwd -c` would overwrite an existing password file.',
    remedy: 'Drop `-c` to add or change a user in the existing file, or add `--force` to replace the whole file.',
  },
  BIFRO_AUTH_FILE_USER_NOT_FOUND: {
    summary: '`bifro passwd -D` names a user the password file does not have.',
    remedy: 'Check the user name and `--tenant` (a user of another tenant is a different entry).',
  },
  BIFRO_AUTH_FILE_PASSWORD_INVALID: {
    summary: '`bifro passwd` got no usable password: empty, the two prompts differ, standard input ended, or no terminal to prompt on.',
    remedy: 'Type the same non-empty password twice, or pipe it in on one line with `--password-stdin`.',
  },
  BIFRO_AUTH_FILE_WRITE_FAILED: {
    summary: '`bifro passwd` could not write the password file (permissions, disk full, missing folder).',
    remedy: 'Check the folder of the file exists and is writable; the file is replaced atomically, so the previous version is intact.',
  },
} as const satisfies ErrorCatalogue;

/** A code of the auth-file plugin. */
export type AuthFileErrorCode = keyof typeof AUTH_FILE_ERRORS;

/** The name the plugin uses in its messages. */
export const PLUGIN_NAME = '@bifro/plugin-auth-file';

/** An error of the plugin: `message` starts with the code, `code` is set. */
export class AuthFileError extends Error {
  override readonly name = 'AuthFileError';

  constructor(
    readonly code: AuthFileErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}
