/**
 * One error code a plugin documents: what happened and what the operator should do. The same shape
 * as the entries of the broker's own catalogue (docs/errors.md).
 *
 * @example
 * ```ts
 * const spec: ErrorSpec = {
 *   summary: 'The LDAP server refused the bind of the service account.',
 *   remedy: 'Check `plugins.auth.options.bindDn` and the password file it names.',
 * };
 * ```
 */
export interface ErrorSpec {
  /** One line: what happened. */
  readonly summary: string;
  /** What to do about it. */
  readonly remedy: string;
}

/**
 * Error codes with their {@link ErrorSpec}, by code. A plugin declares its own in the `errors`
 * member of its {@link PluginDefinition}; codes match {@link ERROR_CODE_PATTERN} (upper case), carry a prefix
 * of the plugin's own (e.g. `ACME_LDAP_`) and never reuse a code of the broker's catalogue.
 *
 * @example
 * ```ts
 * export const LDAP_ERRORS = {
 *   ACME_LDAP_BIND_FAILED: { summary: 'The bind was refused.', remedy: 'Check bindDn and the password.' },
 * } as const satisfies ErrorCatalogue;
 * ```
 */
export type ErrorCatalogue<C extends string = string> = { readonly [K in C]: ErrorSpec };

/** The pattern every error code matches: upper-case letters, digits and `_`, from a letter to a letter or digit. */
export const ERROR_CODE_PATTERN = /^[A-Z][A-Z0-9_]*[A-Z0-9]$/;
