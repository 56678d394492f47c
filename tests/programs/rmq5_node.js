// A RocketMQ 5 transactional producer and SimpleConsumer using the official Node.js client,
// for the compat tests. Usage: node rmq5_node.js ENDPOINT MODE [GROUP]
//   send     commit "node-commit", roll back "node-rollback", send "node-normal", print SENT lines, exit
//   orphan   send "node-orphan" as a half message, print ORPHANED, wait to be killed
//   checker  answer checks with COMMIT until stdin closes
//   drain    SimpleConsumer of GROUP: receive and ack until the queues stay empty, print GOT lines
//   delay    send "node-delay-kept" and "node-delay-recalled" due in 4 s, recall the second, print
//            SENT and RECALLED lines, exit
//   push     PushConsumer of GROUP for SECONDS (argument 5): MODE (argument 4) "flaky" fails the
//            first two deliveries of a message, "failing" every one; print "GOT body attempt" lines
//   fifo     send a1 b1 a2 b2 a3 b3 with message groups a and b, print SENT lines, exit
//   fifo-drain  SimpleConsumer of GROUP: receive and ack until the queues stay empty, print
//            "GOT body attempt round" lines (round: the receive that brought it)
"use strict";
const { ConsumeResult, Producer, PushConsumer, SimpleConsumer } = require("rocketmq-client-nodejs");

const COMMIT = 1;
const [endpoint, mode, group, behaviour, seconds] = process.argv.slice(2);
const checker = {
  async check(message) {
    console.log(`CHECKED ${message.body.toString()}`);
    return COMMIT;
  },
};

async function main() {
  if (mode === "push") {
    const listener = {
      consume(message) {
        console.log(`GOT ${message.body.toString()} ${message.deliveryAttempt}`);
        const fails = behaviour === "failing" || message.deliveryAttempt <= 2;
        return fails ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
      },
    };
    const consumer = new PushConsumer({
      endpoints: endpoint, consumerGroup: group, subscriptions: new Map().set("orders", "*"), messageListener: listener,
    });
    await consumer.startup();
    await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
    return;  // no shutdown: it waits out the receives in flight, up to 30 s of long polling
  }
  if (mode === "drain" || mode === "fifo-drain") {
    const consumer = new SimpleConsumer({
      endpoints: endpoint, consumerGroup: group, subscriptions: new Map().set("orders", "*"), awaitDuration: 1000,
    });
    await consumer.startup();
    let empty = 0;
    for (let round = 0; empty < 8; round++) {
      const messages = await consumer.receive(16, 15000);
      empty = messages.length ? 0 : empty + 1;
      for (const message of messages) {
        const seen = mode === "fifo-drain" ? ` ${round}` : "";
        console.log(`GOT ${message.body.toString()} ${message.deliveryAttempt}${seen}`);
        await consumer.ack(message);
      }
    }
    await consumer.shutdown();
    return;
  }
  const producer = new Producer({ endpoints: endpoint, topic: "orders", checker });
  await producer.startup();
  const message = (body) => ({ topic: "orders", tag: "node", keys: [body], body: Buffer.from(body) });
  if (mode === "send") {
    for (const [body, commit] of [["node-commit", true], ["node-rollback", false]]) {
      const transaction = producer.beginTransaction();
      const receipt = await producer.send(message(body), transaction);
      await (commit ? transaction.commit() : transaction.rollback());
      console.log(`SENT ${body} ${receipt.messageId} ${receipt.transactionId}`);
    }
    const normal = await producer.send(message("node-normal"));
    console.log(`SENT node-normal ${normal.messageId}`);
    await producer.shutdown();
  } else if (mode === "delay") {
    const due = new Date(Date.now() + 4000);
    const receipts = {};
    for (const body of ["node-delay-kept", "node-delay-recalled"]) {
      receipts[body] = await producer.send({ ...message(body), deliveryTimestamp: due });
      console.log(`SENT ${body} ${receipts[body].messageId}`);
    }
    const recalled = await producer.recallMessage("orders", receipts["node-delay-recalled"].recallHandle);
    console.log(`RECALLED ${recalled.messageId}`);
    await producer.shutdown();
  } else if (mode === "fifo") {
    for (const n of [1, 2, 3]) {
      for (const messageGroup of ["a", "b"]) {
        const receipt = await producer.send({ ...message(`${messageGroup}${n}`), messageGroup });
        console.log(`SENT ${messageGroup}${n} ${receipt.messageId}`);
      }
    }
    await producer.shutdown();
  } else if (mode === "orphan") {
    await producer.send(message("node-orphan"), producer.beginTransaction());
    console.log("ORPHANED");
    await new Promise(() => {});
  } else {
    console.log("CHECKER READY");
    process.stdin.resume();
    await new Promise((resolve) => process.stdin.on("end", resolve));
    await producer.shutdown();
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
