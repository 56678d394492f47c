// Kafka scenarios with Kafka's own Java client (kafka-clients), written as its examples are; each
// prints its observable outcome as one JSON line, the same against halfmq and against Apache
// Kafka. The scenarios and the outcome's keys are kafka_confluent.py's, so the same departures
// apply. One source file, run by Java's source launcher (tests/conformance/java.py):
//
//     java -cp 'kafka-clients and its dependencies' KafkaJava.java BOOTSTRAP PREFIX SCENARIO
//
// PREFIX starts every topic, group and transactional id the scenario makes, so runs never meet.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KafkaJava {
    static final Duration WAIT = Duration.ofSeconds(30); // what a scenario waits for what it expects

    interface Scenario {
        Map<String, Object> run(String bootstrap, String prefix) throws Exception;
    }

    /** Kafka's name for an error: the protocol's where the exception (or a cause) has one, else its class's. */
    static String errorName(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            Errors found = Errors.forException(t);
            if (found != Errors.UNKNOWN_SERVER_ERROR || t instanceof org.apache.kafka.common.errors.UnknownServerException) {
                return found.name();
            }
        }
        Throwable shown = error instanceof ExecutionException && error.getCause() != null ? error.getCause() : error;
        return shown.getClass().getSimpleName();
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    /** Create topics ({name, partitions} pairs); each one's error name, or null. */
    static Map<String, Object> create(String bootstrap, Object... topics) throws InterruptedException {
        List<NewTopic> wanted = new ArrayList<>();
        for (int i = 0; i < topics.length; i += 2) {
            wanted.add(new NewTopic((String) topics[i], (Integer) topics[i + 1], (short) 1));
        }
        Map<String, Object> created = new TreeMap<>();
        try (Admin admin = admin(bootstrap)) {
            for (var entry : admin.createTopics(wanted).values().entrySet()) {
                try {
                    entry.getValue().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
                    created.put(entry.getKey(), null);
                } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                    created.put(entry.getKey(), errorName(e));
                }
            }
        }
        return created;
    }

    static List<Object> record(ConsumerRecord<String, String> message) {
        List<Object> headers = new ArrayList<>();
        for (Header header : message.headers()) {
            headers.add(list(header.key(), header.value() == null ? null : HexFormat.of().formatHex(header.value())));
        }
        return list(message.partition(), message.offset(), message.key(), message.value(), headers);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, Map<String, Object> config) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        props.putAll(config);
        return new KafkaConsumer<>(props);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        return consumer(bootstrap, group, Map.of());
    }

    /** Up to {@code count} messages, or what came within {@code wait}. */
    static List<ConsumerRecord<String, String>> consume(KafkaConsumer<String, String> consumer, int count, Duration wait) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + wait.toNanos();
        while (got.size() < count && System.nanoTime() < deadline) {
            consumer.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        return got;
    }

    static KafkaProducer<String, String> producer(String bootstrap, Map<String, Object> config) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        props.putAll(config);
        return new KafkaProducer<>(props);
    }

    /** Send values (key k<i>, headers n=<i> and bin=00ff), value i to partition i % partitions;
     * the acknowledged partition and offset of each. */
    static List<List<Object>> produce(String bootstrap, String topic, List<String> values, int partitions,
                                      Map<String, Object> config) throws InterruptedException {
        List<List<Object>> acked = new ArrayList<>();
        try (KafkaProducer<String, String> producer = producer(bootstrap, config)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < values.size(); i++) {
                List<Header> headers = List.of(new RecordHeader("n", String.valueOf(i).getBytes(StandardCharsets.UTF_8)),
                                               new RecordHeader("bin", new byte[] {0, (byte) 0xff}));
                sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, "k" + i, values.get(i), headers)));
            }
            producer.flush();
            for (int i = 0; i < sent.size(); i++) {
                try {
                    RecordMetadata metadata = sent.get(i).get();
                    acked.add(list(metadata.partition(), metadata.offset(), null));
                } catch (ExecutionException e) {
                    acked.add(list(i % partitions, -1, errorName(e)));
                }
            }
        }
        return sorted(acked);
    }

    static List<List<Object>> produce(String bootstrap, String topic, List<String> values, int partitions)
            throws InterruptedException {
        return produce(bootstrap, topic, values, partitions, Map.of());
    }

    static Map<String, Object> produceConsume(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-orders";
        Map<String, Object> created = create(bootstrap, topic, 3);
        List<List<Object>> acked = produce(bootstrap, topic, values("v", 12), 3);
        List<ConsumerRecord<String, String>> messages;
        try (var reader = consumer(bootstrap, prefix + "-readers")) {
            reader.subscribe(List.of(topic));
            messages = consume(reader, 12, WAIT);
        }
        return outcome("created", created.get(topic), "acked", acked,
                       "records", sorted(messages.stream().map(KafkaJava::record).toList()),
                       "timestamp_types", new TreeSet<>(messages.stream().map(m -> m.timestampType().name).toList()));
    }

    static Map<String, Object> topics(String bootstrap, String prefix) throws Exception {
        String dotted = prefix + ".orders.created";
        Map<String, Object> created = create(bootstrap, prefix + "-a", 3, dotted, 2);
        Map<String, Object> again = create(bootstrap, prefix + "-a", 3);
        Map<String, Object> invalid = create(bootstrap, "bad name!", 1);
        Map<String, Object> listed = new TreeMap<>();
        try (Admin admin = admin(bootstrap)) {
            // Until the created ones are listed: a broker's metadata may lag a creation it
            // acknowledged (Kafka's does, briefly).
            Set<String> mine;
            long deadline = System.currentTimeMillis() + WAIT.toMillis();
            while (true) {
                mine = admin.listTopics().names().get().stream().filter(name -> name.startsWith(prefix))
                    .collect(Collectors.toSet());
                if (mine.containsAll(Set.of(prefix + "-a", dotted)) || System.currentTimeMillis() > deadline) {
                    break;
                }
                Thread.sleep(200);
            }
            for (TopicDescription topic : admin.describeTopics(mine).allTopicNames().get().values()) {
                listed.put(topic.name(), topic.partitions().size());
            }
        }
        List<List<Object>> acked = produce(bootstrap, dotted, List.of("d0", "d1"), 2);
        List<String> read;
        try (var reader = consumer(bootstrap, prefix + "-dotted")) {
            reader.subscribe(List.of(dotted));
            read = consume(reader, 2, WAIT).stream().map(ConsumerRecord::value).sorted().toList();
        }
        return outcome("created", created, "again", again, "invalid", invalid, "listed", listed, "dotted_acked", acked,
                       "dotted_read", read);
    }

    /** A producer and a consumer name topics nobody created. */
    static Map<String, Object> autoCreate(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-auto";
        List<List<Object>> acked = produce(bootstrap, topic, List.of("a0"), 1);
        Integer partitions = null;
        String error = null;
        try (Admin admin = admin(bootstrap)) {
            partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        } catch (ExecutionException e) {
            error = errorName(e);
        }
        List<String> read;
        try (var reader = consumer(bootstrap, prefix + "-auto")) {
            reader.subscribe(List.of(topic));
            read = consume(reader, 1, WAIT).stream().map(ConsumerRecord::value).toList();
        }
        return outcome("acked", acked, "partitions", partitions, "error", error, "read", read);
    }

    /** Poll every member until their assignments cover {@code total} partitions, none empty. */
    static List<Integer> stable(List<KafkaConsumer<String, String>> members, int total) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            members.forEach(member -> member.poll(Duration.ofMillis(100)));
            List<Integer> sizes = sizes(members);
            if (sizes.stream().mapToInt(Integer::intValue).sum() == total && !sizes.contains(0)) {
                return sizes;
            }
        }
        return sizes(members);
    }

    static List<Integer> sizes(List<KafkaConsumer<String, String>> members) {
        return members.stream().map(member -> member.assignment().size()).sorted().toList();
    }

    /** Commit, per partition, the offset after the last of {@code messages}. */
    static void commitRead(KafkaConsumer<String, String> member, Iterable<ConsumerRecord<String, String>> messages) {
        Map<TopicPartition, OffsetAndMetadata> read = new HashMap<>();
        for (var message : messages) {
            read.put(new TopicPartition(message.topic(), message.partition()), new OffsetAndMetadata(message.offset() + 1));
        }
        if (!read.isEmpty()) {
            member.commitSync(read);
        }
    }

    /** Two consumers of a new group start together; between them they read every record. */
    static Map<String, Object> groupTogether(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-t";
        String group = prefix + "-together";
        create(bootstrap, topic, 4);
        produce(bootstrap, topic, values("v", 40), 4);
        List<KafkaConsumer<String, String>> members = List.of(consumer(bootstrap, group), consumer(bootstrap, group));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<Thread> threads = new ArrayList<>();
        for (var member : members) {
            threads.add(new Thread(() -> {
                member.subscribe(List.of(topic));
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (seen.size() < 40 && System.nanoTime() < deadline) {
                    var messages = member.poll(Duration.ofMillis(200));
                    messages.forEach(message -> seen.add(message.value()));
                    try {
                        commitRead(member, messages);
                    } catch (KafkaException e) {
                        // a rebalance under way: a later commit carries it
                    }
                }
            }));
        }
        threads.forEach(Thread::start);
        for (Thread thread : threads) {
            thread.join();
        }
        List<Integer> sizes = stable(members, 4);
        for (var member : members) {
            Map<TopicPartition, OffsetAndMetadata> readTo = new HashMap<>();
            member.assignment().forEach(tp -> readTo.put(tp, new OffsetAndMetadata(member.position(tp))));
            try {
                member.commitSync(readTo);
            } catch (KafkaException e) {
                // a rebalance under way: what it read was committed as it read
            }
            member.close();
        }
        return outcome("distinct", seen.size(), "assignment_sizes", sizes, "committed", committed(bootstrap, group, topic, 4));
    }

    static List<Long> committed(String bootstrap, String group, String topic, int partitions) {
        Set<TopicPartition> wanted = IntStream.range(0, partitions).mapToObj(p -> new TopicPartition(topic, p))
            .collect(Collectors.toSet());
        try (var reader = consumer(bootstrap, group)) {
            Map<TopicPartition, OffsetAndMetadata> found = reader.committed(wanted, WAIT);
            List<Long> offsets = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                OffsetAndMetadata offset = found.get(new TopicPartition(topic, p));
                offsets.add(offset == null ? null : offset.offset());
            }
            return offsets;
        }
    }

    /** One consumer reads and commits; a second joins late and takes half the partitions; records
     * sent then are each read once; when the second leaves, the first takes every partition back. */
    static Map<String, Object> groupLateAndLeaving(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-late";
        String group = prefix + "-late";
        create(bootstrap, topic, 4);
        produce(bootstrap, topic, values("old", 8), 4);
        List<String> old;
        List<Integer> joined;
        List<String> news = new ArrayList<>();
        int after;
        try (var first = consumer(bootstrap, group)) {
            first.subscribe(List.of(topic));
            old = consume(first, 8, WAIT).stream().map(ConsumerRecord::value).sorted().toList();
            first.commitSync();
            try (var second = consumer(bootstrap, group)) {
                second.subscribe(List.of(topic));
                List<KafkaConsumer<String, String>> members = List.of(first, second);
                joined = stable(members, 4);
                produce(bootstrap, topic, values("new", 8), 4);
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (news.size() < 8 && System.nanoTime() < deadline) {
                    for (var member : members) {
                        var messages = member.poll(Duration.ofMillis(100));
                        messages.forEach(message -> news.add(message.value()));
                        commitRead(member, messages);
                    }
                }
            }
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (first.assignment().size() < 4 && System.nanoTime() < deadline) {
                first.poll(Duration.ofMillis(200));
            }
            after = first.assignment().size();
        }
        return outcome("old", old, "assignment_sizes_joined", joined, "new", news.stream().sorted().toList(),
                       "assignment_after_leave", after, "committed", committed(bootstrap, group, topic, 4));
    }

    /** Offsets committed by hand, fetched back, and where a new member of the group starts. */
    static Map<String, Object> offsets(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-off";
        String group = prefix + "-offsets";
        create(bootstrap, topic, 2);
        produce(bootstrap, topic, values("v", 10), 2);
        List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        List<Long> fetched = new ArrayList<>();
        List<List<Object>> marks = new ArrayList<>();
        try (var first = consumer(bootstrap, group)) {
            first.assign(partitions);
            first.commitSync(Map.of(partitions.get(0), new OffsetAndMetadata(3), partitions.get(1), new OffsetAndMetadata(5)));
            Map<TopicPartition, OffsetAndMetadata> found = first.committed(Set.copyOf(partitions), WAIT);
            Map<TopicPartition, Long> low = first.beginningOffsets(partitions, WAIT);
            Map<TopicPartition, Long> high = first.endOffsets(partitions, WAIT);
            for (TopicPartition tp : partitions) {
                fetched.add(found.get(tp) == null ? null : found.get(tp).offset());
                marks.add(list(low.get(tp), high.get(tp)));
            }
        }
        OffsetAndMetadata none;
        try (var nothing = consumer(bootstrap, prefix + "-nothing")) {
            none = nothing.committed(Set.of(partitions.get(0)), WAIT).get(partitions.get(0));
        }
        Map<Integer, Long> starts = new TreeMap<>();
        try (var second = consumer(bootstrap, group)) {
            second.subscribe(List.of(topic));
            consume(second, 2, WAIT).forEach(m -> starts.putIfAbsent(m.partition(), m.offset()));
        }
        List<List<Object>> started = starts.entrySet().stream().map(e -> list(e.getKey(), e.getValue())).toList();
        return outcome("fetched", fetched, "watermarks", marks, "none_committed", none == null ? null : none.offset(),
                       "starts", started);
    }

    static Map<String, Object> idempotent(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-idem";
        create(bootstrap, topic, 2);
        List<List<Object>> acked = produce(bootstrap, topic, values("v", 50), 2,
                                           Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true));
        List<List<Object>> read;
        try (var reader = consumer(bootstrap, prefix + "-idem")) {
            reader.subscribe(List.of(topic));
            read = sorted(consume(reader, 60, Duration.ofSeconds(5)).stream()
                .map(m -> list(m.partition(), m.offset(), m.value())).toList());
        }
        return outcome("acked", acked, "read", read);
    }

    static KafkaProducer<String, String> transactional(String bootstrap, String transactionalId, Map<String, Object> config) {
        Map<String, Object> all = new HashMap<>(config);
        all.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        KafkaProducer<String, String> producer = producer(bootstrap, all);
        producer.initTransactions();
        return producer;
    }

    static KafkaProducer<String, String> transactional(String bootstrap, String transactionalId) {
        return transactional(bootstrap, transactionalId, Map.of());
    }

    static List<List<Object>> readAll(String bootstrap, String group, String topic, String isolation, int expect,
                                      Duration wait) {
        try (var reader = consumer(bootstrap, group, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            reader.subscribe(List.of(topic));
            return consume(reader, expect, wait).stream().map(m -> list(m.offset(), m.value())).toList();
        }
    }

    static List<Object> readValues(String bootstrap, String group, String topic, int expect, Duration wait) {
        return readAll(bootstrap, group, topic, "read_committed", expect, wait).stream().map(r -> r.get(1)).toList();
    }

    /** An error's name, and what the producer can do after it: ask it to abort the transaction
     * (abortable), then to begin another (not fatal), as the producer's javadoc says to. */
    static Map<String, Object> failure(KafkaProducer<String, String> producer, KafkaException error) {
        boolean abortable = false;
        boolean fatal = false;
        try {
            producer.abortTransaction();
            abortable = true;
            producer.beginTransaction();
            producer.abortTransaction();
        } catch (KafkaException e) {
            fatal = !abortable;
        }
        return outcome("name", errorName(error), "fatal", fatal, "abortable", abortable);
    }

    /** Committed, aborted and open transactions, read with read_committed and read_uncommitted. */
    static Map<String, Object> transactions(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-txn";
        create(bootstrap, topic, 1);
        try (var producer = transactional(bootstrap, prefix + "-t1")) {
            for (var transaction : List.of(Map.entry(List.of("c1", "c2"), true), Map.entry(List.of("a1"), false),
                                           Map.entry(List.of("c3"), true))) {
                producer.beginTransaction();
                for (String value : transaction.getKey()) {
                    producer.send(new ProducerRecord<>(topic, 0, null, value));
                }
                producer.flush(); // written before the transaction ends: an abort discards records not yet sent
                if (transaction.getValue()) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
            try (var opened = transactional(bootstrap, prefix + "-t2")) {
                opened.beginTransaction();
                opened.send(new ProducerRecord<>(topic, 0, null, "o1")).get();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "c4")); // after the open one: held back with it
                producer.commitTransaction();
                var committedView = readAll(bootstrap, prefix + "-rc1", topic, "read_committed", 5, Duration.ofSeconds(5));
                var uncommittedView = readAll(bootstrap, prefix + "-ru", topic, "read_uncommitted", 6, Duration.ofSeconds(5));
                long high;
                var marks = Map.<String, Object>of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"); // librdkafka's default
                try (var reader = consumer(bootstrap, prefix + "-marks", marks)) {
                    TopicPartition tp = new TopicPartition(topic, 0);
                    high = reader.endOffsets(List.of(tp), WAIT).get(tp);
                }
                opened.commitTransaction();
                var after = readAll(bootstrap, prefix + "-rc2", topic, "read_committed", 5, Duration.ofSeconds(10));
                return outcome(
                    "read_committed_while_open", committedView.stream().map(r -> r.get(1)).toList(),
                    "read_committed_while_open_offsets", committedView.stream().map(r -> r.get(0)).toList(),
                    "read_uncommitted_while_open", uncommittedView.stream().map(r -> r.get(1)).toList(),
                    "high_watermark_while_open", high,
                    "read_committed_after", after.stream().map(r -> r.get(1)).toList(),
                    "read_committed_after_offsets", after.stream().map(r -> r.get(0)).toList());
            }
        }
    }

    /** A second producer with the same transactional.id fences the first. */
    static Map<String, Object> fencing(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-fence";
        String transactionalId = prefix + "-fenced";
        create(bootstrap, topic, 1);
        try (var first = transactional(bootstrap, transactionalId)) {
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, "x1")).get();
            try (var second = transactional(bootstrap, transactionalId)) {
                Map<String, Object> error = null;
                try {
                    first.send(new ProducerRecord<>(topic, 0, null, "x1b"));
                    first.commitTransaction();
                } catch (KafkaException e) {
                    error = failure(first, e);
                }
                second.beginTransaction();
                second.send(new ProducerRecord<>(topic, 0, null, "x2"));
                second.commitTransaction();
                return outcome("first_error", error,
                               "read_committed", readValues(bootstrap, prefix + "-fence", topic, 3, Duration.ofSeconds(5)));
            }
        }
    }

    /** Consume-transform-produce: outputs and the input's offsets in one transaction (and the
     * error that ended it, if one did: the producer's examples abort on a KafkaException). */
    static Map<String, Object> sendOffsets(String bootstrap, String prefix) throws Exception {
        String source = prefix + "-in";
        String sink = prefix + "-out";
        String group = prefix + "-transform";
        create(bootstrap, source, 1, sink, 1);
        produce(bootstrap, source, values("v", 5), 1);
        Map<String, Object> error = null;
        try (var reader = consumer(bootstrap, group, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
             var producer = transactional(bootstrap, prefix + "-transformer")) {
            reader.subscribe(List.of(source));
            var inputs = consume(reader, 5, WAIT);
            try {
                producer.beginTransaction();
                for (var message : inputs) {
                    producer.send(new ProducerRecord<>(sink, 0, null, "out-" + message.value()));
                }
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                reader.assignment().forEach(tp -> positions.put(tp, new OffsetAndMetadata(reader.position(tp))));
                producer.sendOffsetsToTransaction(positions, reader.groupMetadata());
                producer.commitTransaction();
            } catch (KafkaException e) {
                error = failure(producer, e);
            }
        }
        return outcome("error", error, "outputs", readValues(bootstrap, prefix + "-check", sink, 5, Duration.ofSeconds(10)),
                       "committed", committed(bootstrap, group, source, 1));
    }

    /** A transaction left open past transaction.timeout.ms is aborted by the broker. */
    static Map<String, Object> transactionTimeout(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-timeout";
        create(bootstrap, topic, 1);
        try (var producer = transactional(bootstrap, prefix + "-slow", Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 3000))) {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "late")).get();
            Thread.sleep(8000); // past the timeout and the broker's next look at open transactions
            Map<String, Object> error = null;
            try {
                producer.commitTransaction();
            } catch (KafkaException e) {
                error = failure(producer, e);
            }
            return outcome("commit_error", error,
                           "read_committed", readValues(bootstrap, prefix + "-timeout", topic, 2, Duration.ofSeconds(5)));
        }
    }

    static final Map<String, Scenario> SCENARIOS = Map.ofEntries(
        Map.entry("produce-consume", KafkaJava::produceConsume),
        Map.entry("topics", KafkaJava::topics),
        Map.entry("auto-create", KafkaJava::autoCreate),
        Map.entry("group-together", KafkaJava::groupTogether),
        Map.entry("group-late-and-leaving", KafkaJava::groupLateAndLeaving),
        Map.entry("offsets", KafkaJava::offsets),
        Map.entry("idempotent", KafkaJava::idempotent),
        Map.entry("transactions", KafkaJava::transactions),
        Map.entry("fencing", KafkaJava::fencing),
        Map.entry("send-offsets", KafkaJava::sendOffsets),
        Map.entry("transaction-timeout", KafkaJava::transactionTimeout));

    public static void main(String[] args) {
        try {
            System.out.println(json(SCENARIOS.get(args[2]).run(args[0], args[1])));
        } catch (Exception e) {
            // printed here: Java 17's source launcher fails to trim the stack of an exception
            // made on another thread (a client's I/O thread) and hides it behind its own
            e.printStackTrace();
            System.exit(1);
        }
    }

    // --- small helpers: lists, sorting as Python sorts, and JSON --------------------------------

    static List<Object> list(Object... items) {
        return new ArrayList<>(java.util.Arrays.asList(items));
    }

    static List<String> values(String stem, int count) {
        return IntStream.range(0, count).mapToObj(i -> stem + i).toList();
    }

    static Map<String, Object> outcome(Object... fields) {
        Map<String, Object> found = new LinkedHashMap<>();
        for (int i = 0; i < fields.length; i += 2) {
            found.put((String) fields[i], fields[i + 1]);
        }
        return found;
    }

    /** Lists ordered item by item, as Python orders them (numbers, strings and nested lists). */
    static <T extends List<?>> List<T> sorted(List<T> items) {
        List<T> copy = new ArrayList<>(items);
        copy.sort(KafkaJava::compare);
        return copy;
    }

    @SuppressWarnings("unchecked")
    static int compare(Object a, Object b) {
        if (a == null || b == null) {
            return a == null ? (b == null ? 0 : -1) : 1;
        }
        if (a instanceof Number x && b instanceof Number y) {
            return Long.compare(x.longValue(), y.longValue());
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
                int order = compare(x.get(i), y.get(i));
                if (order != 0) {
                    return order;
                }
            }
            return Integer.compare(x.size(), y.size());
        }
        return ((Comparable<Object>) a).compareTo(b);
    }

    static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof Map<?, ?> map) {
            return map.entrySet().stream().map(e -> json(String.valueOf(e.getKey())) + ": " + json(e.getValue()))
                .collect(Collectors.joining(", ", "{", "}"));
        }
        if (value instanceof Collection<?> items) {
            return items.stream().map(KafkaJava::json).collect(Collectors.joining(", ", "[", "]"));
        }
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            switch (c) {
                case '"' -> quoted.append("\\\"");
                case '\\' -> quoted.append("\\\\");
                default -> quoted.append(c < 0x20 ? String.format("\\u%04x", (int) c) : String.valueOf(c));
            }
        }
        return quoted.append('"').toString();
    }
}
