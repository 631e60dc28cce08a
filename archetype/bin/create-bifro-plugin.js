#!/usr/bin/env node
'use strict';
// `npm create bifro-plugin <dir>` runs this file (package.json "bin"); the work is in dist/cli.js.
const { main } = require('../dist/cli.js');

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
