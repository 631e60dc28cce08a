'use strict';
// `npm test` after the build: the lanes of jest.config.js (its projects: `cluster`, `e2e`,
// `units`) side by side, each one file at a time. Each line of a lane's output is prefixed with
// its name; the exit code is the first non-zero one. With arguments (`npm test -- <paths or jest
// options>`) jest runs once with them, over every lane.

const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');

const JEST = path.join(__dirname, '..', 'node_modules', 'jest', 'bin', 'jest.js');
const args = process.argv.slice(2);
/** The projects of jest.config.js. */
const LANES = ['cluster', 'e2e', 'units'];

function run(jestArgs, prefix) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [JEST, ...jestArgs], { stdio: prefix === '' ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    if (prefix !== '') {
      for (const [from, to] of [
        [child.stdout, process.stdout],
        [child.stderr, process.stderr],
      ])
        readline.createInterface({ input: from }).on('line', (line) => to.write(`${prefix}${line}\n`));
    }
    child.on('exit', (code, signal) => resolve(code ?? (signal !== null ? 1 : 0)));
  });
}

async function main() {
  if (args.length > 0) return run(args, '');
  const started = Date.now();
  const codes = await Promise.all(LANES.map((lane) => run(['--selectProjects', lane, '--runInBand'], `[${lane}]`.padEnd(10))));
  const seconds = Math.round((Date.now() - started) / 1000);
  const outcome = LANES.map((lane, i) => `${lane} ${codes[i] === 0 ? 'passed' : 'FAILED'}`).join(', ');
  process.stderr.write(`all lanes done in ${Math.floor(seconds / 60)} min ${seconds % 60} s: ${outcome}\n`);
  return codes.find((c) => c !== 0) ?? 0;
}

main().then((code) => process.exit(code));
