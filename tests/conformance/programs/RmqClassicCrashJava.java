/*
 * A transactional application on RocketMQ's classic (remoting) Java client,
 * org.apache.rocketmq:rocketmq-client, for tests/test_remoting_crashes.py, which SIGKILLs the
 * broker under it. Not a conformance scenario: it only shares the folder and the way it is run
 * (tests/conformance/java.py).
 *
 *     java RmqClassicCrashJava.java NAMESRV TOPIC COUNT
 *
 * A TransactionMQProducer, given only the name server, sends COUNT transactions (keys and bodies
 * t-0 .. t-(COUNT-1)) from 64 threads at once. Its local transaction of t-i commits when i is even
 * and rolls back when i is odd, but is not known yet (UNKNOW) when i is a multiple of 5: the broker
 * checks those back and the check answers by the same rule. A send that throws (the broker is down,
 * or its answer was lost) is tried again with a new message, until one is acknowledged (SEND_OK),
 * as an application would.
 *
 * The application keeps a local record of each attempt by its message id (the transaction id the
 * client and the broker name it by), written before the send: a check of an attempt whose send
 * threw answers ROLLBACK, since that attempt's local transaction never ran (the application sent
 * the key again); of an attempt still being sent, UNKNOW; of an attempt whose local transaction
 * ran, the key's rule. A broker may have stored a half message whose answer never arrived; this is
 * how a real application leaves no second copy of the key behind.
 *
 * A DefaultMQPushConsumer (clustering, from the first offset, MessageListenerConcurrently that
 * returns CONSUME_SUCCESS) records every key delivered, repeats kept.
 *
 * stdout is JSON lines: {"acked": n} every 10 acknowledged keys, {"all_acked": COUNT} once every
 * key is acknowledged, then, after a line "stop" on stdin (or its end), once every committed key
 * was delivered (or 60 s passed): {"result": {...}} with the acknowledged attempts (key: message
 * id), the failed attempts (message ids), the keys delivered, the local state of each key, and
 * the checks answered (key: what the attempt was and the answer). The client logs to
 * ~/logs/rocketmqlogs/rocketmq_client.log.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

public class RmqClassicCrashJava {
    static final int THREADS = 64;
    static final long RETRY_PAUSE = 500; // ms between a failed send and the next attempt
    // Transactions begun per second: the sends must outlast the test's waits for a restarted
    // broker's first answered check (seconds each), however fast the broker answers them.
    static final int RATE = 150;
    static final long DELIVERY_WAIT = 60_000; // ms to wait, once stopped, for every committed key to be delivered
    static final long SETTLE = 2_000; // ms the consumer goes on once it has them: anything more shows

    enum Attempt { SENDING, FAILED, EXECUTED }

    /** The local transaction's outcome of t-i: commit even ones, roll back odd ones. */
    static LocalTransactionState rule(String key) {
        int i = Integer.parseInt(key.substring(2));
        return i % 2 == 0 ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
    }

    /** Whether t-i's local transaction is not known yet when its half message is acknowledged. */
    static boolean late(String key) {
        return Integer.parseInt(key.substring(2)) % 5 == 0;
    }

    // The application's local records: attempt (message id) to its key and state.
    static final Map<String, String> attemptKeys = new ConcurrentHashMap<>();
    static final Map<String, Attempt> attempts = new ConcurrentHashMap<>();
    static final Map<String, String> acked = new ConcurrentHashMap<>(); // key: the acknowledged attempt's message id
    static final Set<String> failed = ConcurrentHashMap.newKeySet();
    static final Map<String, String> localStates = new ConcurrentHashMap<>();
    static final Map<String, List<String>> checks = new ConcurrentHashMap<>();
    static final List<String> delivered = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("crash-consumer");
        consumer.setNamesrvAddr(namesrv);
        consumer.setMessageModel(MessageModel.CLUSTERING);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            synchronized (delivered) {
                for (MessageExt m : messages) {
                    delivered.add(m.getKeys());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        TransactionMQProducer producer = new TransactionMQProducer("crash-producer");
        producer.setNamesrvAddr(namesrv);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String key = msg.getKeys();
                attempts.put(msg.getTransactionId(), Attempt.EXECUTED);
                LocalTransactionState state = rule(key);
                localStates.put(key, state.name());
                return late(key) ? LocalTransactionState.UNKNOW : state;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String id = MessageClientIDSetter.getUniqID(msg);
                Attempt attempt = id == null ? null : attempts.get(id);
                LocalTransactionState answer;
                if (attempt == null || attempt == Attempt.FAILED) {
                    answer = LocalTransactionState.ROLLBACK_MESSAGE; // no local transaction ran for it
                } else if (attempt == Attempt.SENDING) {
                    answer = LocalTransactionState.UNKNOW;
                } else {
                    answer = rule(msg.getKeys());
                }
                String label = attempt == null ? "UNKNOWN_ATTEMPT" : attempt.name();
                checks.computeIfAbsent(String.valueOf(msg.getKeys()), k -> Collections.synchronizedList(new ArrayList<>()))
                    .add(label + ":" + answer.name());
                return answer;
            }
        });
        producer.start();

        AtomicInteger ackedCount = new AtomicInteger();
        ExecutorService senders = Executors.newFixedThreadPool(THREADS);
        for (int i = 0; i < count; i++) {
            if (i % 10 == 0) {
                Thread.sleep(10_000 / RATE);
            }
            String key = "t-" + i;
            senders.submit(() -> {
                while (true) {
                    Message msg = new Message(topic, "crash", key, key.getBytes(StandardCharsets.UTF_8));
                    MessageClientIDSetter.setUniqID(msg);
                    String id = MessageClientIDSetter.getUniqID(msg);
                    attemptKeys.put(id, key);
                    attempts.put(id, Attempt.SENDING);
                    try {
                        TransactionSendResult result = producer.sendMessageInTransaction(msg, null);
                        if (result.getSendStatus() == SendStatus.SEND_OK) {
                            acked.put(key, id);
                            int n = ackedCount.incrementAndGet();
                            if (n % 10 == 0) {
                                emit(Map.of("acked", n));
                            }
                            return;
                        }
                    } catch (Exception e) {
                        // the broker is down or its answer was lost: this attempt failed
                    }
                    attempts.put(id, Attempt.FAILED);
                    failed.add(id);
                    try {
                        Thread.sleep(RETRY_PAUSE);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
        }
        senders.shutdown();
        senders.awaitTermination(1, TimeUnit.HOURS);
        emit(Map.of("all_acked", acked.size()));

        // Stay up (answering checks, consuming) until told to stop.
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null && !line.trim().equals("stop")) {
            // nothing else is asked
        }
        Set<String> committed = acked.keySet().stream()
            .filter(k -> rule(k) == LocalTransactionState.COMMIT_MESSAGE)
            .collect(Collectors.toCollection(TreeSet::new));
        long deadline = System.currentTimeMillis() + DELIVERY_WAIT;
        while (!deliveredKeys().containsAll(committed) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(SETTLE);
        producer.shutdown();
        consumer.shutdown();

        Map<String, Object> result = new TreeMap<>();
        result.put("acked", new TreeMap<>(acked));
        result.put("failed", new ArrayList<>(new TreeSet<>(failed)));
        synchronized (delivered) {
            result.put("delivered", new ArrayList<>(delivered));
        }
        result.put("local_states", new TreeMap<>(localStates));
        Map<String, Object> answered = new TreeMap<>();
        checks.forEach((key, answers) -> {
            synchronized (answers) {
                answered.put(key, new ArrayList<>(answers));
            }
        });
        result.put("checks", answered);
        emit(Map.of("result", result));
        System.exit(0); // the client's scheduler threads would keep the JVM up a while
    }

    static Set<String> deliveredKeys() {
        synchronized (delivered) {
            return new TreeSet<>(delivered);
        }
    }

    static synchronized void emit(Map<String, Object> line) {
        System.out.println(json(line));
        System.out.flush();
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
            return items.stream().map(RmqClassicCrashJava::json).collect(Collectors.joining(", ", "[", "]"));
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
