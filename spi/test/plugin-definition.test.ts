import { definePlugin, ERROR_CODE_PATTERN, type ErrorCatalogue, type PluginDefinition } from '@bifro/spi';

describe('PluginDefinition.errors (SPI 1.1.0)', () => {
  const ERRORS = {
    ACME_LDAP_BIND_FAILED: { summary: 'The bind was refused.', remedy: 'Check bindDn and the password.' },
  } as const satisfies ErrorCatalogue;

  it('is optional: a definition with factories only still fits', () => {
    const plain: PluginDefinition = definePlugin({ auth: () => ({ authenticate: () => ({ type: 'defer' as const }) }) });
    expect(plain.errors).toBeUndefined();
  });

  it('carries the codes next to the factories, returned as given', () => {
    const definition = definePlugin({ auth: () => ({ authenticate: () => ({ type: 'defer' as const }) }), errors: ERRORS });
    expect(definition.errors).toBe(ERRORS);
    expect(definition.errors.ACME_LDAP_BIND_FAILED.remedy).toBe('Check bindDn and the password.');
  });

  it('is type-checked: each entry needs a summary and a remedy', () => {
    // @ts-expect-error remedy is missing
    const bad: PluginDefinition = { errors: { ACME_X: { summary: 'no remedy' } } };
    expect(bad).toBeDefined();
  });

  it('ERROR_CODE_PATTERN accepts upper-case codes and refuses others', () => {
    for (const code of ['ACME_LDAP_BIND_FAILED', 'BIFRO_STORAGE_LOCKED', 'X1']) expect(code).toMatch(ERROR_CODE_PATTERN);
    for (const code of ['acme_bind', 'ACME_', '_ACME', 'ACME-BIND', '', 'A']) expect(code).not.toMatch(ERROR_CODE_PATTERN);
  });
});
