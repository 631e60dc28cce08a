import { randomInt } from 'node:crypto';
import { parseSeed } from '../support/fuzz';
import type { StorageKind } from './model';
import { Campaign, DEFAULT_CLUSTER, formatFigures } from './runner';

/**
 * `npm run check:delivery -- [--minutes N] [--seed S | S:I] [--storage level|memory|both] [--corpus-only]`:
 * replays the corpus, then runs generated schedules for N minutes (default 5) with seed S (default
 * random), both storages side by side, and prints the figures. Exits 1 when a problem was found.
 * `--cluster [--nodes 2|3] [--nats 1|3] [--max-fault-seconds N]`: cluster schedules on a cluster
 * target instead (the corpus's cluster entries, then generated ones).
 */

interface Args {
  minutes: number;
  seed?: { seed: number; index?: number };
  storages: StorageKind[];
  corpusOnly: boolean;
  /** `--cluster`: cluster schedules on a cluster target (storage `nats`). */
  cluster?: { nodes: number; natsServers: number; maxFaultMs: number };
}

const USAGE =
  'usage: check:delivery [--minutes N] [--seed S | S:I] [--storage level|memory|both] [--corpus-only]\n' +
  '       check:delivery --cluster [--nodes 2|3] [--nats 1|3] [--max-fault-seconds N] [--minutes N] [--seed S | S:I] [--corpus-only]';

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { minutes: 5, storages: ['level', 'memory'], corpusOnly: false };
  const cluster = { ...DEFAULT_CLUSTER };
  let isCluster = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    if (a === '--minutes') {
      args.minutes = Number(value());
      if (!(args.minutes > 0)) throw new Error(`--minutes must be a positive number\n${USAGE}`);
    } else if (a === '--seed') args.seed = parseSeed(value(), '--seed');
    else if (a === '--storage') {
      const s = value();
      if (s === 'both') args.storages = ['level', 'memory'];
      else if (s === 'level' || s === 'memory') args.storages = [s];
      else throw new Error(`--storage must be level, memory or both\n${USAGE}`);
    } else if (a === '--corpus-only') args.corpusOnly = true;
    else if (a === '--cluster') isCluster = true;
    else if (a === '--nodes') {
      cluster.nodes = Number(value());
      if (cluster.nodes !== 2 && cluster.nodes !== 3) throw new Error(`--nodes must be 2 or 3\n${USAGE}`);
    } else if (a === '--nats') {
      cluster.natsServers = Number(value());
      if (cluster.natsServers !== 1 && cluster.natsServers !== 3) throw new Error(`--nats must be 1 or 3\n${USAGE}`);
    } else if (a === '--max-fault-seconds') {
      cluster.maxFaultMs = Number(value()) * 1000;
      if (!(cluster.maxFaultMs >= 5000)) throw new Error(`--max-fault-seconds must be 5 or more\n${USAGE}`);
    } else if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  if (isCluster) {
    args.cluster = cluster;
    args.storages = ['nats'];
  }
  return args;
}

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv);
  const seed = args.seed?.seed ?? randomInt(2 ** 32);
  const log = (line: string): void => console.log(line);
  const campaign = new Campaign({
    storages: args.storages,
    writeCorpus: true,
    log,
    ...(args.cluster !== undefined ? { cluster: args.cluster } : {}),
  });
  let stopping = false;
  const stop = (): void => {
    if (stopping) process.exit(130);
    stopping = true;
    console.log('\ninterrupted: stopping the brokers');
    void campaign.close().then(() => {
      console.log(formatFigures(campaign.figures));
      process.exit(130);
    });
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const failures: string[] = [];
  try {
    const corpus = campaign.corpus();
    console.log(
      `delivery checker: ${corpus.length} corpus schedule(s), then ${args.corpusOnly ? 'nothing more' : args.seed?.index !== undefined ? `schedule ${seed}:${args.seed.index}` : `${args.minutes} min with seed ${seed} (--seed ${seed} replays it)`} on ${args.cluster !== undefined ? `a cluster of ${args.cluster.nodes} nodes and ${args.cluster.natsServers} NATS server(s), pauses and partitions up to ${args.cluster.maxFaultMs / 1000} s` : `${args.storages.join(' and ')} storage`}`,
    );
    failures.push(...(await campaign.replayCorpus(corpus)));
    if (!args.corpusOnly) failures.push(...(await campaign.runSeed(seed, args.minutes * 60, args.seed?.index, 20)));
  } finally {
    await campaign.close();
  }
  for (const f of failures) console.log(`\n${f}`);
  console.log(`\n${formatFigures(campaign.figures)}`);
  return campaign.figures.problems === 0 ? 0 : 1;
}
