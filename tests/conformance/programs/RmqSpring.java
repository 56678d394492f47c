/*
 * RocketMQ's Spring Boot starter, org.apache.rocketmq:rocketmq-spring-boot-starter, as its own
 * samples use it (rocketmq-spring-boot-samples: the produce demo's
 * RocketMQTemplate.sendMessageInTransaction with a @RocketMQTransactionListener, and the consume
 * demo's @RocketMQMessageListener consumers), printing its observable outcome as one JSON line,
 * the same against halfmq's name server and against Apache RocketMQ's.
 *
 *     java RmqSpring NAMESRV PREFIX transaction    run the scenario, print its outcome
 *     java RmqSpring --needs PREFIX transaction    print the topics it uses (and no groups)
 *
 * The application is configured as the samples' application.properties configure theirs
 * (rocketmq.name-server, rocketmq.producer.group), with the name server address from the
 * command line. The scenario is RmqClassicJava's transaction scenario: t-0 commits and t-1 rolls
 * back when the half message is sent; t-2 and t-3 answer UNKNOWN and the broker's check-backs
 * find them committed (t-2) and rolled back (t-3). The consumer is a @RocketMQMessageListener of a
 * new group with the starter's defaults, started with the application; the sends wait until it
 * holds the topic's queues, so that where it starts reading is settled before the first commit.
 *
 * What an outcome leaves out, as not the broker's to decide: ids, and the values of the headers
 * Spring gives every message ("id", "timestamp"), which the starter sends as user properties.
 */

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.spring.annotation.RocketMQMessageListener;
import org.apache.rocketmq.spring.annotation.RocketMQTransactionListener;
import org.apache.rocketmq.spring.core.RocketMQListener;
import org.apache.rocketmq.spring.core.RocketMQLocalTransactionListener;
import org.apache.rocketmq.spring.core.RocketMQLocalTransactionState;
import org.apache.rocketmq.spring.core.RocketMQTemplate;
import org.apache.rocketmq.spring.support.DefaultRocketMQListenerContainer;
import org.apache.rocketmq.spring.support.RocketMQHeaders;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.Banner;
import org.springframework.boot.CommandLineRunner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.messaging.Message;
import org.springframework.messaging.support.MessageBuilder;

// No component scan: the program is in the default package, so its beans are imported by name.
@SpringBootConfiguration
@EnableAutoConfiguration
@Import({RmqSpring.TransactionListenerImpl.class, RmqSpring.TransactionConsumer.class})
public class RmqSpring implements CommandLineRunner {
    static final long CHECK_WAIT = 60_000; // ms the scenario waits for the commits and check-backs
    static final long QUEUES_WAIT = 60_000; // ms it waits for its consumer to hold the topic's queues
    static final int QUEUES = 2; // the topic's
    static final long SETTLE = 5_000; // ms it goes on reading once it has what it expects
    static final int SEND_TIMEOUT = 20_000; // ms, as RmqClassicJava's sends wait
    static final Set<String> SPRING_HEADERS = Set.of("id", "timestamp");

    static final Map<String, RocketMQLocalTransactionState> LOCAL = Map.of(
        "t-0", RocketMQLocalTransactionState.COMMIT, "t-1", RocketMQLocalTransactionState.ROLLBACK,
        "t-2", RocketMQLocalTransactionState.COMMIT, "t-3", RocketMQLocalTransactionState.ROLLBACK);
    static final Set<String> KNOWN = Set.of("t-0", "t-1"); // done when their half message is sent
    static final Map<String, Integer> CHECKS = new ConcurrentHashMap<>();
    static final List<MessageExt> READ = new CopyOnWriteArrayList<>();
    static final Map<String, Object> OUTCOME = new TreeMap<>();

    @Autowired
    RocketMQTemplate rocketMQTemplate;

    @Value("${halfmq.topic}")
    String topic;

    @Autowired
    ApplicationContext context; // the starter registers its listener containers once the beans are made

    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !args[2].equals("transaction")) {
            System.err.println("usage: RmqSpring NAMESRV PREFIX transaction | --needs PREFIX transaction");
            System.exit(2);
        }
        String prefix = args[1];
        if (args[0].equals("--needs")) {
            System.out.println(new ObjectMapper().writeValueAsString(
                Map.of("topics", List.of(List.of(prefix + "-spring-txn", 2, "TRANSACTION")), "groups", List.of())));
            return;
        }
        SpringApplication application = new SpringApplication(RmqSpring.class);
        application.setBannerMode(Banner.Mode.OFF);
        application.setLogStartupInfo(false);
        application.setDefaultProperties(Map.of(
            "rocketmq.name-server", args[0],
            "rocketmq.producer.group", prefix + "-spring-producer",
            "rocketmq.producer.send-message-timeout", String.valueOf(SEND_TIMEOUT),
            "halfmq.topic", prefix + "-spring-txn",
            "halfmq.group", prefix + "-spring-consumer",
            "logging.level.root", "WARN"));
        ConfigurableApplicationContext context = application.run(args);
        int code = SpringApplication.exit(context);
        System.out.println(new ObjectMapper().writeValueAsString(OUTCOME));
        System.exit(code);
    }

    @Override
    public void run(String... args) throws Exception {
        long held = System.currentTimeMillis() + QUEUES_WAIT;
        while (queuesHeld() < QUEUES && System.currentTimeMillis() < held) {
            Thread.sleep(100);
        }
        List<List<String>> sent = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            String key = "t-" + i;
            Message<String> message = MessageBuilder.withPayload("txn " + i)
                .setHeader(RocketMQHeaders.KEYS, key)
                .setHeader("n", String.valueOf(i))
                .build();
            TransactionSendResult result = rocketMQTemplate.sendMessageInTransaction(topic + ":TagA", message, null);
            sent.add(List.of(key, result.getSendStatus().name(), result.getLocalTransactionState().name()));
        }
        // The producer stays up to answer check-backs while the consumer waits for the commits.
        long deadline = System.currentTimeMillis() + CHECK_WAIT;
        while (!(bodies().containsAll(Set.of("txn 0", "txn 2")) && CHECKS.keySet().containsAll(Set.of("t-2", "t-3")))
            && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
        }
        Thread.sleep(SETTLE); // anything beyond what was expected shows
        OUTCOME.put("sent", sent);
        OUTCOME.put("read", new ArrayList<>(bodies())); // at least once: a commit may come twice
        OUTCOME.put("checked_at_least_once", new ArrayList<>(new TreeSet<>(CHECKS.keySet())));
        Map<String, Object> properties = new TreeMap<>();
        for (MessageExt m : READ) {
            Map<String, String> user = new TreeMap<>();
            m.getProperties().forEach((name, value) -> {
                if (!MessageConst.STRING_HASH_SET.contains(name)) {
                    user.put(name, SPRING_HEADERS.contains(name) ? "<set by Spring>" : value);
                }
            });
            // How often the broker checked a transaction back before its answer was in is a matter of timing.
            user.computeIfPresent(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES, (name, value) -> "<checks>");
            user.remove(MessageConst.PROPERTY_TRANSACTION_ID); // an id
            properties.put(new String(m.getBody(), StandardCharsets.UTF_8), user);
        }
        OUTCOME.put("properties", properties);
        OUTCOME.put("tags", new ArrayList<>(new TreeSet<>(READ.stream().map(MessageExt::getTags).toList())));
    }

    /** How many of the topic's queues the consumer has been given by its rebalance. */
    int queuesHeld() {
        return context.getBeansOfType(DefaultRocketMQListenerContainer.class).values().stream()
            .mapToInt(c -> c.getConsumer().getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().size())
            .sum();
    }

    static Set<String> bodies() {
        Set<String> found = new TreeSet<>();
        READ.forEach(m -> found.add(new String(m.getBody(), StandardCharsets.UTF_8)));
        return found;
    }

    static String keys(Message<?> message) {
        return String.valueOf(message.getHeaders().get(RocketMQHeaders.PREFIX + RocketMQHeaders.KEYS));
    }

    /** The produce demo's TransactionListenerImpl, told what each local transaction comes to. */
    @RocketMQTransactionListener
    static class TransactionListenerImpl implements RocketMQLocalTransactionListener {
        @Override
        public RocketMQLocalTransactionState executeLocalTransaction(Message message, Object arg) {
            String key = keys(message);
            return KNOWN.contains(key) ? LOCAL.get(key) : RocketMQLocalTransactionState.UNKNOWN;
        }

        @Override
        public RocketMQLocalTransactionState checkLocalTransaction(Message message) {
            String key = keys(message);
            CHECKS.merge(key, 1, Integer::sum);
            return LOCAL.getOrDefault(key, RocketMQLocalTransactionState.UNKNOWN);
        }
    }

    /** The consume demo's transactional consumer: a new group, the starter's defaults. */
    @RocketMQMessageListener(topic = "${halfmq.topic}", consumerGroup = "${halfmq.group}")
    static class TransactionConsumer implements RocketMQListener<MessageExt> {
        @Override
        public void onMessage(MessageExt message) {
            READ.add(message);
        }
    }
}
