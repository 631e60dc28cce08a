import { runConformance, type ConformanceCase } from '@bifro/spi/testing';

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Runs the cases and expects every one to pass, showing the failures otherwise. */
export async function expectAllPass(cases: readonly ConformanceCase[]): Promise<void> {
  const report = await runConformance(cases);
  expect(report.failed.map((f) => `${f.name}: ${describeError(f.error)}`)).toEqual([]);
  expect(report.passed).toHaveLength(cases.length);
}

/**
 * Runs the cases and expects at least one whose name contains each fragment to fail, while some
 * other case passes (the kit pins the fault down instead of failing everything). Resolves with
 * the failure messages.
 */
export async function expectFailures(cases: readonly ConformanceCase[], ...fragments: string[]): Promise<string[]> {
  const report = await runConformance(cases);
  const failed = report.failed.map((f) => f.name);
  for (const fragment of fragments) expect(failed).toEqual(expect.arrayContaining([expect.stringContaining(fragment)]));
  expect(report.passed.length).toBeGreaterThan(0);
  return report.failed.map((f) => `${f.name}: ${describeError(f.error)}`);
}
