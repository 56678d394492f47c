// Kafka scenarios with kafkajs, written as its examples are; each prints its observable outcome as
// one JSON line, the same against halfmq and against Apache Kafka. The scenarios and the outcome's
// keys are kafka_confluent.py's, so the same departures apply.
//
//     node kafka_kafkajs.js BOOTSTRAP PREFIX SCENARIO
//
// PREFIX starts every topic, group and transactional id the scenario makes, so runs never meet.
// kafkajs logs its warnings to stderr: the last line on stdout is the outcome.
const { Kafka, logLevel, Partitioners } = require("kafkajs");

const [bootstrap, prefix, scenario] = process.argv.slice(2);
const WAIT = 30000; // ms a scenario waits for what it expects before it records what it has

const toStderr = () => ({ namespace, label, log }) =>
  process.stderr.write(`${label} [${namespace}] ${log.message} ${log.error || ""}\n`);
const kafka = new Kafka({
  clientId: "conformance", brokers: [bootstrap], logLevel: logLevel.WARN, logCreator: toStderr,
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(done, wait = WAIT) {
  const deadline = Date.now() + wait;
  while (!done() && Date.now() < deadline) await sleep(100);
}

/** Kafka's name for an error (the protocol's where kafkajs kept it), else kafkajs's own. */
function errorName(error) {
  if (error.type) return error.type;
  return error.cause ? errorName(error.cause) : error.name;
}

async function withAdmin(use) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect();
  }
}

/**
 * Wait until every partition of the topics has a leader. kafkajs's own wait (createTopics'
 * waitForLeaders) gives up at the first UNKNOWN_TOPIC_OR_PARTITION, which a busy Kafka broker
 * answers while a topic it just created is not yet in its metadata; this one waits that out too.
 */
async function leaders(admin, names) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    try {
      const { topics: found } = await admin.fetchTopicMetadata({ topics: names });
      if (found.every((t) => t.partitions.length && t.partitions.every((p) => p.leader >= 0))) return;
    } catch (error) {
      if (!error.retriable || Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`no leaders for ${names} within ${WAIT} ms`);
    await sleep(100);
  }
}

/** Create topics; each one's error name, or null. */
async function create(...topics) {
  const names = topics.map(([topic]) => topic);
  const created = Object.fromEntries(names.map((name) => [name, null]));
  try {
    const made = await withAdmin(async (admin) => {
      const answer = await admin.createTopics({
        topics: topics.map(([topic, numPartitions]) => ({ topic, numPartitions })), waitForLeaders: false,
      });
      await leaders(admin, names);
      return answer;
    });
    // kafkajs answers false, and throws nothing, when every topic already existed
    if (!made) for (const name of names) created[name] = "TOPIC_ALREADY_EXISTS";
  } catch (error) {
    if (!error.errors) throw error;
    for (const failed of error.errors) created[failed.topic] = errorName(failed);
  }
  return created;
}

const hex = (value) => (value == null ? null : Buffer.from(value).toString("hex"));

function record(partition, message) {
  const headers = Object.entries(message.headers || {}).map(([name, value]) => [name, hex(value)]);
  const key = message.key == null ? null : message.key.toString();
  return [partition, Number(message.offset), key, message.value.toString(), headers];
}

/** Send values (key k<i>, headers n=<i> and bin=00ff), value i to partition i % partitions, in
 * one send; the acknowledged partition and offset of each. The producer is idempotent: kafkajs
 * resends a broker's whole request when one partition of it fails (as NOT_LEADER_OR_FOLLOWER
 * does on Kafka just after a topic is made), and only sequence numbers keep the other
 * partitions' records from being written twice. */
async function produce(topic, values, partitions = 1, config = {}) {
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner, idempotent: true, maxInFlightRequests: 1, ...config,
  });
  await producer.connect();
  const messages = values.map((value, i) => ({
    key: `k${i}`, value, partition: i % partitions, headers: { n: `${i}`, bin: Buffer.from([0, 255]) },
  }));
  const acked = [];
  try {
    const batches = await producer.send({ topic, messages });
    for (const { partition, baseOffset } of batches) {
      const count = messages.filter((m) => m.partition === partition).length;
      for (let i = 0; i < count; i++) acked.push([partition, Number(baseOffset) + i, null]);
    }
  } catch (error) {
    for (const m of messages) acked.push([m.partition, -1, errorName(error)]);
  }
  await producer.disconnect();
  return acked.sort(byItems);
}

/** Python's order of lists of numbers and strings: item by item. */
function byItems(a, b) {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] < b[i]) return -1;
    if (a[i] > b[i]) return 1;
  }
  return a.length - b.length;
}

/** A running consumer of `group`, reading `topic` from the start: `read` fills with
 * [partition, message], `assigned` follows its group's joins and `next` holds the offset after
 * the last record read of each partition; it commits each record read while `commitEach`. */
async function member(group, topic, { commitEach = false, ...config } = {}) {
  const consumer = kafka.consumer({ groupId: group, ...config });
  const state = { consumer, topic, commitEach, read: [], assigned: [], next: {} };
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    state.assigned = payload.memberAssignment[topic] || [];
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      state.read.push([partition, message]);
      state.next[partition] = Number(message.offset) + 1;
      if (state.commitEach) {
        // a rebalance under way refuses it: a later commit carries it
        await commit(state, [partition]).catch(() => {});
      }
    },
  });
  return state;
}

/** Commit where `state` has read to, in `partitions` (all it has read when none are named). */
async function commit(state, partitions = Object.keys(state.next).map(Number)) {
  const offsets = partitions
    .filter((partition) => partition in state.next)
    .map((partition) => ({ topic: state.topic, partition, offset: String(state.next[partition]) }));
  if (offsets.length) await state.consumer.commitOffsets(offsets);
}

/** Up to `count` records of a new consumer of `group`, or what came within `wait` ms. */
async function consume(group, topic, count, wait = WAIT, config = {}) {
  const state = await member(group, topic, config);
  await until(() => state.read.length >= count, wait);
  await state.consumer.disconnect();
  return state.read;
}

async function committed(group, topic) {
  const [found] = await withAdmin((admin) => admin.fetchOffsets({ groupId: group, topics: [topic] }));
  return found.partitions.sort((a, b) => a.partition - b.partition).map((p) => Number(p.offset));
}

async function produceConsume() {
  const topic = `${prefix}-orders`;
  const created = await create([topic, 3]);
  const acked = await produce(topic, [...Array(12).keys()].map((i) => `v${i}`), 3);
  const read = await consume(`${prefix}-readers`, topic, 12);
  // no timestamp_types: kafkajs does not show a record's timestamp type
  return { created: created[topic], acked, records: read.map(([p, m]) => record(p, m)).sort(byItems) };
}

async function topics() {
  const dotted = `${prefix}.orders.created`;
  const created = await create([`${prefix}-a`, 3], [dotted, 2]);
  const again = await create([`${prefix}-a`, 3]);
  const invalid = await create(["bad name!", 1]);
  // Until the created ones are listed: a broker's metadata may lag a creation it acknowledged
  // (Kafka's does, briefly).
  let listed;
  for (const deadline = Date.now() + WAIT; ;) {
    const { topics: all } = await withAdmin((admin) => admin.fetchTopicMetadata());
    listed = Object.fromEntries(
      all.filter((t) => t.name.startsWith(prefix)).sort((a, b) => (a.name < b.name ? -1 : 1))
        .map((t) => [t.name, t.partitions.length]));
    if ((`${prefix}-a` in listed && dotted in listed) || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const dottedAcked = await produce(dotted, ["d0", "d1"], 2);
  const read = await consume(`${prefix}-dotted`, dotted, 2);
  return { created, again, invalid, listed, dotted_acked: dottedAcked,
           dotted_read: read.map(([, m]) => m.value.toString()).sort() };
}

async function autoCreate() {
  const topic = `${prefix}-auto`;
  const acked = await produce(topic, ["a0"]);
  let partitions = null;
  let error = null;
  try {
    const { topics: [found] } = await withAdmin((admin) => admin.fetchTopicMetadata({ topics: [topic] }));
    partitions = found.partitions.length;
  } catch (failed) {
    error = errorName(failed);
  }
  const read = await consume(`${prefix}-auto`, topic, 1);
  return { acked, partitions, error, read: read.map(([, m]) => m.value.toString()) };
}

/** Wait until the members' assignments cover `total` partitions, none empty. */
async function stable(members, total) {
  const sizes = () => members.map((m) => m.assigned.length).sort((a, b) => a - b);
  await until(() => sizes().reduce((a, b) => a + b, 0) === total && sizes().every(Boolean));
  return sizes();
}

async function groupTogether() {
  const [topic, group] = [`${prefix}-t`, `${prefix}-together`];
  await create([topic, 4]);
  await produce(topic, [...Array(40).keys()].map((i) => `v${i}`), 4);
  const members = await Promise.all([0, 1].map(() => member(group, topic, { commitEach: true })));
  const seen = () => new Set(members.flatMap((m) => m.read.map(([, message]) => message.value.toString())));
  await until(() => seen().size >= 40);
  const sizes = await stable(members, 4);
  for (const m of members) {
    await commit(m, m.assigned).catch(() => {}); // a rebalance under way: what it read was committed as it read
    await m.consumer.disconnect();
  }
  return { distinct: seen().size, assignment_sizes: sizes, committed: await committed(group, topic) };
}

async function groupLateAndLeaving() {
  const [topic, group] = [`${prefix}-late`, `${prefix}-late`];
  await create([topic, 4]);
  await produce(topic, [...Array(8).keys()].map((i) => `old${i}`), 4);
  const first = await member(group, topic);
  await until(() => first.read.length >= 8);
  const old = first.read.map(([, m]) => m.value.toString()).sort();
  await commit(first);
  first.read = [];
  first.commitEach = true;
  const second = await member(group, topic, { commitEach: true });
  const joined = await stable([first, second], 4);
  await produce(topic, [...Array(8).keys()].map((i) => `new${i}`), 4);
  const news = () => [...first.read, ...second.read].map(([, m]) => m.value.toString());
  await until(() => news().length >= 8);
  const late = news().sort();
  await second.consumer.disconnect();
  await until(() => first.assigned.length >= 4);
  const after = first.assigned.length;
  await first.consumer.disconnect();
  return { old, assignment_sizes_joined: joined, new: late, assignment_after_leave: after,
           committed: await committed(group, topic) };
}

async function offsets() {
  const [topic, group] = [`${prefix}-off`, `${prefix}-offsets`];
  await create([topic, 2]);
  await produce(topic, [...Array(10).keys()].map((i) => `v${i}`), 2);
  const partitions = [{ partition: 0, offset: "3" }, { partition: 1, offset: "5" }];
  await withAdmin((admin) => admin.setOffsets({ groupId: group, topic, partitions }));
  const fetched = await committed(group, topic);
  const marks = await withAdmin((admin) => admin.fetchTopicOffsets(topic));
  const watermarks = marks.sort((a, b) => a.partition - b.partition).map((p) => [Number(p.low), Number(p.high)]);
  const [none] = await committed(`${prefix}-nothing`, topic);
  const read = await consume(group, topic, 2);
  const starts = {};
  for (const [partition, m] of read) if (!(partition in starts)) starts[partition] = Number(m.offset);
  return { fetched, watermarks, none_committed: none,
           starts: Object.entries(starts).map(([p, offset]) => [Number(p), offset]).sort(byItems) };
}

async function idempotent() {
  const topic = `${prefix}-idem`;
  await create([topic, 2]);
  const values = [...Array(50).keys()].map((i) => `v${i}`);
  const acked = await produce(topic, values, 2, { idempotent: true, maxInFlightRequests: 1 });
  const read = await consume(`${prefix}-idem`, topic, 60, 5000);
  return { acked, read: read.map(([p, m]) => [p, Number(m.offset), m.value.toString()]).sort(byItems) };
}

async function transactional(transactionalId, config = {}) {
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, ...config });
  await producer.connect();
  return producer;
}

async function readAll(group, topic, readUncommitted, expect, wait) {
  const read = await consume(group, topic, expect, wait, { readUncommitted });
  return read.map(([, m]) => [Number(m.offset), m.value.toString()]);
}

/** An error's name, and what the producer can do after it: kafkajs has no fatal or abortable
 * flag, so ask it to abort the transaction (abortable), then to begin another (not fatal). */
async function failure(producer, transaction, error) {
  let abortable = false;
  let fatal = false;
  try {
    await transaction.abort();
    abortable = true;
    await (await producer.transaction()).abort();
  } catch {
    fatal = !abortable;
  }
  return { name: errorName(error), fatal, abortable };
}

async function transactions() {
  const topic = `${prefix}-txn`;
  await create([topic, 1]);
  const producer = await transactional(`${prefix}-t1`);
  for (const [values, commits] of [[["c1", "c2"], true], [["a1"], false], [["c3"], true]]) {
    const transaction = await producer.transaction();
    await transaction.send({ topic, messages: values.map((value) => ({ value, partition: 0 })) });
    await (commits ? transaction.commit() : transaction.abort());
  }
  const opened = await transactional(`${prefix}-t2`);
  const open = await opened.transaction();
  await open.send({ topic, messages: [{ value: "o1", partition: 0 }] });
  const last = await producer.transaction();
  await last.send({ topic, messages: [{ value: "c4", partition: 0 }] }); // after the open one: held back with it
  await last.commit();
  const committedView = await readAll(`${prefix}-rc1`, topic, false, 5, 5000);
  const uncommittedView = await readAll(`${prefix}-ru`, topic, true, 6, 5000);
  const [marks] = await withAdmin((admin) => admin.fetchTopicOffsets(topic));
  await open.commit();
  const after = await readAll(`${prefix}-rc2`, topic, false, 5, 10000);
  await producer.disconnect();
  await opened.disconnect();
  return {
    read_committed_while_open: committedView.map(([, value]) => value),
    read_committed_while_open_offsets: committedView.map(([offset]) => offset),
    read_uncommitted_while_open: uncommittedView.map(([, value]) => value),
    high_watermark_while_open: Number(marks.high),
    read_committed_after: after.map(([, value]) => value),
    read_committed_after_offsets: after.map(([offset]) => offset),
  };
}

async function fencing() {
  const [topic, transactionalId] = [`${prefix}-fence`, `${prefix}-fenced`];
  await create([topic, 1]);
  const first = await transactional(transactionalId);
  const firsts = await first.transaction();
  await firsts.send({ topic, messages: [{ value: "x1", partition: 0 }] });
  const second = await transactional(transactionalId);
  const seconds = await second.transaction(); // kafkajs initialises its producer id here
  let error = null;
  try {
    await firsts.send({ topic, messages: [{ value: "x1b", partition: 0 }] });
    await firsts.commit();
  } catch (failed) {
    error = await failure(first, firsts, failed);
  }
  await seconds.send({ topic, messages: [{ value: "x2", partition: 0 }] });
  await seconds.commit();
  const read = await readAll(`${prefix}-fence`, topic, false, 3, 5000);
  await first.disconnect();
  await second.disconnect();
  return { first_error: error, read_committed: read.map(([, value]) => value) };
}

async function sendOffsets() {
  const [source, sink, group] = [`${prefix}-in`, `${prefix}-out`, `${prefix}-transform`];
  await create([source, 1], [sink, 1]);
  await produce(source, [...Array(5).keys()].map((i) => `v${i}`));
  const reader = await member(group, source);
  await until(() => reader.read.length >= 5);
  const producer = await transactional(`${prefix}-transformer`);
  const transaction = await producer.transaction();
  await transaction.send({
    topic: sink, messages: reader.read.map(([, m]) => ({ value: `out-${m.value}`, partition: 0 })),
  });
  const partitions = Object.entries(reader.next).map(([partition, offset]) => ({ partition: Number(partition),
    offset: String(offset) }));
  await transaction.sendOffsets({ consumerGroupId: group, topics: [{ topic: source, partitions }] });
  await transaction.commit();
  await reader.consumer.disconnect();
  await producer.disconnect();
  const out = await readAll(`${prefix}-check`, sink, false, 5, 10000);
  return { outputs: out.map(([, value]) => value), committed: await committed(group, source) };
}

async function transactionTimeout() {
  const topic = `${prefix}-timeout`;
  await create([topic, 1]);
  const producer = await transactional(`${prefix}-slow`, { transactionTimeout: 3000 });
  const transaction = await producer.transaction();
  await transaction.send({ topic, messages: [{ value: "late", partition: 0 }] });
  await sleep(8000); // past the timeout and the broker's next look at open transactions
  let error = null;
  try {
    await transaction.commit();
  } catch (failed) {
    error = await failure(producer, transaction, failed);
  }
  const read = await readAll(`${prefix}-timeout`, topic, false, 2, 5000);
  await producer.disconnect();
  return { commit_error: error, read_committed: read.map(([, value]) => value) };
}

const SCENARIOS = {
  "produce-consume": produceConsume,
  topics,
  "auto-create": autoCreate,
  "group-together": groupTogether,
  "group-late-and-leaving": groupLateAndLeaving,
  offsets,
  idempotent,
  transactions,
  fencing,
  "send-offsets": sendOffsets,
  "transaction-timeout": transactionTimeout,
};

SCENARIOS[scenario]()
  .then((outcome) => {
    process.stdout.write(JSON.stringify(outcome) + "\n");
    process.exit(0);
  })
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
