/**
 * The version of this SPI. A plugin declares the semver range of SPI versions it supports in the
 * `bifro.spi` field of its package.json; the broker refuses a plugin whose range this version does
 * not satisfy. The SPI grows by addition only: a new optional member is a minor bump, a removal or
 * a changed meaning is a major bump.
 */
export const SPI_VERSION = '1.6.0';
