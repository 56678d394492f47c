/*
 * RocketMQ scenarios with the classic (remoting) Java client, org.apache.rocketmq:rocketmq-client,
 * written as RocketMQ's own examples are (example/: quickstart Producer, simple AsyncProducer and
 * OnewayProducer, batch SimpleBatchProducer, transaction TransactionProducer and
 * TransactionListenerImpl, quickstart Consumer, order Producer and Consumer, schedule
 * ScheduledMessageProducer and timer TimerMessageProducer, filter TagFilterProducer,
 * SqlFilterProducer and their consumers, broadcast PushConsumer, simple LitePullConsumerAssign and
 * LitePullConsumerSubscribe); each prints its observable outcome as
 * one JSON line, the same against halfmq's name server and against Apache RocketMQ's.
 *
 *     java RmqClassicJava.java NAMESRV PREFIX SCENARIO    run SCENARIO, print its outcome
 *     java RmqClassicJava.java --needs PREFIX SCENARIO    print the topics it uses (and no groups:
 *                                                          a remoting client's groups need no creating)
 *
 * Run by Java's source launcher with the client on the classpath (tests/conformance/java.py). The
 * client logs to ~/logs/rocketmqlogs/rocketmq_client.log, so stdout carries only the outcome.
 *
 * What an outcome leaves out, as not the broker's to decide: message ids (the client makes them;
 * only whether the reader saw the ids the sender was given is kept) and which queue a send picks
 * (the producer goes round the topic's queues from a random one, so a queue is recorded counted
 * from the first send's queue). A topic is new in each run, so its queue offsets start at 0. A
 * committed transaction's properties name the ids they hold, and TRANSACTION_CHECK_TIMES (how often
 * the broker checked it back before its answer was in) is kept as present, not as a count.
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.MixAll;

public class RmqClassicJava {
    static final long WAIT = 30_000; // ms a scenario waits for what it expects before it records what it has
    static final long CHECK_WAIT = 60_000; // ms the transaction scenario waits for the broker's check-backs
    static final long SETTLE = 5_000; // ms a transaction's reader goes on reading once it has what it expects
    static final long FILTER_QUIET = 15_000; // ms the filter scenario's push consumers read at least

    /**
     * Push consumers rebalance every second, not every 20 s: a rebalance that finds no route yet (a
     * new group's retry topic, made by its first heartbeat) is tried again only then. Read as the
     * client's first instance starts.
     */
    static void rebalanceEverySecond() {
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
    }
    // A call waits 20 s (the quickstart Producer's send timeout), not the client's 3 s: the real
    // broker, its JVM beside the suite's on two cores, has been seen to take over 3 s to answer.
    static final int TIMEOUT = 20_000;

    record Topic(String name, int queues, String type) {
    }

    /** What each scenario uses: topics (suffix, queues, message type). */
    static final Map<String, List<Topic>> NEEDS = Map.of(
        "quickstart", List.of(new Topic("orders", 4, "NORMAL")),
        "async-oneway", List.of(new Topic("async", 2, "NORMAL")),
        "batch", List.of(new Topic("batch", 1, "NORMAL")),
        "transaction", List.of(new Topic("txn", 2, "TRANSACTION")),
        "retry", List.of(new Topic("retry", 1, "NORMAL")),
        "orderly", List.of(new Topic("orderly", 2, "NORMAL")),
        "scheduled", List.of(new Topic("scheduled", 1, "DELAY")),
        "filter", List.of(new Topic("filter", 2, "NORMAL")),
        "broadcasting", List.of(new Topic("broadcast", 2, "NORMAL")));

    public static void main(String[] args) throws Exception {
        if (args[0].equals("--needs")) {
            String prefix = args[1];
            Map<String, Object> plan = new TreeMap<>();
            plan.put("topics", NEEDS.get(args[2]).stream()
                .map(t -> List.of(prefix + "-" + t.name(), t.queues(), t.type())).toList());
            plan.put("groups", List.of());
            System.out.println(json(plan));
            return;
        }
        Scenarios scenarios = new Scenarios(args[0], args[1]);
        Map<String, Object> outcome = switch (args[2]) {
            case "quickstart" -> scenarios.quickstart();
            case "async-oneway" -> scenarios.asyncOneway();
            case "batch" -> scenarios.batch();
            case "transaction" -> scenarios.transaction();
            case "retry" -> scenarios.retry();
            case "orderly" -> scenarios.orderly();
            case "scheduled" -> scenarios.scheduled();
            case "filter" -> scenarios.filter();
            case "broadcasting" -> scenarios.broadcasting();
            default -> throw new IllegalArgumentException("no scenario " + args[2]);
        };
        System.out.println(json(outcome));
        System.exit(0); // the client's scheduler threads would keep the JVM up a while
    }

    static final class Scenarios {
        final String namesrv;
        final String prefix;

        Scenarios(String namesrv, String prefix) {
            this.namesrv = namesrv;
            this.prefix = prefix;
        }

        /** A producer of {@code topic}, started with the topic's route (see {@link #routed}). */
        DefaultMQProducer producer(String topic) throws Exception {
            DefaultMQProducer producer = new DefaultMQProducer(prefix + "-producer");
            producer.setNamesrvAddr(namesrv);
            producer.setSendMsgTimeout(TIMEOUT);
            producer.setMqClientApiTimeout(TIMEOUT);
            producer.start();
            routed(producer, topic);
            return producer;
        }

        /**
         * Ask for {@code topic}'s route once a producer started, as the 5.x client does for the topics
         * given to its constructor (which 4.9.x lacks): the async sends' threads would otherwise ask
         * at once, and one that waits over 3 s for another's answer (as happens on a busy machine)
         * sends with the default topic's route instead, to queues the topic may not have (seen
         * against the real broker).
         */
        static void routed(DefaultMQProducer producer, String topic) {
            producer.getDefaultMQProducerImpl().getmQClientFactory().updateTopicRouteInfoFromNameServer(topic);
        }

        /**
         * A push consumer of every message of {@code topic}, from its first offset, allowing
         * {@code maxReconsumeTimes}; it asks for routes every second rather than every 30.
         */
        DefaultMQPushConsumer pushConsumer(String group, String topic, int maxReconsumeTimes) throws Exception {
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
            consumer.setNamesrvAddr(namesrv);
            consumer.setMqClientApiTimeout(TIMEOUT);
            consumer.setPollNameServerInterval(1000);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setMaxReconsumeTimes(maxReconsumeTimes);
            consumer.subscribe(topic, "*");
            return consumer;
        }

        /** A message as the examples make one: topic, tag, key and body, and a user property. */
        Message message(String topic, String tag, String key, String body, int n) {
            Message message = new Message(topic, tag, key, body.getBytes(StandardCharsets.UTF_8));
            message.putUserProperty("n", String.valueOf(n));
            return message;
        }

        /**
         * The quickstart Producer: 8 synchronous sends round the topic's 4 queues, tags TagA and TagB in
         * turn, keys o-0..o-7; then everything read back from the start of each queue.
         */
        Map<String, Object> quickstart() throws Exception {
            String topic = prefix + "-orders";
            List<SendResult> results = new ArrayList<>();
            DefaultMQProducer producer = producer(topic);
            try {
                for (int i = 0; i < 8; i++) {
                    Message msg = message(topic, i % 2 == 0 ? "TagA" : "TagB", "o-" + i, "Hello RocketMQ " + i, i);
                    results.add(producer.send(msg, TIMEOUT));
                }
            } finally {
                producer.shutdown();
            }
            int first = results.get(0).getMessageQueue().getQueueId();
            List<MessageExt> read = read(prefix + "-reader", topic, got -> got.size() >= 8, WAIT);
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("sent", results.stream().map(r -> {
                Map<String, Object> sent = new TreeMap<>();
                sent.put("status", r.getSendStatus().name());
                sent.put("topic", r.getMessageQueue().getTopic());
                sent.put("queue_id", queueFrom(r.getMessageQueue().getQueueId(), first, 4));
                sent.put("queue_offset", r.getQueueOffset());
                sent.put("region_id", r.getRegionId());
                return sent;
            }).toList());
            outcome.put("read", read.stream().map(m -> {
                Map<String, Object> seen = seen(m);
                seen.put("queue_id", queueFrom(m.getQueueId(), first, 4));
                return seen;
            }).sorted(BY_BODY).toList());
            outcome.put("msg_ids_match", sameIds(results.stream().map(SendResult::getMsgId), read.stream().map(MessageExt::getMsgId)));
            outcome.put("offset_msg_ids_match", sameIds(results.stream().map(SendResult::getOffsetMsgId),
                read.stream().map(m -> ((MessageClientExt) m).getOffsetMsgId())));
            return outcome;
        }

        /** AsyncProducer's 4 sends, their callbacks awaited, and OnewayProducer's 4; then all read back. */
        Map<String, Object> asyncOneway() throws Exception {
            String topic = prefix + "-async";
            List<String> callbacks = Collections.synchronizedList(new ArrayList<>());
            DefaultMQProducer producer = producer(topic);
            try {
                CountDownLatch countDownLatch = new CountDownLatch(4);
                for (int i = 0; i < 4; i++) {
                    Message msg = message(topic, "TagA", "a-" + i, "async " + i, i);
                    producer.send(msg, new SendCallback() {
                        @Override
                        public void onSuccess(SendResult sendResult) {
                            callbacks.add(sendResult.getSendStatus().name());
                            countDownLatch.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            callbacks.add(e.getClass().getSimpleName());
                            countDownLatch.countDown();
                        }
                    });
                }
                countDownLatch.await(WAIT, TimeUnit.MILLISECONDS);
                for (int i = 0; i < 4; i++) {
                    producer.sendOneway(message(topic, "TagB", "w-" + i, "oneway " + i, i));
                }
            } finally {
                producer.shutdown();
            }
            List<MessageExt> read = read(prefix + "-reader", topic, got -> got.size() >= 8, WAIT);
            Map<String, Object> outcome = new TreeMap<>();
            synchronized (callbacks) {
                outcome.put("async", callbacks.stream().sorted().toList());
            }
            outcome.put("read", read.stream().map(RmqClassicJava::body).sorted().toList());
            return outcome;
        }

        /** SimpleBatchProducer: one send of 5 messages, to the topic's one queue; then read back. */
        Map<String, Object> batch() throws Exception {
            String topic = prefix + "-batch";
            SendResult result;
            DefaultMQProducer producer = producer(topic);
            try {
                List<Message> messages = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    messages.add(message(topic, "Tag", "OrderID00" + i, "Hello world " + i, i));
                }
                result = producer.send(messages);
            } finally {
                producer.shutdown();
            }
            List<MessageExt> read = read(prefix + "-reader", topic, got -> got.size() >= 5, WAIT);
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("status", result.getSendStatus().name());
            outcome.put("queue_id", result.getMessageQueue().getQueueId());
            outcome.put("queue_offset", result.getQueueOffset());
            outcome.put("msg_ids", result.getMsgId().split(",").length);
            outcome.put("read", read.stream().map(RmqClassicJava::seen).sorted(BY_BODY).toList());
            outcome.put("msg_ids_match", sameIds(Arrays.stream(result.getMsgId().split(",")), read.stream().map(MessageExt::getMsgId)));
            outcome.put("offset_msg_ids_match", sameIds(Arrays.stream(result.getOffsetMsgId().split(",")),
                read.stream().map(m -> ((MessageClientExt) m).getOffsetMsgId())));
            return outcome;
        }

        /**
         * TransactionProducer with a TransactionListener in TransactionListenerImpl's way: the local
         * transaction of t-0 commits, of t-1 rolls back, of t-2 and t-3 is not known when the half
         * message is sent (UNKNOW); the broker checks those back, and they turn out committed (t-2)
         * and rolled back (t-3).
         */
        Map<String, Object> transaction() throws Exception {
            String topic = prefix + "-txn";
            Map<String, LocalTransactionState> localTrans = Map.of(
                "t-0", LocalTransactionState.COMMIT_MESSAGE, "t-1", LocalTransactionState.ROLLBACK_MESSAGE,
                "t-2", LocalTransactionState.COMMIT_MESSAGE, "t-3", LocalTransactionState.ROLLBACK_MESSAGE);
            Set<String> known = Set.of("t-0", "t-1");
            Map<String, Integer> checks = new ConcurrentHashMap<>();
            TransactionListener transactionListener = new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                    return known.contains(msg.getKeys()) ? localTrans.get(msg.getKeys()) : LocalTransactionState.UNKNOW;
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    checks.merge(msg.getKeys(), 1, Integer::sum);
                    return localTrans.getOrDefault(msg.getKeys(), LocalTransactionState.UNKNOW);
                }
            };
            TransactionMQProducer producer = new TransactionMQProducer(prefix + "-txn-producer");
            producer.setNamesrvAddr(namesrv);
            producer.setSendMsgTimeout(TIMEOUT);
            producer.setMqClientApiTimeout(TIMEOUT);
            producer.setTransactionListener(transactionListener);
            producer.start();
            routed(producer, topic);
            List<List<String>> sent = new ArrayList<>();
            Map<String, String> names = new TreeMap<>(); // ids this run made, by what they are
            List<MessageExt> read;
            try {
                for (int i = 0; i < 4; i++) {
                    Message msg = message(topic, "TagA", "t-" + i, "txn " + i, i);
                    TransactionSendResult sendResult = producer.sendMessageInTransaction(msg, null);
                    sent.add(List.of("t-" + i, sendResult.getSendStatus().name(), sendResult.getLocalTransactionState().name()));
                    names.put(sendResult.getMsgId(), "<msg id of t-" + i + ">");
                    if (sendResult.getTransactionId() != null) {
                        names.put(sendResult.getTransactionId(), "<transaction id of t-" + i + ">");
                    }
                }
                // The producer stays up to answer check-backs while the reader waits for the commits.
                Set<String> committed = Set.of("txn 0", "txn 2");
                read = read(prefix + "-reader", topic,
                    got -> bodies(got).containsAll(committed) && checks.keySet().containsAll(Set.of("t-2", "t-3")), CHECK_WAIT, SETTLE);
            } finally {
                producer.shutdown();
            }
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("sent", sent);
            outcome.put("read", new ArrayList<>(bodies(read))); // at least once: a commit may come twice
            outcome.put("checked_at_least_once", new ArrayList<>(new TreeSet<>(checks.keySet())));
            Map<String, Object> properties = new TreeMap<>();
            for (MessageExt m : read) {
                Map<String, String> user = userProperties(m);
                user.replaceAll((key, value) -> names.getOrDefault(value, value));
                // How often the broker checked a transaction back before its answer was in is a matter of timing.
                user.computeIfPresent(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES, (key, value) -> "<checks>");
                properties.put(body(m), user);
            }
            outcome.put("properties", properties);
            return outcome;
        }

        /**
         * The quickstart Consumer (a DefaultMQPushConsumer) whose listener fails some messages, asking
         * for delay level 1 (a second) before the next delivery: r-0 is consumed at once, r-1 fails
         * its first delivery, r-2 fails every one and, the consumer allowing 2 reconsumes, ends in the
         * group's dead-letter topic, which is then read. The consumer asks for routes and rebalances
         * every second rather than every 30 and 20 s, on both brokers alike.
         */
        Map<String, Object> retry() throws Exception {
            rebalanceEverySecond();
            String topic = prefix + "-retry";
            String group = prefix + "-retry-consumer";
            Map<String, String> firstIds = new ConcurrentHashMap<>();
            DefaultMQProducer producer = producer(topic);
            try {
                for (int i = 0; i < 3; i++) {
                    SendResult sent = producer.send(message(topic, "TagA", "r-" + i, "retry " + i, i), TIMEOUT);
                    firstIds.put("retry " + i, sent.getMsgId());
                }
            } finally {
                producer.shutdown();
            }
            List<Map<String, Object>> deliveries = Collections.synchronizedList(new ArrayList<>());
            Set<String> failOnce = Set.of("retry 1");
            Set<String> failAlways = Set.of("retry 2");
            DefaultMQPushConsumer consumer = pushConsumer(group, topic, 2);
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                boolean failed = false;
                for (MessageExt m : msgs) {
                    Map<String, Object> seen = seen(m);
                    seen.remove("queue_offset"); // a retry's place in the group's retry topic
                    seen.put("first_msg_id", m.getMsgId().equals(firstIds.get(body(m))));
                    deliveries.add(seen);
                    failed |= failAlways.contains(body(m)) || failOnce.contains(body(m)) && m.getReconsumeTimes() == 0;
                }
                if (failed) {
                    context.setDelayLevelWhenNextConsume(1);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            try {
                long deadline = System.currentTimeMillis() + CHECK_WAIT;
                while (deliveries.size() < 6 && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                }
                Thread.sleep(SETTLE); // anything beyond what was expected shows
            } finally {
                consumer.shutdown();
            }
            String deadLetters = MixAll.getDLQTopic(group);
            List<MessageExt> dead = read(prefix + "-dlq-reader", deadLetters, got -> !got.isEmpty(), WAIT, 0);
            Map<String, Object> outcome = new TreeMap<>();
            synchronized (deliveries) {
                outcome.put("deliveries", deliveries.stream().sorted(BY_BODY.thenComparing(m -> (Integer) m.get("reconsume_times"))).toList());
            }
            outcome.put("dead_letters", dead.stream().map(m -> {
                Map<String, Object> seen = seen(m);
                seen.put("first_msg_id", m.getMsgId().equals(firstIds.get(body(m))));
                seen.put("retry_topic", String.valueOf(m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC)));
                return seen;
            }).sorted(BY_BODY).toList());
            return outcome;
        }

        /**
         * The order example: a Producer sends the four steps of orders 0 and 1, each order to one
         * queue (a MessageQueueSelector by order id), and a Consumer with a MessageListenerOrderly
         * reads them. Step 1 of order 0 fails its first delivery (the queue waits a moment, then it
         * comes again before step 2); step 3 of order 1 fails every time, and the consumer allowing
         * one reconsume, it gives the message up to the group's dead-letter topic, which is then read.
         */
        Map<String, Object> orderly() throws Exception {
            rebalanceEverySecond();
            String topic = prefix + "-orderly";
            String group = prefix + "-orderly-consumer";
            DefaultMQProducer producer = producer(topic);
            try {
                for (int orderId = 0; orderId < 2; orderId++) {
                    for (int step = 0; step < 4; step++) {
                        Message msg = message(topic, "TagA", "o-" + orderId, "order " + orderId + " step " + step, step);
                        producer.send(msg, (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), orderId, TIMEOUT);
                    }
                }
            } finally {
                producer.shutdown();
            }
            Map<String, List<List<Object>>> byOrder = new ConcurrentHashMap<>();
            String failOnce = "order 0 step 1";
            String failAlways = "order 1 step 3";
            DefaultMQPushConsumer consumer = pushConsumer(group, topic, 1);
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    byOrder.computeIfAbsent(m.getKeys(), k -> Collections.synchronizedList(new ArrayList<>()))
                        .add(List.of(body(m), m.getReconsumeTimes()));
                    if (body(m).equals(failAlways) || body(m).equals(failOnce) && m.getReconsumeTimes() == 0) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            consumer.start();
            try {
                long deadline = System.currentTimeMillis() + CHECK_WAIT;
                while (byOrder.values().stream().mapToInt(List::size).sum() < 10 && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                }
                Thread.sleep(SETTLE); // anything beyond what was expected shows
            } finally {
                consumer.shutdown();
            }
            List<MessageExt> dead = read(prefix + "-dlq-reader", MixAll.getDLQTopic(group), got -> !got.isEmpty(), WAIT, 0);
            Map<String, Object> outcome = new TreeMap<>(byOrder);
            outcome.put("dead_letters", dead.stream().map(m -> {
                Map<String, Object> seen = seen(m);
                seen.put("retry_topic", String.valueOf(m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC)));
                return seen;
            }).sorted(BY_BODY).toList());
            return outcome;
        }

        /**
         * ScheduledMessageProducer's delay level 2 (5 s), and (5.x) TimerMessageProducer's three ways of
         * saying when: a delivery time 3 s ahead, a delay of 3,000 ms and of 3 s, to a topic of
         * delayed messages; beside them a message sent at once (the broker takes it there, as a
         * classic client's send is not checked for its topic's type). Each is read back, with whether it became readable no sooner than it was due
         * (its store time against its born time, both the machine's clock).
         */
        Map<String, Object> scheduled() throws Exception {
            String topic = prefix + "-scheduled";
            Map<String, Long> delays = new TreeMap<>(); // body: ms it waits
            DefaultMQProducer producer = producer(topic);
            try {
                List<Message> sending = new ArrayList<>();
                Message level = message(topic, "TagA", "s-level", "level 2", 0);
                level.setDelayTimeLevel(2);
                sending.add(level);
                delays.put("level 2", 5_000L);
                if (TIMERS) {
                    Message deliverAt = message(topic, "TagA", "s-deliver", "deliver at", 1);
                    timer(deliverAt, "setDeliverTimeMs", System.currentTimeMillis() + 3_000);
                    delays.put("deliver at", 3_000L);
                    Message delayMs = message(topic, "TagA", "s-ms", "delay ms", 2);
                    timer(delayMs, "setDelayTimeMs", 3_000);
                    delays.put("delay ms", 3_000L);
                    Message delaySec = message(topic, "TagA", "s-sec", "delay sec", 3);
                    timer(delaySec, "setDelayTimeSec", 3);
                    delays.put("delay sec", 3_000L);
                    sending.addAll(List.of(deliverAt, delayMs, delaySec));
                }
                sending.add(message(topic, "TagA", "s-now", "now", 4));
                delays.put("now", 0L);
                for (Message msg : sending) {
                    producer.send(msg, TIMEOUT);
                }
            } finally {
                producer.shutdown();
            }
            List<MessageExt> read = read(prefix + "-reader", topic, got -> got.size() >= delays.size(), WAIT, SETTLE);
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("read", read.stream().map(m -> {
                Map<String, Object> seen = seen(m);
                seen.remove("queue_offset"); // the order in which they came due
                // A timing wheel of a second's grain may hand a message out up to a second early.
                seen.put("not_before_due", m.getStoreTimestamp() - m.getBornTimestamp() >= delays.get(body(m)) - 1_000);
                return seen;
            }).sorted(BY_BODY).toList());
            return outcome;
        }

        /**
         * The filter examples: 12 messages tagged TagA, TagB and TagC in turn, with properties a (their
         * number), f (a decimal) and, on some, s; then a push consumer of its own group per filter, TAG
         * (TagFilterConsumer's) or SQL92 (SqlFilterConsumer's, and others that reach RocketMQ's
         * three-valued logic and its reading of properties as numbers), and a LitePullConsumerSubscribe
         * with an SQL92 filter, whose pulls carry it. Each records the bodies it got; a filter that does
         * not parse records the code its consumer's start fails with.
         */
        Map<String, Object> filter() throws Exception {
            rebalanceEverySecond();
            String topic = prefix + "-filter";
            String[] tags = {"TagA", "TagB", "TagC"};
            DefaultMQProducer producer = producer(topic);
            try {
                for (int i = 0; i < 12; i++) {
                    Message msg = message(topic, tags[i % 3], "f-" + i, "filter " + i, i);
                    msg.putUserProperty("a", String.valueOf(i));
                    msg.putUserProperty("f", i + ".5");
                    if (i % 4 != 0) {
                        msg.putUserProperty("s", i % 2 == 0 ? "hello " + i : "world " + i);
                    }
                    producer.send(msg, TIMEOUT);
                }
            } finally {
                producer.shutdown();
            }
            Map<String, MessageSelector> filters = new TreeMap<>();
            filters.put("tag", MessageSelector.byTag("TagA || TagC"));
            filters.put("sql-example", MessageSelector.bySql(
                "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)"));
            filters.put("sql-null", MessageSelector.bySql("s STARTSWITH 'he' OR s IS NULL"));
            filters.put("sql-unknown", MessageSelector.bySql("NOT (s CONTAINS 'world') AND s <> 'hello 6'"));
            filters.put("sql-numbers", MessageSelector.bySql("f > 2 OR a >= 10.5 OR (a > 7 AND a < 9)"));
            filters.put("sql-bad", MessageSelector.bySql("a > 'x'"));
            Map<String, Object> outcome = new TreeMap<>();
            Map<String, Set<String>> got = new TreeMap<>();
            List<DefaultMQPushConsumer> consumers = new ArrayList<>();
            try {
                for (Map.Entry<String, MessageSelector> entry : filters.entrySet()) {
                    Set<String> bodies = Collections.synchronizedSet(new TreeSet<>());
                    DefaultMQPushConsumer consumer = pushConsumer(prefix + "-" + entry.getKey(), topic, 16);
                    consumer.subscribe(topic, entry.getValue());
                    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                        msgs.forEach(m -> bodies.add(body(m)));
                        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                    });
                    try {
                        consumer.start();
                        consumers.add(consumer);
                        got.put(entry.getKey(), bodies);
                    } catch (MQClientException e) {
                        outcome.put(entry.getKey() + "-refused", e.getResponseCode());
                        consumer.shutdown();
                    }
                }
                long started = System.currentTimeMillis(); // the push consumers, all of them
                Set<String> pulled = new TreeSet<>();
                DefaultLitePullConsumer litePullConsumer = new DefaultLitePullConsumer(prefix + "-lite-sql");
                litePullConsumer.setNamesrvAddr(namesrv);
                litePullConsumer.setMqClientApiTimeout(TIMEOUT);
                litePullConsumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                litePullConsumer.subscribe(topic, MessageSelector.bySql("a IN ('1', '2', '11') OR TAGS = 'TagC' AND a < 4"));
                litePullConsumer.start();
                try {
                    long deadline = System.currentTimeMillis() + WAIT;
                    long grew = System.currentTimeMillis();
                    while (System.currentTimeMillis() < deadline && (pulled.isEmpty() || System.currentTimeMillis() - grew < SETTLE)) {
                        int before = pulled.size();
                        litePullConsumer.poll(1000).forEach(m -> pulled.add(body(m)));
                        if (pulled.size() > before) {
                            grew = System.currentTimeMillis();
                        }
                    }
                } finally {
                    litePullConsumer.shutdown();
                }
                got.put("lite-pull-sql", pulled);
                // The push consumers get FILTER_QUIET ms from their start, then until none got anything
                // for a while: the real broker once gave one of them nothing in the time the others
                // took (a consumer whose pull is refused, as before its filter is known, pulls again
                // only 3 s later).
                int total = -1;
                long deadline = System.currentTimeMillis() + WAIT;
                while (System.currentTimeMillis() < deadline) {
                    int now = got.values().stream().mapToInt(Set::size).sum();
                    if (now == total && now > 0 && System.currentTimeMillis() - started >= FILTER_QUIET) {
                        break;
                    }
                    total = now;
                    Thread.sleep(SETTLE);
                }
            } finally {
                consumers.forEach(DefaultMQPushConsumer::shutdown);
            }
            got.forEach((name, bodies) -> outcome.put(name, new ArrayList<>(bodies)));
            return outcome;
        }

        /**
         * The broadcast example: two push consumers of one group, in BROADCASTING mode (each in a
         * client instance of its own, as in two processes), after 4 sends: each gets every message.
         */
        Map<String, Object> broadcasting() throws Exception {
            rebalanceEverySecond();
            String topic = prefix + "-broadcast";
            DefaultMQProducer producer = producer(topic);
            try {
                for (int i = 0; i < 4; i++) {
                    producer.send(message(topic, "TagA", "b-" + i, "broadcast " + i, i), TIMEOUT);
                }
            } finally {
                producer.shutdown();
            }
            Map<String, Set<String>> got = new TreeMap<>();
            List<DefaultMQPushConsumer> consumers = new ArrayList<>();
            try {
                for (String instance : List.of("first", "second")) {
                    Set<String> bodies = Collections.synchronizedSet(new TreeSet<>());
                    DefaultMQPushConsumer consumer = pushConsumer(prefix + "-broadcast-group", topic, 16);
                    consumer.setInstanceName(prefix + "-" + instance);
                    broadcastMode(consumer);
                    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                        msgs.forEach(m -> bodies.add(body(m)));
                        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                    });
                    consumer.start();
                    consumers.add(consumer);
                    got.put(instance, bodies);
                }
                long deadline = System.currentTimeMillis() + WAIT;
                while (got.values().stream().anyMatch(b -> b.size() < 4) && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                }
                Thread.sleep(SETTLE); // anything beyond what was expected shows
            } finally {
                consumers.forEach(DefaultMQPushConsumer::shutdown);
            }
            Map<String, Object> outcome = new TreeMap<>();
            got.forEach((instance, bodies) -> outcome.put(instance, new ArrayList<>(bodies)));
            return outcome;
        }

        /** LitePullConsumerAssign, reading every queue of {@code topic} from its start until {@code enough} or {@code wait} ms. */
        List<MessageExt> read(String group, String topic, Predicate<List<MessageExt>> enough, long wait) throws Exception {
            return read(group, topic, enough, wait, 0);
        }

        /**
         * LitePullConsumerAssign, reading every queue of {@code topic} from its start until {@code enough}
         * or {@code wait} ms, then for {@code settle} ms more (at least one more poll: anything beyond
         * what was expected shows).
         *
         * A new group starts from each queue's first offset, rather than the example's seek: a seek
         * interrupts the pull thread of the queue, which the client answers by closing the broker
         * connection that thread was using, failing whatever else was on it (the seek's own offset
         * queries included: seen against the real broker).
         */
        List<MessageExt> read(String group, String topic, Predicate<List<MessageExt>> enough, long wait, long settle) throws Exception {
            DefaultLitePullConsumer litePullConsumer = new DefaultLitePullConsumer(group);
            litePullConsumer.setNamesrvAddr(namesrv);
            litePullConsumer.setMqClientApiTimeout(TIMEOUT);
            litePullConsumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            litePullConsumer.start();
            List<MessageExt> got = new ArrayList<>();
            try {
                Collection<MessageQueue> mqSet = litePullConsumer.fetchMessageQueues(topic);
                List<MessageQueue> assignList = new ArrayList<>(mqSet);
                litePullConsumer.assign(assignList);
                long deadline = System.currentTimeMillis() + wait;
                while (!enough.test(got) && System.currentTimeMillis() < deadline) {
                    got.addAll(litePullConsumer.poll(1000));
                }
                long settled = System.currentTimeMillis() + settle;
                do {
                    got.addAll(litePullConsumer.poll(1000));
                } while (System.currentTimeMillis() < settled);
            } finally {
                litePullConsumer.shutdown();
            }
            return got;
        }
    }

    /** Whether the client has 5.x's timer messages; 4.9.x has delay levels only. */
    static final boolean TIMERS = Arrays.stream(Message.class.getMethods()).anyMatch(m -> m.getName().equals("setDeliverTimeMs"));

    /**
     * A 5.x timer message setter ({@code setDeliverTimeMs}, {@code setDelayTimeMs},
     * {@code setDelayTimeSec}), called by name: 4.9.x has no timer messages, and this program also
     * compiles against it (its scenarios there leave timers out: {@link #TIMERS}).
     */
    static void timer(Message message, String setter, long value) throws Exception {
        Message.class.getMethod(setter, long.class).invoke(message, value);
    }

    /**
     * {@code consumer.setMessageModel(MessageModel.BROADCASTING)}, the enum looked up by name:
     * MessageModel moved from {@code org.apache.rocketmq.common.protocol.heartbeat} (4.9.x) to
     * {@code org.apache.rocketmq.remoting.protocol.heartbeat} (5.x), and this program compiles against both.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static void broadcastMode(DefaultMQPushConsumer consumer) throws Exception {
        java.lang.reflect.Method setter = Arrays.stream(DefaultMQPushConsumer.class.getMethods())
            .filter(m -> m.getName().equals("setMessageModel")).findFirst().orElseThrow();
        setter.invoke(consumer, Enum.valueOf((Class) setter.getParameterTypes()[0], "BROADCASTING"));
    }

    static final Comparator<Map<String, Object>> BY_BODY =
        Comparator.comparing(m -> String.valueOf(m.get("body")));

    /** {@code queueId} counted from {@code first} round a topic of {@code queues} queues. */
    static int queueFrom(int queueId, int first, int queues) {
        return Math.floorMod(queueId - first, queues);
    }

    /** What a reader observes of a message, without ids, hosts or times. */
    static Map<String, Object> seen(MessageExt m) {
        Map<String, Object> seen = new TreeMap<>();
        seen.put("topic", m.getTopic());
        seen.put("queue_id", m.getQueueId());
        seen.put("queue_offset", m.getQueueOffset());
        seen.put("tags", m.getTags());
        seen.put("keys", m.getKeys());
        seen.put("body", body(m));
        seen.put("properties", userProperties(m));
        seen.put("reconsume_times", m.getReconsumeTimes());
        seen.put("flag", m.getFlag());
        return seen;
    }

    /** A message's properties but the system ones (MessageConst.STRING_HASH_SET). */
    static Map<String, String> userProperties(MessageExt m) {
        Map<String, String> properties = new TreeMap<>(m.getProperties());
        properties.keySet().removeAll(MessageConst.STRING_HASH_SET);
        return properties;
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    static Set<String> bodies(List<MessageExt> messages) {
        return messages.stream().map(RmqClassicJava::body).collect(Collectors.toCollection(TreeSet::new));
    }

    /** Whether the ids a sender was given are those its reader saw. */
    static boolean sameIds(Stream<String> sent, Stream<String> read) {
        return new TreeSet<>(sent.toList()).equals(new TreeSet<>(read.toList()));
    }

    /** JSON of maps, collections, strings, numbers, booleans and nulls. */
    static String json(Object value) {
        if (value == null) {
            return "null";
        } else if (value instanceof String text) {
            return quote(text);
        } else if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        } else if (value instanceof Map<?, ?> map) {
            return map.entrySet().stream()
                .map(e -> quote(String.valueOf(e.getKey())) + ": " + json(e.getValue()))
                .collect(Collectors.joining(", ", "{", "}"));
        } else if (value instanceof Collection<?> items) {
            return items.stream().map(RmqClassicJava::json).collect(Collectors.joining(", ", "[", "]"));
        }
        throw new IllegalArgumentException("no JSON for " + value.getClass());
    }

    static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                quoted.append('\\').append(c);
            } else if (c < 0x20) {
                quoted.append(String.format("\\u%04x", (int) c));
            } else {
                quoted.append(c);
            }
        }
        return quoted.append('"').toString();
    }
}
