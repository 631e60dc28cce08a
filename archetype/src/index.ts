/**
 * create-bifro-plugin: generates a Bifro plugin project with node-plop. The command is
 * `bin/create-bifro-plugin.js` (`npm create bifro-plugin <dir>`); this module exposes its parts.
 */
export { main, type CliIo } from './cli';
export { parseArgs, USAGE, type CliArgs } from './args';
export { CliError, EXIT } from './cli-error';
export {
  createPluginGenerator,
  GENERATOR_NAME,
  HELPERS,
  plannedFiles,
  pluginActions,
  pluginPrompts,
  templateData,
  TEMPLATES_DIR,
  type TemplateData,
} from './generator';
export { DEFAULT_KIND, KIND_INFO, KINDS, parseKinds, type KindInfo } from './kinds';
export { defaultPackageName, errorCodePrefix, packageNameProblem } from './names';
export { defaultDescription, targetProblem, type PluginAnswers } from './project';
export { isSourceCheckout, spiDependency, spiTarballName, VENDOR_DIR, type SpiDependency } from './spi-source';
export { spiVersion, TOOLCHAIN } from './versions';
