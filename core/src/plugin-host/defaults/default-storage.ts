/** The storage plugin used when the config names none; a package resolved from the broker like any other plugin. */
export const DEFAULT_STORAGE_PACKAGE = '@bifro/plugin-storage-level';
