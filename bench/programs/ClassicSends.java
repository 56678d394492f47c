/*
 * Send rates of RocketMQ's classic Java client (org.apache.rocketmq:rocketmq-client) through a
 * name server: a TransactionMQProducer whose local transaction commits (send, local transaction,
 * end), and a DefaultMQProducer's plain sends, each from THREADS threads sending 1 KB messages
 * synchronously for SECONDS. Prints one JSON line: {"transactional": sends/s, "normal": sends/s}.
 *
 *     java ClassicSends NAMESRV TXN_TOPIC NORMAL_TOPIC SECONDS THREADS
 *
 * Run by bench/classic.py with the client on the classpath (halfmq_peers/java.py).
 */

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class ClassicSends {
    static final byte[] BODY = new byte[1024];
    static final int TIMEOUT = 20_000;

    interface Send {
        void send(Message message) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String txnTopic = args[1];
        String normalTopic = args[2];
        long seconds = Long.parseLong(args[3]);
        int threads = Integer.parseInt(args[4]);

        TransactionMQProducer transactional = new TransactionMQProducer("bench-txn-producer");
        transactional.setNamesrvAddr(namesrv);
        transactional.setSendMsgTimeout(TIMEOUT);
        transactional.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        transactional.start();
        double txnRate = rate(m -> transactional.sendMessageInTransaction(m, null), txnTopic, seconds, threads);
        transactional.shutdown();

        DefaultMQProducer plain = new DefaultMQProducer("bench-plain-producer");
        plain.setNamesrvAddr(namesrv);
        plain.setSendMsgTimeout(TIMEOUT);
        plain.start();
        double normalRate = rate(m -> plain.send(m, TIMEOUT), normalTopic, seconds, threads);
        plain.shutdown();

        System.out.printf("{\"transactional\": %.1f, \"normal\": %.1f}%n", txnRate, normalRate);
        System.exit(0);
    }

    /** Sends a second from {@code threads} threads for {@code seconds}, after one send that fetches the route. */
    static double rate(Send send, String topic, long seconds, int threads) throws Exception {
        send.send(new Message(topic, "bench", BODY));
        AtomicLong done = new AtomicLong();
        long began = System.nanoTime();
        long stopAt = began + seconds * 1_000_000_000L;
        List<Thread> senders = new ArrayList<>();
        List<Exception> failures = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            Thread sender = new Thread(() -> {
                try {
                    while (System.nanoTime() < stopAt) {
                        send.send(new Message(topic, "bench", BODY));
                        done.incrementAndGet();
                    }
                } catch (Exception e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            sender.start();
            senders.add(sender);
        }
        for (Thread sender : senders) {
            sender.join();
        }
        if (!failures.isEmpty()) {
            throw failures.get(0);
        }
        return done.get() / ((System.nanoTime() - began) / 1e9);
    }
}
