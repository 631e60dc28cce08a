'use strict';
// `npm test` after the build: the lanes of jest.config.js (its projects: `cluster`, `e2e`,
// `units`) side by side, each one file at a time. Each line of a lane's output is prefixed with
// its name; the exit code is the first non-zero one. With arguments (`npm test -- <paths or jest
// options>`) jest runs once with them, over every lane.

const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { setTimeout, clearTimeout } = require('node:timers');

const JEST = path.join(__dirname, '..', 'node_modules', 'jest', 'bin', 'jest.js');
const args = process.argv.slice(2);
/** The projects of jest.config.js. */
const LANES = ['cluster', 'e2e', 'units'];

/** A lane still running this long is killed and fails: a hung test must not hold CI until its own timeout. */
const LANE_DEADLINE_MS = 30 * 60_000;
/**
 * After its results, jest waits for open handles forever; a lane that said so is killed this long
 * after and fails, naming the cause, so a leaked handle fails the run instead of hanging it.
 */
const OPEN_HANDLES_GRACE_MS = 30_000;
const DID_NOT_EXIT = /Jest did not exit one second after the test run has completed/;

function run(jestArgs, prefix) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [JEST, ...jestArgs], { stdio: prefix === '' ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    let verdict;
    const kill = (why) => {
      if (verdict !== undefined) return;
      verdict = why;
      process.stderr.write(`${prefix}${why}: killing the lane\n`);
      child.kill('SIGKILL');
    };
    const deadline = setTimeout(() => kill(`still running after ${LANE_DEADLINE_MS / 60_000} min`), LANE_DEADLINE_MS);
    let grace;
    if (prefix !== '') {
      for (const [from, to] of [
        [child.stdout, process.stdout],
        [child.stderr, process.stderr],
      ])
        readline.createInterface({ input: from }).on('line', (line) => {
          to.write(`${prefix}${line}\n`);
          if (grace === undefined && DID_NOT_EXIT.test(line))
            grace = setTimeout(
              () => kill(`open handles kept jest running ${OPEN_HANDLES_GRACE_MS / 1000} s after its results`),
              OPEN_HANDLES_GRACE_MS,
            );
        });
    }
    child.on('exit', (code, signal) => {
      clearTimeout(deadline);
      clearTimeout(grace);
      resolve(verdict !== undefined ? 1 : (code ?? (signal !== null ? 1 : 0)));
    });
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
