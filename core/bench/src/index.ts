/** The Bifro load generator: raw MQTT connections, scenarios, and the broker comparison. */
export { BenchClient, type Endpoint } from './bench-client';
export { FrameSplitter, PacketType, publishPacketId, type FrameHandler } from './frame-splitter';
export { FlowWindow } from './flow-window';
export { Qos0Publisher, Qos1Publisher } from './publishers';
export * from './packets';
export * from './scenario';
export * from './scenarios';
export { readCpuSeconds, readOpenFileLimit, readRssBytes } from './proc-stats';
export { quantile } from './stats';
