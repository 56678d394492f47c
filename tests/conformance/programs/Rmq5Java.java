/*
 * RocketMQ 5 scenarios with the official Java client (org.apache.rocketmq:rocketmq-client-java),
 * written as its examples are; each prints its observable outcome as one JSON line, the same against
 * halfmq and against Apache RocketMQ 5's proxy. The scenarios and their outcomes' fields are
 * rmq5_python.py's.
 *
 *     java Rmq5Java.java ENDPOINT PREFIX SCENARIO    run SCENARIO, print its outcome
 *     java Rmq5Java.java --needs PREFIX SCENARIO     print the topics and consumer groups it uses
 *
 * Run by Java's source launcher with the client on the classpath (tests/conformance/java.py). The
 * client logs to ~/logs/rocketmq/rocketmq-client.log (its console appender is off unless asked
 * for), so stdout carries only the outcome. Its MessageView has no message type, so the outcomes
 * lack rmq5_python.py's message_type and message_types.
 */

import apache.rocketmq.v2.Code;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.RecallReceipt;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.exception.InternalErrorException;

public class Rmq5Java {
    static final long WAIT = 30_000; // ms a scenario waits for what it expects before it records what it has
    // ms from a dead letter's last failed attempt to its dead-letter topic's route: 15 s were not
    // enough for the real broker on a machine busy with the test run.
    static final long DEAD_LETTER_WAIT = 60_000;
    static final Duration AWAIT = Duration.ofSeconds(1); // a receive's long polling (the peer's proxy allows it)
    static final int EMPTY_ROUNDS = 3; // empty receives in a row that end a drain
    static final int DELAY = 5; // seconds ahead a delayed message is due

    record Topic(String name, int queues, String type) {
    }

    record Group(String name, Integer maxAttempts, boolean fifo) {
    }

    record Needs(List<Topic> topics, List<Group> groups) {
    }

    /** What each scenario uses: topics (suffix, queues, message type), groups (suffix, max attempts, fifo). */
    static final Map<String, Needs> NEEDS = Map.of(
        "normal", new Needs(List.of(new Topic("orders", 2, "NORMAL")),
            List.of(new Group("readers", null, false), new Group("tagged", null, false), new Group("sql", null, false))),
        "async-send", new Needs(List.of(new Topic("async", 2, "NORMAL")), List.of(new Group("readers", null, false))),
        "delay", new Needs(List.of(new Topic("delayed", 2, "DELAY")), List.of(new Group("readers", null, false))),
        "fifo", new Needs(List.of(new Topic("line", 1, "FIFO")), List.of(new Group("fifo", null, true))),
        "transaction", new Needs(List.of(new Topic("txn", 2, "TRANSACTION")), List.of(new Group("readers", null, false))),
        "invisible-duration", new Needs(List.of(new Topic("work", 1, "NORMAL")),
            List.of(new Group("workers", null, false))),
        "dead-letter", new Needs(List.of(new Topic("jobs", 1, "NORMAL")),
            List.of(new Group("failing", 3, false), new Group("dlq-readers", null, false))),
        "recall", new Needs(List.of(new Topic("timeouts", 2, "DELAY")), List.of(new Group("readers", null, false))));

    public static void main(String[] args) throws Exception {
        if (args[0].equals("--needs")) {
            String prefix = args[1];
            Needs needs = NEEDS.get(args[2]);
            Map<String, Object> plan = new TreeMap<>();
            plan.put("topics", needs.topics().stream()
                .map(t -> List.of(prefix + "-" + t.name(), t.queues(), t.type())).toList());
            plan.put("groups", needs.groups().stream()
                .map(g -> Arrays.asList(prefix + "-" + g.name(), g.maxAttempts(), g.fifo())).toList());
            System.out.println(json(plan));
            return;
        }
        Scenarios scenarios = new Scenarios(args[0], args[1]);
        Map<String, Object> outcome = switch (args[2]) {
            case "normal" -> scenarios.normal();
            case "async-send" -> scenarios.asyncSend();
            case "delay" -> scenarios.delay();
            case "fifo" -> scenarios.fifo();
            case "transaction" -> scenarios.transaction();
            case "invisible-duration" -> scenarios.invisibleDuration();
            case "dead-letter" -> scenarios.deadLetter();
            case "recall" -> scenarios.recall();
            default -> throw new IllegalArgumentException("no scenario " + args[2]);
        };
        System.out.println(json(outcome));
        System.exit(0); // the client's gRPC and scheduler threads would keep the JVM up a while
    }

    static final class Scenarios {
        final String prefix;
        final ClientServiceProvider provider = ClientServiceProvider.loadService();
        final ClientConfiguration configuration;

        Scenarios(String endpoints, String prefix) {
            this.prefix = prefix;
            // The client speaks TLS unless told not to; RocketMQ's proxy takes TLS and plaintext on
            // one port, halfmq plaintext only (its TLS is a separate setting). A call waits 30 s, not
            // the client's 3 s: the real broker, its JVM beside the suite's on two cores, has been
            // seen to take over 3 s to answer.
            this.configuration = ClientConfiguration.newBuilder().setEndpoints(endpoints).enableSsl(false)
                .setRequestTimeout(Duration.ofSeconds(30)).build();
        }

        Producer producer(String topic, TransactionChecker checker) throws ClientException {
            ProducerBuilder builder = provider.newProducerBuilder().setClientConfiguration(configuration).setTopics(topic);
            if (checker != null) {
                builder.setTransactionChecker(checker);
            }
            return builder.build();
        }

        SimpleConsumer consumer(String group, String topic, String tag) throws ClientException {
            return consumer(group, topic, new FilterExpression(tag, FilterExpressionType.TAG));
        }

        /**
         * A consumer of a topic that the broker creates, once it has a route (asked each second), or
         * null if it has none within waitMillis.
         */
        SimpleConsumer routedConsumer(String group, String topic, long waitMillis) throws Exception {
            long deadline = System.currentTimeMillis() + waitMillis;
            while (true) {
                try {
                    return consumer(group, topic, "*");
                } catch (IllegalStateException e) { // a consumer of a topic without a route fails to start
                    if (!(rootCause(e) instanceof ClientException)) {
                        throw e;
                    }
                    if (System.currentTimeMillis() > deadline) {
                        return null;
                    }
                    Thread.sleep(1000);
                }
            }
        }

        SimpleConsumer consumer(String group, String topic, FilterExpression filter) throws ClientException {
            return provider.newSimpleConsumerBuilder()
                .setClientConfiguration(configuration)
                .setConsumerGroup(group)
                .setAwaitDuration(AWAIT)
                .setSubscriptionExpressions(Collections.singletonMap(topic, filter))
                .build();
        }

        /**
         * Messages with keys, a tag and properties, read by one group whole, one filtering by tag and
         * one by an SQL92 expression over the properties and the tag.
         */
        Map<String, Object> normal() throws Exception {
            String topic = prefix + "-orders";
            List<SendReceipt> receipts = new ArrayList<>();
            try (Producer sender = producer(topic, null)) {
                for (int i = 0; i < 4; i++) {
                    Message message = provider.newMessageBuilder()
                        .setTopic(topic)
                        .setTag(i % 2 == 0 ? "created" : "paid")
                        .setKeys("o-" + i, "c-" + i % 2)
                        .addProperty("n", String.valueOf(i))
                        .addProperty("region", "eu-west")
                        .setBody(("order-" + i).getBytes(StandardCharsets.UTF_8))
                        .build();
                    receipts.add(sender.send(message));
                }
            }
            List<MessageView> read;
            try (SimpleConsumer everyone = consumer(prefix + "-readers", topic, "*")) {
                read = drain(everyone, 4, WAIT, 15);
            }
            List<MessageView> tagged;
            try (SimpleConsumer filtering = consumer(prefix + "-tagged", topic, "paid")) {
                tagged = drain(filtering, 2, WAIT, 15);
            }
            List<MessageView> selected;
            FilterExpression sql = new FilterExpression("TAGS = 'paid' AND n > 1 OR n = 0", FilterExpressionType.SQL92);
            try (SimpleConsumer selecting = consumer(prefix + "-sql", topic, sql)) {
                selected = drain(selecting, 2, WAIT, 15);
            }
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("sent", receipts.size());
            outcome.put("ids_distinct", distinctIds(receipts) == receipts.size());
            outcome.put("count", read.size());
            outcome.put("read", byBody(read));
            outcome.put("read_by_tag", tagged.stream().map(Rmq5Java::body).sorted().toList());
            outcome.put("read_by_sql", selected.stream().map(Rmq5Java::body).sorted().toList());
            return outcome;
        }

        Map<String, Object> asyncSend() throws Exception {
            String topic = prefix + "-async";
            List<SendReceipt> receipts = new ArrayList<>();
            try (Producer sender = producer(topic, null)) {
                List<CompletableFuture<SendReceipt>> futures = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    Message message = provider.newMessageBuilder()
                        .setTopic(topic)
                        .setTag("async")
                        .setBody(("a-" + i).getBytes(StandardCharsets.UTF_8))
                        .build();
                    futures.add(sender.sendAsync(message));
                }
                for (CompletableFuture<SendReceipt> future : futures) {
                    receipts.add(future.get(WAIT, TimeUnit.MILLISECONDS));
                }
            }
            List<MessageView> read;
            try (SimpleConsumer reader = consumer(prefix + "-readers", topic, "*")) {
                read = drain(reader, 5, WAIT, 15);
            }
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("acked", receipts.size());
            outcome.put("ids_distinct", distinctIds(receipts) == 5);
            outcome.put("read", read.stream()
                .map(m -> Arrays.<Object>asList(body(m), m.getTag().orElse(null), m.getDeliveryAttempt()))
                .sorted((a, b) -> String.valueOf(a).compareTo(String.valueOf(b)))
                .toList());
            return outcome;
        }

        /** A message due DELAY seconds from now (a whole second: RocketMQ's timer counts whole seconds). */
        Map<String, Object> delay() throws Exception {
            String topic = prefix + "-delayed";
            try (SimpleConsumer reader = consumer(prefix + "-readers", topic, "*")) {
                long due;
                SendReceipt receipt;
                try (Producer sender = producer(topic, null)) {
                    // once the producer is up: on a busy machine its start alone can take DELAY seconds
                    due = (System.currentTimeMillis() / 1000 + DELAY) * 1000;
                    Message message = provider.newMessageBuilder()
                        .setTopic(topic)
                        .setTag("reminder")
                        .setKeys("r-1")
                        .setDeliveryTimestamp(due)
                        .setBody("remind".getBytes(StandardCharsets.UTF_8))
                        .build();
                    receipt = sender.send(message);
                }
                Map<String, Object> read = new TreeMap<>();
                int count = 0;
                long deadline = System.currentTimeMillis() + DELAY * 1000 + WAIT;
                int empty = 0;
                while (System.currentTimeMillis() < deadline && (count == 0 || empty < EMPTY_ROUNDS)) {
                    List<MessageView> batch = receive(reader, 16, 15);
                    empty = batch.isEmpty() ? empty + 1 : 0;
                    for (MessageView message : batch) {
                        long at = System.currentTimeMillis();
                        Map<String, Object> got = seen(message);
                        got.put("arrived_after_due", at >= due);
                        got.put("delivery_timestamp_is_due", message.getDeliveryTimestamp().orElse(0L) == due);
                        read.put(body(message), got);
                        count++;
                        reader.ack(message);
                    }
                }
                Map<String, Object> outcome = new TreeMap<>();
                outcome.put("recall_handle_given", receipt.getRecallHandle() != null && !receipt.getRecallHandle().isEmpty());
                outcome.put("count", count);
                outcome.put("read", read);
                return outcome;
            }
        }

        /**
         * Two message groups interleaved on one queue, read by a FIFO consumer group: while what a
         * receive gave is unacknowledged nothing more of its message groups comes; each group's
         * messages come in send order.
         */
        Map<String, Object> fifo() throws Exception {
            String topic = prefix + "-line";
            try (Producer sender = producer(topic, null)) {
                for (int n = 1; n <= 3; n++) {
                    for (String group : List.of("a", "b")) {
                        Message message = provider.newMessageBuilder()
                            .setTopic(topic)
                            .setMessageGroup(group)
                            .setBody((group + n).getBytes(StandardCharsets.UTF_8))
                            .build();
                        sender.send(message);
                    }
                }
            }
            List<MessageView> first = List.of();
            List<String> held = new ArrayList<>();
            List<MessageView> rest;
            try (SimpleConsumer reader = consumer(prefix + "-fifo", topic, "*")) {
                long deadline = System.currentTimeMillis() + WAIT;
                while (first.isEmpty() && System.currentTimeMillis() < deadline) {
                    first = receive(reader, 16, 20);
                }
                for (int round = 0; round < 2; round++) { // while the first are in flight
                    receive(reader, 16, 20).forEach(m -> held.add(body(m)));
                }
                for (MessageView message : first) {
                    reader.ack(message);
                }
                rest = drain(reader, 6 - first.size(), WAIT, 15);
            }
            List<MessageView> all = new ArrayList<>(first);
            all.addAll(rest);
            Map<String, List<String>> order = new TreeMap<>();
            for (MessageView message : all) {
                order.computeIfAbsent(message.getMessageGroup().orElse("null"), g -> new ArrayList<>()).add(body(message));
            }
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("first_receive", first.stream().map(Rmq5Java::body).toList());
            outcome.put("while_in_flight", held);
            outcome.put("order", order);
            outcome.put("attempts", new TreeSet<>(all.stream().map(MessageView::getDeliveryAttempt).toList()));
            return outcome;
        }

        /**
         * A committed, a rolled back and a transaction whose outcome is unknown (the producer ends it
         * neither way), which the broker checks back and the checker commits as the service's records say.
         */
        Map<String, Object> transaction() throws Exception {
            String topic = prefix + "-txn";
            Set<String> written = Set.of("t-commit", "t-unknown");
            Set<String> checked = Collections.synchronizedSet(new TreeSet<>());
            TransactionChecker checker = messageView -> {
                checked.add(body(messageView));
                return written.contains(body(messageView)) ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
            };
            // The public SendReceipt has no transaction id (rmq5_python.py names it): name the sent ids.
            Map<String, String> sentIds = new HashMap<>();
            List<MessageView> read;
            try (Producer sender = producer(topic, checker)) {
                for (String body : List.of("t-commit", "t-rollback", "t-unknown")) {
                    Transaction pending = sender.beginTransaction();
                    Message message = provider.newMessageBuilder()
                        .setTopic(topic)
                        .setTag("txn")
                        .setKeys(body)
                        .setBody(body.getBytes(StandardCharsets.UTF_8))
                        .build();
                    sentIds.put(sender.send(message, pending).getMessageId().toString(), "<sent message id>");
                    if (body.equals("t-commit")) {
                        pending.commit();
                    } else if (body.equals("t-rollback")) {
                        pending.rollback();
                    }
                }
                try (SimpleConsumer reader = consumer(prefix + "-readers", topic, "*")) {
                    read = drain(reader, 2, WAIT + 10_000, 15); // the check-back comes after the transaction timeout
                }
            }
            // RocketMQ delivers at least once: a check-back's commit may come twice, so bodies, not a count.
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("read", named(byBody(read), sentIds));
            synchronized (checked) {
                outcome.put("checked", new ArrayList<>(checked));
            }
            return outcome;
        }

        /** A message received for 30 s, its invisible duration changed to 2 s: it comes again, attempt 2. */
        Map<String, Object> invisibleDuration() throws Exception {
            String topic = prefix + "-work";
            try (Producer sender = producer(topic, null)) {
                sender.send(provider.newMessageBuilder()
                    .setTopic(topic)
                    .setTag("job")
                    .setBody("job-1".getBytes(StandardCharsets.UTF_8))
                    .build());
            }
            List<MessageView> first = List.of();
            List<MessageView> again;
            try (SimpleConsumer reader = consumer(prefix + "-workers", topic, "*")) {
                long deadline = System.currentTimeMillis() + WAIT;
                while (first.isEmpty() && System.currentTimeMillis() < deadline) {
                    first = receive(reader, 1, 30);
                }
                reader.changeInvisibleDuration(first.get(0), Duration.ofSeconds(2));
                again = drain(reader, 1, WAIT, 15);
            }
            Map<String, Object> outcome = new TreeMap<>();
            outcome.put("first", first.stream().map(m -> List.of(body(m), m.getDeliveryAttempt())).toList());
            outcome.put("again", again.stream().map(m -> List.of(body(m), m.getDeliveryAttempt())).toList());
            return outcome;
        }

        /**
         * A PushConsumer whose listener always fails, in a group of 3 attempts: the message is
         * delivered 3 times, then found in the group's dead-letter topic %DLQ%<group>.
         */
        Map<String, Object> deadLetter() throws Exception {
            String topic = prefix + "-jobs";
            String group = prefix + "-failing";
            SendReceipt sent;
            try (Producer sender = producer(topic, null)) {
                sent = sender.send(provider.newMessageBuilder()
                    .setTopic(topic)
                    .setTag("job")
                    .setKeys("p-1")
                    .addProperty("kind", "poison")
                    .setBody("poison".getBytes(StandardCharsets.UTF_8))
                    .build());
            }
            List<List<Object>> attempts = Collections.synchronizedList(new ArrayList<>());
            List<Long> times = Collections.synchronizedList(new ArrayList<>());
            SimpleConsumer reader;
            try (PushConsumer pushing = provider.newPushConsumerBuilder()
                .setClientConfiguration(configuration)
                .setConsumerGroup(group)
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
                .setMessageListener(messageView -> {
                    attempts.add(List.of(body(messageView), messageView.getDeliveryAttempt()));
                    times.add(System.nanoTime());
                    return ConsumeResult.FAILURE;
                })
                .build()) {
                long deadline = System.currentTimeMillis() + WAIT;
                while (attempts.size() < 3 && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                }
                // The message goes to the dead-letter topic when it is visible again (after the last
                // failure's backoff) and the group receives again: the reader starts once that topic
                // exists.
                reader = routedConsumer(prefix + "-dlq-readers", "%DLQ%" + group, DEAD_LETTER_WAIT);
            }
            Map<String, Object> outcome = new TreeMap<>();
            synchronized (attempts) {
                outcome.put("attempts", new ArrayList<>(attempts));
                outcome.put("retried_within_9s", times.size() > 1 && times.get(1) - times.get(0) < 9_000_000_000L);
            }
            if (reader == null) {
                outcome.put("dead_letters", "no dead-letter topic");
                return outcome;
            }
            List<MessageView> dead;
            try (reader) {
                dead = drain(reader, 1, WAIT, 15);
            }
            outcome.put("dead_letter_count", dead.size());
            outcome.put("dead_letters", named(byBody(dead), Map.of(sent.getMessageId().toString(), "<sent message id>")));
            return outcome;
        }

        /**
         * Two order timeouts due DELAY seconds from now; one order is paid, its timeout recalled
         * (twice, as a duplicated payment event would); only the other comes, and recalling that one
         * after it came fails.
         */
        Map<String, Object> recall() throws Exception {
            String topic = prefix + "-timeouts";
            Map<String, Object> outcome = new TreeMap<>();
            try (SimpleConsumer reader = consumer(prefix + "-readers", topic, "*");
                 Producer sender = producer(topic, null)) {
                long due = (System.currentTimeMillis() / 1000 + DELAY) * 1000;
                Map<String, SendReceipt> receipts = new HashMap<>();
                for (String order : List.of("o-paid", "o-unpaid")) {
                    receipts.put(order, sender.send(provider.newMessageBuilder()
                        .setTopic(topic)
                        .setTag("timeout")
                        .setKeys(order)
                        .setDeliveryTimestamp(due)
                        .setBody(("expire " + order).getBytes(StandardCharsets.UTF_8))
                        .build()));
                }
                RecallReceipt recalled = sender.recallMessage(topic, receipts.get("o-paid").getRecallHandle());
                outcome.put("recalled_id_is_sent_id",
                    recalled.getMessageId().toString().equals(receipts.get("o-paid").getMessageId().toString()));
                outcome.put("recall_again", recallOnce(sender, topic, receipts.get("o-paid").getRecallHandle()));
                outcome.put("read", drain(reader, 1, DELAY * 1000 + WAIT, 15).stream().map(Rmq5Java::body).toList());
                outcome.put("recall_after_delivery", recallOnce(sender, topic, receipts.get("o-unpaid").getRecallHandle()));
            }
            return outcome;
        }
    }

    /**
     * One receive, as an application retries it: the first ones after startup may find the group's
     * settings not yet there (INTERNAL_ERROR), which a later one does.
     */
    static List<MessageView> receive(SimpleConsumer reader, int maxMessages, int invisibleSeconds) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT;
        while (true) {
            try {
                return reader.receive(maxMessages, Duration.ofSeconds(invisibleSeconds));
            } catch (InternalErrorException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    /**
     * Receive and acknowledge until {@code count} messages came, or {@code wait} ms passed; then until
     * EMPTY_ROUNDS receives in a row come back empty (anything more, redeliveries included).
     */
    static List<MessageView> drain(SimpleConsumer reader, int count, long wait, int invisibleSeconds) throws Exception {
        List<MessageView> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + wait;
        int empty = 0;
        while (System.currentTimeMillis() < deadline && (got.size() < count || empty < EMPTY_ROUNDS)) {
            List<MessageView> batch = receive(reader, 16, invisibleSeconds);
            empty = batch.isEmpty() ? empty + 1 : 0;
            for (MessageView message : batch) {
                got.add(message);
                reader.ack(message);
            }
        }
        return got;
    }

    /** {@code OK} when the recall succeeds, else the status code's name. */
    static String recallOnce(Producer sender, String topic, String handle) {
        try {
            sender.recallMessage(topic, handle);
        } catch (ClientException e) {
            return codeName(e);
        }
        return "OK";
    }

    /** The status code a ClientException carries in its message ("response-code=N"), by name. */
    static String codeName(ClientException e) {
        Matcher code = Pattern.compile("response-code=(\\d+)").matcher(String.valueOf(e.getMessage()));
        if (code.find()) {
            Code known = Code.forNumber(Integer.parseInt(code.group(1)));
            return known != null ? known.name() : code.group(1);
        }
        return e.getClass().getSimpleName();
    }

    static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    static String body(MessageView message) {
        return StandardCharsets.UTF_8.decode(message.getBody()).toString();
    }

    static long distinctIds(List<SendReceipt> receipts) {
        return receipts.stream().map(r -> r.getMessageId().toString()).distinct().count();
    }

    /** What a consumer observes of a message but its body, without ids, hosts or times. */
    static Map<String, Object> seen(MessageView message) {
        Map<String, Object> seen = new TreeMap<>();
        seen.put("topic", message.getTopic());
        seen.put("tag", message.getTag().orElse(null));
        seen.put("keys", new TreeSet<>(message.getKeys()));
        seen.put("properties", new TreeMap<>(message.getProperties()));
        seen.put("message_group", message.getMessageGroup().orElse(null));
        seen.put("delivery_attempt", message.getDeliveryAttempt());
        return seen;
    }

    /** What a consumer observed of each message, by body (a body that came twice counts in {@code count}). */
    static Map<String, Object> byBody(List<MessageView> messages) {
        Map<String, Object> read = new TreeMap<>();
        for (MessageView message : messages) {
            read.put(body(message), seen(message));
        }
        return read;
    }

    /** {@code read} with property values that are ids this run made ({@code names}' keys) named instead. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> named(Map<String, Object> read, Map<String, String> names) {
        for (Object got : read.values()) {
            Map<String, String> properties = (Map<String, String>) ((Map<String, Object>) got).get("properties");
            properties.replaceAll((key, value) -> names.getOrDefault(value, value));
        }
        return read;
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
            return items.stream().map(Rmq5Java::json).collect(Collectors.joining(", ", "[", "]"));
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
