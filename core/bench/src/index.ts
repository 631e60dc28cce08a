/** The Bifro load generator: raw MQTT connections, scenarios, worker threads, and the broker comparison. */
export { BenchClient, type Endpoint, type ServerLimits } from './bench-client';
export { FrameSplitter, PacketType, publishPacketId, publishPayloadStart, readVarInt, type FrameHandler } from './frame-splitter';
export { FlowWindow, LocalLedger, SharedLedger, type WindowLedger } from './flow-window';
export { Histogram, type HistogramData, type LatencySummary } from './histogram';
export { Pacer, Qos0Publisher, Qos1Publisher, QosPublisher, type Paced } from './publishers';
export * from './packets';
export * from './plan';
export * from './scenario';
export * from './scenarios';
export { SharedState, Slot, Phase, Totals, delta, deltas, snapshot, type Deltas, type Snapshot } from './shared-state';
export { benchMain, benchUsage, parseBenchArgs, runBench, BenchUsageError, type BenchIo, type BenchOptions } from './cli';
export { readCpuSeconds, readOpenFileLimit, readRssBytes } from './proc-stats';
export { quantile } from './stats';
