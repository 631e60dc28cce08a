'use strict';
// `npm run check:delivery`: runs test/delivery/cli.ts without a build step of its own. TypeScript
// files are compiled when they are required (transpile only, like the tests' ts-jest; `npm run
// lint` type-checks them). The broker it starts is the built one (core/dist).

const fs = require('node:fs');
const ts = require('typescript');

const COMPILER_OPTIONS = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  esModuleInterop: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  inlineSourceMap: true,
  inlineSources: true,
};

require.extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions: COMPILER_OPTIONS, fileName: filename });
  module._compile(outputText, filename);
};
process.setSourceMapsEnabled(true);

require('./cli.ts')
  .main(process.argv.slice(2))
  .then(
    (code) => process.exit(code),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(2);
    },
  );
