/**
 * Jest transform for the few ES-module-only packages in the dependency tree (cookie 2 under
 * fastify's inject, glob's helpers...): Jest 30 on Node 20 cannot require ES modules, the broker
 * itself (Node's require(esm)) can. TypeScript's transpiler rewrites import/export to CommonJS.
 */
const ts = require('typescript');

module.exports = {
  process(source, filename) {
    const out = ts.transpileModule(source, {
      fileName: filename,
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, allowJs: true, esModuleInterop: true },
    });
    return { code: out.outputText };
  },
};
