'use strict';
// A jest reporter that prints one line per finished test file with how far the run is:
// `[ 12/141  3:05] PASS core/test/x.test.ts (4.2 s)`, and at the start how many files will run.
// Jest's default reporter stays on for failures and the summary; this one only adds progress.

class ProgressReporter {
  constructor(globalConfig, options = {}) {
    this.prefix = options.prefix ?? '';
    this.total = 0;
    this.done = 0;
    this.started = Date.now();
  }

  onRunStart(results) {
    this.total = results.numTotalTestSuites;
    this.started = Date.now();
    process.stderr.write(`${this.prefix}${this.total} test files to run\n`);
  }

  onTestResult(test, result) {
    this.done++;
    const elapsed = Math.round((Date.now() - this.started) / 1000);
    const clock = `${Math.floor(elapsed / 60)}:${String(elapsed % 60).padStart(2, '0')}`;
    const status = result.testExecError !== undefined || result.numFailingTests > 0 ? 'FAIL' : 'PASS';
    const took = ((result.perfStats.end - result.perfStats.start) / 1000).toFixed(1);
    const file = test.path.startsWith(test.context.config.rootDir) ? test.path.slice(test.context.config.rootDir.length + 1) : test.path;
    const width = String(this.total).length;
    process.stderr.write(
      `${this.prefix}[${String(this.done).padStart(width)}/${this.total} ${clock.padStart(5)}] ${status} ${file} (${took} s)\n`,
    );
  }
}

module.exports = ProgressReporter;
