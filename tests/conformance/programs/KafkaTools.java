// Runs Kafka's command-line tools (kafka-tools, the broker's version) one after another in one
// JVM, each through the main class its bin/kafka-*.sh script runs, with the arguments given, and
// prints what each printed and its exit status as one JSON object. Running them in one JVM spares
// a JVM start (about 2 s of CPU) per command. Each command runs on a thread of its own; where it
// exits (through Kafka's Exit class, which lets a caller take the exit over) its thread stops for
// good and the status is the command's, as its process would have ended there. The shutdown hooks
// the tools add (a console's, for Ctrl-C) are not added.
//
//     java -cp 'kafka-tools and its dependencies' KafkaTools BOOTSTRAP < steps.json
//
// steps.json: [{"name": ..., "tool": ..., "args": [...], "stdin": ...}]; "{bootstrap}" in an
// argument is BOOTSTRAP. Besides the tools' classes, "tool" may be a step of the scenario's own:
//   "join"   args [group, topic]: a consumer (Kafka's Java client) joins the group and stays
//            until "leave", polling, so that the group has a live member;
//   "leave"  the member leaves;
//   "open"   args [transactional id, topic]: a transactional producer sends one record and
//            leaves its transaction open until "commit";
//   "offsets" args [group, topic, offset]: the open transaction commits the group's offset of
//            the topic's partition 0 (sendOffsetsToTransaction, as a producer outside the group);
//   "commit" the open transaction commits;
//   "sleep"  args [ms]: waits;
//   "listed" args [topic, "yes" | "no"]: waits until the broker's metadata lists the topic, or
//            no longer does (Kafka's brokers learn of a created or deleted topic a moment
//            after the controller answered).

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.Exit;

public class KafkaTools {
    static final Map<String, String> TOOLS = Map.of(
        "kafka-topics", "org.apache.kafka.tools.TopicCommand",
        "kafka-consumer-groups", "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "kafka-console-producer", "org.apache.kafka.tools.ConsoleProducer",
        "kafka-console-consumer", "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "kafka-transactions", "org.apache.kafka.tools.TransactionsCommand");

    static final Duration STEP_TIMEOUT = Duration.ofSeconds(120);
    static String bootstrap;
    static volatile CompletableFuture<Integer> running;
    static Thread member;
    static final AtomicBoolean leaving = new AtomicBoolean();
    static KafkaProducer<String, String> producer;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        ObjectMapper json = new ObjectMapper();
        List<Map<String, Object>> steps = json.readValue(System.in, List.class);
        Exit.setExitProcedure(KafkaTools::exited);
        Exit.setHaltProcedure(KafkaTools::exited);
        Exit.setShutdownHookAdder((name, hook) -> { });
        PrintStream out = System.out, err = System.err;
        InputStream in = System.in;
        Map<String, Object> ran = new LinkedHashMap<>();
        for (Map<String, Object> step : steps) {
            String[] stepArgs = ((List<String>) step.get("args")).stream().map(a -> a.replace("{bootstrap}", bootstrap)).toArray(String[]::new);
            ByteArrayOutputStream stdout = new ByteArrayOutputStream(), stderr = new ByteArrayOutputStream();
            System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(((String) step.getOrDefault("stdin", "")).getBytes(StandardCharsets.UTF_8)));
            CompletableFuture<Integer> status = new CompletableFuture<>();
            running = status;
            Thread tool = new Thread(() -> {
                try {
                    run((String) step.get("tool"), stepArgs);
                    status.complete(0);
                } catch (Throwable thrown) { // as a JVM reports an exception out of main, and its status
                    Throwable cause = thrown instanceof InvocationTargetException ? thrown.getCause() : thrown;
                    System.err.println("Exception in thread \"main\" " + cause);
                    status.complete(1);
                }
            }, "main-" + step.get("name"));
            tool.setDaemon(true);
            tool.start();
            int code = status.get(STEP_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
            System.setIn(in);
            ran.put((String) step.get("name"), Map.of("status", code, "out", stdout.toString(StandardCharsets.UTF_8),
                                                       "err", stderr.toString(StandardCharsets.UTF_8)));
        }
        System.out.println(json.writeValueAsString(ran));
        System.out.flush();
        System.exit(0); // without waiting for the threads the tools left behind
    }

    /** A tool's exit: its status is the step's, and its thread goes no further, as its JVM would not. */
    static void exited(int status, String message) {
        running.complete(status);
        while (true) {
            LockSupport.park();
        }
    }

    static void run(String tool, String[] args) throws Exception {
        switch (tool) {
            case "join" -> join(args[0], args[1]);
            case "leave" -> leave();
            case "open" -> open(args[0], args[1]);
            case "offsets" -> producer.sendOffsetsToTransaction(
                Map.of(new TopicPartition(args[1], 0), new OffsetAndMetadata(Long.parseLong(args[2]))),
                new ConsumerGroupMetadata(args[0]));
            case "commit" -> producer.commitTransaction();
            case "sleep" -> Thread.sleep(Long.parseLong(args[0]));
            case "listed" -> listed(args[0], args[1].equals("yes"));
            default -> Class.forName(TOOLS.get(tool)).getMethod("main", String[].class).invoke(null, (Object) args);
        }
    }

    static void join(String group, String topic) throws InterruptedException {
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        AtomicBoolean assigned = new AtomicBoolean();
        leaving.set(false);
        member = new Thread(() -> {
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
                consumer.subscribe(List.of(topic));
                while (!leaving.get()) {
                    consumer.poll(Duration.ofMillis(100));
                    assigned.compareAndSet(false, !consumer.assignment().isEmpty());
                }
            }
        });
        member.start();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (!assigned.get() && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        if (!assigned.get()) {
            throw new IllegalStateException("the consumer of group " + group + " got no partition within 60 s");
        }
    }

    static void listed(String topic, boolean wanted) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (admin.listTopics().names().get().contains(topic) != wanted) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("topic " + topic + (wanted ? " not listed" : " still listed") + " after 60 s");
                }
                Thread.sleep(50);
            }
        }
    }

    static void leave() throws InterruptedException {
        leaving.set(true);
        member.join();
    }

    static void open(String transactionalId, String topic) throws Exception {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        producer = new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, "k", "held")).get();
    }
}
