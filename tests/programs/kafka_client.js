// kafkajs against halfmq's Kafka port, for the tests: the modes and output of kafka_client.py.
//   node kafka_client.js BOOTSTRAP create TOPIC PARTITIONS | produce TOPIC COUNT FIRST
//        | consume TOPIC GROUP | committed TOPIC GROUP PARTITIONS
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, mode, ...args] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "halfmq-test", brokers: [bootstrap], logLevel: logLevel.NOTHING });
const out = (fields) => process.stdout.write(JSON.stringify(fields) + "\n");
const hex = (value) => Buffer.from(value).toString("hex");
const shown = (partition, offset, key, value, headers) => ({
  partition, offset: Number(offset), key: key.toString(), value: value.toString(),
  headers: Object.entries(headers || {}).map(([name, v]) => [name, hex(v)]),
});

async function main() {
  if (mode === "create") {
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: args[0], numPartitions: Number(args[1]) }] });
    await admin.disconnect();
    out({ created: args[0] });
  } else if (mode === "produce") {
    const producer = kafka.producer();
    await producer.connect();
    const first = Number(args[2]);
    const messages = [];
    for (let i = first; i < first + Number(args[1]); i++) {
      messages.push({ key: `k${i}`, value: `v${i}`, headers: { n: `${i}`, bin: Buffer.from([0, 255]) } });
    }
    for (const m of messages) {
      const [meta] = await producer.send({ topic: args[0], acks: -1, messages: [m] });
      out(shown(meta.partition, meta.baseOffset, m.key, m.value, m.headers));
    }
    await producer.disconnect();
  } else if (mode === "consume") {
    const consumer = kafka.consumer({ groupId: args[1], sessionTimeout: 6000, heartbeatInterval: 500 });
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      out({ assigned: (e.payload.memberAssignment[args[0]] || []).slice().sort((a, b) => a - b) });
    });
    await consumer.connect();
    await consumer.subscribe({ topic: args[0], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        out({ record: shown(partition, message.offset, message.key, message.value, message.headers) });
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }]);
      },
    });
    process.stdin.once("data", async () => {
      await consumer.disconnect();
      out({ closed: true });
      process.exit(0);
    });
  } else if (mode === "committed") {
    const admin = kafka.admin();
    await admin.connect();
    const [found] = await admin.fetchOffsets({ groupId: args[1], topics: [args[0]] });
    const committed = {};
    for (const p of found.partitions) committed[p.partition] = Number(p.offset);
    out({ committed });
    await admin.disconnect();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
