#!/usr/bin/env node
/**
 * The `bifro` command as npm links it (`npx bifro`, or `bifro` once installed globally).
 *
 * This file is committed, unlike the build output: npm links a package's bin only when its
 * target exists at install time, so a bin pointing straight at dist/cli/main.js is not linked in
 * a fresh clone (`npx bifro` then fails with "could not determine executable to run"). The CLI
 * itself is dist/cli/main.js (core/src/cli/main.ts); in a source checkout that has not been
 * built yet, this says what to run instead of building behind the user's back (docs/decisions.md
 * D25). Plain CommonJS with no dependency, so it runs before anything is built.
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const CLI = path.join(__dirname, '..', 'dist', 'cli', 'main.js');

if (!fs.existsSync(CLI)) {
  process.stderr.write(
    `error: bifro is not built yet: ${CLI} is missing.\n` +
      'From the repository root, run `npm run build` (or `npm start`, which builds and starts the broker), then run this again.\n',
  );
  process.exit(1);
}

const cli = require(CLI);
cli.main(process.argv.slice(2), cli.processIo).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`error: unexpected failure: ${String(err)}\n`);
    process.exit(1);
  },
);
