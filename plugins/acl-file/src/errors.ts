import type { ErrorCatalogue } from '@bifro/spi';

/**
 * The error codes of the acl-file plugin. Every error it throws has a message starting with
 * `<CODE>: ` and a `code` property; the plugin declares the codes in its definition (`errors`),
 * so the broker prints their remedy and docs/errors.md lists them.
 */
export const ACL_FILE_ERRORS = {
  BIFRO_ACL_FILE_OPTIONS_INVALID: {
    summary: 'An option of @bifro/plugin-acl-file is missing, unknown, or has the wrong type or range.',
    remedy:
      'Fix the `options` of the plugin in the broker config; the message names the key. The option table is in plugins/acl-file/README.md.',
  },
  BIFRO_ACL_FILE_UNREADABLE: {
    summary: 'The ACL file cannot be read at start (missing, a folder, no permission).',
    remedy:
      'Create the file or point `options.file` at it (a relative path resolves against the config folder), and check that the broker user may read it. The broker does not start on no rules.',
  },
  BIFRO_ACL_FILE_INVALID: {
    summary:
      'A line of the ACL file is malformed: an unknown keyword or action, a bad topic pattern, a user or client line outside a tenant.',
    remedy:
      'Fix the line named in the message (`file:line: problem`); the format is in plugins/acl-file/README.md. At start the plugin fails to load; while the broker runs, the previous rules stay in force until the file is valid again.',
  },
} as const satisfies ErrorCatalogue;

/** A code of the acl-file plugin. */
export type AclFileErrorCode = keyof typeof ACL_FILE_ERRORS;

/** The name the plugin uses in its messages. */
export const PLUGIN_NAME = '@bifro/plugin-acl-file';

/** An error of the plugin: `message` starts with the code, `code` is set. */
export class AclFileError extends Error {
  override readonly name = 'AclFileError';

  constructor(
    readonly code: AclFileErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}
