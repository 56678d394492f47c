// RocketMQ 5 scenarios with the official Node.js client (the rocketmq-client-nodejs package), written
// as its examples are; each prints its observable outcome as one JSON line, the same against halfmq
// and against Apache RocketMQ 5's proxy. The scenarios and their outcomes' fields are rmq5_python.py's.
//
//     node rmq5_nodejs.js ENDPOINT PREFIX SCENARIO    run SCENARIO, print its outcome
//     node rmq5_nodejs.js --needs PREFIX SCENARIO     print the topics and consumer groups it uses
//
// NODE_PATH names the node_modules the client is installed in; the client logs to
// ~/logs/rocketmq/rocketmq_client_nodejs.log, so stdout carries only the outcome. Its MessageView has
// no message type, so the outcomes lack rmq5_python.py's message_type and message_types.
"use strict";

const WAIT = 30000; // ms a scenario waits for what it expects before it records what it has
// ms from a dead letter's last failed attempt to its dead-letter topic's route: 15 s were not
// enough for the real broker on a machine busy with the test run.
const DEAD_LETTER_WAIT = 60000;
const AWAIT = 1000; // ms a receive long-polls (the peer's proxy is configured to allow it)
const EMPTY_ROUNDS = 3; // empty receives in a row that end a drain
const DELAY = 5; // seconds ahead a delayed message is due

// What each scenario uses: topics [suffix, queues, message type], groups [suffix, max attempts, fifo].
const NEEDS = {
  "normal": [[["orders", 2, "NORMAL"]], [["readers", null, false], ["tagged", null, false], ["sql", null, false]]],
  "async-send": [[["async", 2, "NORMAL"]], [["readers", null, false]]],
  "delay": [[["delayed", 2, "DELAY"]], [["readers", null, false]]],
  "fifo": [[["line", 1, "FIFO"]], [["fifo", null, true]]],
  "transaction": [[["txn", 2, "TRANSACTION"]], [["readers", null, false]]],
  "invisible-duration": [[["work", 1, "NORMAL"]], [["workers", null, false]]],
  "dead-letter": [[["jobs", 1, "NORMAL"]], [["failing", 3, false], ["dlq-readers", null, false]]],
  "recall": [[["timeouts", 2, "DELAY"]], [["readers", null, false]]],
};

if (process.argv[2] === "--needs") {
  const [prefix, scenario] = process.argv.slice(3);
  const [topics, groups] = NEEDS[scenario];
  console.log(JSON.stringify({
    topics: topics.map(([name, queues, kind]) => [`${prefix}-${name}`, queues, kind]),
    groups: groups.map(([name, attempts, fifo]) => [`${prefix}-${name}`, attempts, fifo]),
  }));
  process.exit(0);
}

const {
  ClientException, ConsumeResult, FilterExpression, InternalErrorException, Producer, PushConsumer, SimpleConsumer,
} = require("rocketmq-client-nodejs");
const {
  Code, FilterType, TransactionResolution,
} = require("rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb");

const CODE_NAMES = new Map(Object.entries(Code).map(([name, number]) => [number, name]));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const byKey = (entries) => Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
const text = (view) => view.body.toString();

function message(topic, body, { tag, keys = [], properties = {}, ...rest } = {}) {
  return { topic, body: Buffer.from(body), tag, keys, properties: new Map(Object.entries(properties)), ...rest };
}

async function producer(endpoints, topic, checker) {
  const started = new Producer({ endpoints, namespace: "", topic, checker });
  await started.startup();
  return started;
}

async function consumer(endpoints, consumerGroup, topic, expression = "*") {
  const started = new SimpleConsumer({
    endpoints, namespace: "", consumerGroup, subscriptions: new Map().set(topic, expression), awaitDuration: AWAIT,
  });
  await started.startup();
  return started;
}

// A consumer of a topic that the broker creates, once it has a route (asked each second), or null
// if it has none within wait ms.
async function routedConsumer(endpoints, consumerGroup, topic, wait) {
  const deadline = Date.now() + wait;
  for (;;) {
    try {
      return await consumer(endpoints, consumerGroup, topic);
    } catch (error) { // a consumer of a topic without a route fails to start, the client's error its cause's cause
      let cause = error;
      while (cause.cause) {
        cause = cause.cause;
      }
      if (!(cause instanceof ClientException)) {
        throw error;
      }
      if (Date.now() > deadline) {
        return null;
      }
      await sleep(1000);
    }
  }
}

// One receive, as an application retries it: the first ones after startup may find the group's
// settings not yet there (INTERNAL_ERROR), which a later one does.
async function receive(reader, maxMessages, invisible) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    try {
      return await reader.receive(maxMessages, invisible * 1000);
    } catch (error) {
      if (!(error instanceof InternalErrorException) || Date.now() > deadline) {
        throw error;
      }
      await sleep(500);
    }
  }
}

// Receive and acknowledge until `count` messages came, or `wait` ms passed; then until EMPTY_ROUNDS
// receives in a row come back empty (anything more, redeliveries included).
async function drain(reader, count, { wait = WAIT, invisible = 15 } = {}) {
  const got = [];
  const deadline = Date.now() + wait;
  let empty = 0;
  while (Date.now() < deadline && (got.length < count || empty < EMPTY_ROUNDS)) {
    const batch = await receive(reader, 16, invisible);
    empty = batch.length ? 0 : empty + 1;
    for (const view of batch) {
      got.push(view);
      await reader.ack(view);
    }
  }
  return got;
}

// What a consumer observes of a message but its body, without ids, hosts or times.
function seen(view) {
  return {
    topic: view.topic,
    tag: view.tag || null,
    keys: [...view.keys].sort(),
    properties: byKey(view.properties.entries()),
    message_group: view.messageGroup || null,
    delivery_attempt: view.deliveryAttempt,
  };
}

// What a consumer observed of each message, by body (a body that came twice counts in `count`).
function byBody(views) {
  return byKey(views.map((view) => [text(view), seen(view)]));
}

// `read` with property values that are ids this run made (`names`' keys) named instead.
function named(read, names) {
  for (const got of Object.values(read)) {
    got.properties = byKey(Object.entries(got.properties).map(([key, value]) => [key, names[value] ?? value]));
  }
  return read;
}

// The status code's name: a ClientException carries it; recallMessage throws a plain Error whose
// message ends "(code: N)".
function codeName(error) {
  const code = error instanceof ClientException ? error.code : /\(code: (\d+)\)/.exec(error.message)?.[1];
  return code === undefined ? error.name : CODE_NAMES.get(Number(code)) ?? String(code);
}

// Messages with keys, a tag and properties, read by one group whole, one filtering by tag and one
// by an SQL92 expression over the properties and the tag.
async function normal(endpoints, prefix) {
  const topic = `${prefix}-orders`;
  const sender = await producer(endpoints, topic);
  const receipts = [];
  for (let i = 0; i < 4; i++) {
    receipts.push(await sender.send(message(topic, `order-${i}`, {
      tag: ["created", "paid"][i % 2], keys: [`o-${i}`, `c-${i % 2}`], properties: { n: `${i}`, region: "eu-west" },
    })));
  }
  await sender.shutdown();
  const everyone = await consumer(endpoints, `${prefix}-readers`, topic);
  const read = await drain(everyone, 4);
  await everyone.shutdown();
  const filtering = await consumer(endpoints, `${prefix}-tagged`, topic, "paid");
  const tagged = await drain(filtering, 2);
  await filtering.shutdown();
  const sql = new FilterExpression("TAGS = 'paid' AND n > 1 OR n = 0", FilterType.SQL);
  const selecting = await consumer(endpoints, `${prefix}-sql`, topic, sql);
  const selected = await drain(selecting, 2);
  await selecting.shutdown();
  return {
    sent: receipts.length, ids_distinct: new Set(receipts.map((r) => r.messageId)).size === receipts.length,
    count: read.length, read: byBody(read), read_by_tag: tagged.map(text).sort(),
    read_by_sql: selected.map(text).sort(),
  };
}

async function asyncSend(endpoints, prefix) {
  const topic = `${prefix}-async`;
  const sender = await producer(endpoints, topic);
  const pending = [];
  for (let i = 0; i < 5; i++) {
    pending.push(sender.send(message(topic, `a-${i}`, { tag: "async" })));
  }
  const receipts = await Promise.all(pending);
  await sender.shutdown();
  const reader = await consumer(endpoints, `${prefix}-readers`, topic);
  const read = await drain(reader, 5);
  await reader.shutdown();
  return {
    acked: receipts.length, ids_distinct: new Set(receipts.map((r) => r.messageId)).size === 5,
    read: read.map((view) => [text(view), view.tag, view.deliveryAttempt]).sort(),
  };
}

// A message due DELAY seconds from now (a whole second: RocketMQ's timer counts whole seconds).
async function delay(endpoints, prefix) {
  const topic = `${prefix}-delayed`;
  const reader = await consumer(endpoints, `${prefix}-readers`, topic);
  const sender = await producer(endpoints, topic);
  const due = (Math.floor(Date.now() / 1000) + DELAY) * 1000;
  const receipt = await sender.send(message(topic, "remind", {
    tag: "reminder", keys: ["r-1"], deliveryTimestamp: new Date(due),
  }));
  await sender.shutdown();
  const arrivals = [];
  const deadline = Date.now() + DELAY * 1000 + WAIT;
  let empty = 0;
  while (Date.now() < deadline && (!arrivals.length || empty < EMPTY_ROUNDS)) {
    const batch = await receive(reader, 16, 15);
    empty = batch.length ? 0 : empty + 1;
    for (const view of batch) {
      arrivals.push([view, Date.now()]);
      await reader.ack(view);
    }
  }
  await reader.shutdown();
  return {
    recall_handle_given: Boolean(receipt.recallHandle), count: arrivals.length,
    read: Object.fromEntries(arrivals.map(([view, at]) => [text(view), {
      ...seen(view), arrived_after_due: at >= due, delivery_timestamp_is_due: view.deliveryTimestamp?.getTime() === due,
    }])),
  };
}

// Two message groups interleaved on one queue, read by a FIFO consumer group: while what a receive
// gave is unacknowledged nothing more of its message groups comes; each group's messages come in
// send order.
async function fifo(endpoints, prefix) {
  const topic = `${prefix}-line`;
  const sender = await producer(endpoints, topic);
  for (const n of [1, 2, 3]) {
    for (const messageGroup of ["a", "b"]) {
      await sender.send(message(topic, `${messageGroup}${n}`, { messageGroup }));
    }
  }
  await sender.shutdown();
  const reader = await consumer(endpoints, `${prefix}-fifo`, topic);
  let first = [];
  const deadline = Date.now() + WAIT;
  while (!first.length && Date.now() < deadline) {
    first = await receive(reader, 16, 20);
  }
  const held = [];
  for (let round = 0; round < 2; round++) { // while the first are in flight
    held.push(...(await receive(reader, 16, 20)).map(text));
  }
  for (const view of first) {
    await reader.ack(view);
  }
  const rest = await drain(reader, 6 - first.length);
  await reader.shutdown();
  const order = {};
  for (const view of [...first, ...rest]) {
    (order[view.messageGroup || null] ??= []).push(text(view));
  }
  return {
    first_receive: first.map(text), while_in_flight: held, order,
    attempts: [...new Set([...first, ...rest].map((view) => view.deliveryAttempt))].sort((a, b) => a - b),
  };
}

// A committed, a rolled back and a transaction whose outcome is unknown (the producer ends it neither
// way), which the broker checks back and the checker commits as the service's records say.
async function transaction(endpoints, prefix) {
  const topic = `${prefix}-txn`;
  const written = new Set(["t-commit", "t-unknown"]);
  const checked = new Set();
  const checker = {
    async check(view) {
      checked.add(text(view));
      return written.has(text(view)) ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    },
  };
  const sender = await producer(endpoints, topic, checker);
  const transactionIds = {};
  for (const body of ["t-commit", "t-rollback", "t-unknown"]) {
    const pending = sender.beginTransaction();
    const receipt = await sender.send(message(topic, body, { tag: "txn", keys: [body] }), pending);
    transactionIds[receipt.transactionId] = "<transaction id>";
    if (body === "t-commit") {
      await pending.commit();
    } else if (body === "t-rollback") {
      await pending.rollback();
    }
  }
  const reader = await consumer(endpoints, `${prefix}-readers`, topic);
  const read = await drain(reader, 2, { wait: WAIT + 10000 }); // the check-back comes after the transaction timeout
  await reader.shutdown();
  await sender.shutdown();
  // RocketMQ delivers at least once: a check-back's commit may come twice, so bodies, not a count.
  return { read: named(byBody(read), transactionIds), checked: [...checked].sort() };
}

// A message received for 30 s, its invisible duration changed to 2 s: it comes again, attempt 2.
async function invisibleDuration(endpoints, prefix) {
  const topic = `${prefix}-work`;
  const sender = await producer(endpoints, topic);
  await sender.send(message(topic, "job-1", { tag: "job" }));
  await sender.shutdown();
  const reader = await consumer(endpoints, `${prefix}-workers`, topic);
  let first = [];
  const deadline = Date.now() + WAIT;
  while (!first.length && Date.now() < deadline) {
    first = await receive(reader, 1, 30);
  }
  await reader.changeInvisibleDuration(first[0], 2000);
  const again = await drain(reader, 1);
  await reader.shutdown();
  return {
    first: first.map((view) => [text(view), view.deliveryAttempt]),
    again: again.map((view) => [text(view), view.deliveryAttempt]),
  };
}

// A PushConsumer whose listener always fails, in a group of 3 attempts: the message is delivered 3
// times, then found in the group's dead-letter topic %DLQ%<group>. (This client knows only an
// exponential retry backoff; given a customized one, it retries at once.)
async function deadLetter(endpoints, prefix) {
  const topic = `${prefix}-jobs`;
  const group = `${prefix}-failing`;
  const sender = await producer(endpoints, topic);
  const sent = await sender.send(message(topic, "poison", { tag: "job", keys: ["p-1"], properties: { kind: "poison" } }));
  await sender.shutdown();
  const attempts = [];
  const times = [];
  const messageListener = {
    async consume(view) {
      attempts.push([text(view), view.deliveryAttempt]);
      times.push(Date.now());
      return ConsumeResult.FAILURE;
    },
  };
  const pushing = new PushConsumer({
    endpoints, namespace: "", consumerGroup: group, subscriptions: new Map().set(topic, "*"), messageListener,
  });
  await pushing.startup();
  const deadline = Date.now() + WAIT;
  while (attempts.length < 3 && Date.now() < deadline) {
    await sleep(200);
  }
  // The message goes to the dead-letter topic when it is visible again (after the last failure's
  // backoff) and the group receives again: the reader starts once that topic exists.
  const reader = await routedConsumer(endpoints, `${prefix}-dlq-readers`, `%DLQ%${group}`, DEAD_LETTER_WAIT);
  await pushing.shutdown();
  const seenAttempts = [...attempts];
  const retriedSoon = times.length > 1 && times[1] - times[0] < 9000;
  if (reader === null) {
    return { attempts: seenAttempts, retried_within_9s: retriedSoon, dead_letters: "no dead-letter topic" };
  }
  const dead = await drain(reader, 1);
  await reader.shutdown();
  return {
    attempts: seenAttempts, retried_within_9s: retriedSoon, dead_letter_count: dead.length,
    dead_letters: named(byBody(dead), { [sent.messageId]: "<sent message id>" }),
  };
}

// `OK` when the recall succeeds, else the status code's name.
async function recallOnce(sender, topic, handle) {
  try {
    await sender.recallMessage(topic, handle);
  } catch (error) {
    return codeName(error);
  }
  return "OK";
}

// Two order timeouts due DELAY seconds from now; one order is paid, its timeout recalled (twice, as a
// duplicated payment event would); only the other comes, and recalling that one after it came fails.
async function recall(endpoints, prefix) {
  const topic = `${prefix}-timeouts`;
  const reader = await consumer(endpoints, `${prefix}-readers`, topic);
  const sender = await producer(endpoints, topic);
  const deliveryTimestamp = new Date((Math.floor(Date.now() / 1000) + DELAY) * 1000);
  const receipts = {};
  for (const order of ["o-paid", "o-unpaid"]) {
    receipts[order] = await sender.send(message(topic, `expire ${order}`, {
      tag: "timeout", keys: [order], deliveryTimestamp,
    }));
  }
  const recalled = await sender.recallMessage(topic, receipts["o-paid"].recallHandle);
  const again = await recallOnce(sender, topic, receipts["o-paid"].recallHandle);
  const read = await drain(reader, 1, { wait: DELAY * 1000 + WAIT });
  const after = await recallOnce(sender, topic, receipts["o-unpaid"].recallHandle);
  await sender.shutdown();
  await reader.shutdown();
  return {
    recalled_id_is_sent_id: recalled.messageId === receipts["o-paid"].messageId, recall_again: again,
    read: read.map(text), recall_after_delivery: after,
  };
}

const SCENARIOS = {
  "normal": normal,
  "async-send": asyncSend,
  "delay": delay,
  "fifo": fifo,
  "transaction": transaction,
  "invisible-duration": invisibleDuration,
  "dead-letter": deadLetter,
  "recall": recall,
};

const [endpoint, runPrefix, scenario] = process.argv.slice(2);
SCENARIOS[scenario](endpoint, runPrefix).then((outcome) => {
  console.log(JSON.stringify(outcome));
  process.exit(0); // the client's timers (heartbeats, route updates) would keep it running
}, (error) => {
  console.error(error);
  process.exit(1);
});
