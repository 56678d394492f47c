/*
 * RocketMQ's classic Java client (org.apache.rocketmq:rocketmq-client) against a broker with ACL:
 * a producer signing with the right secret key, one with a wrong key and one not signing at all
 * each send to TOPIC, then a signed lite pull consumer reads TOPIC back. Prints one JSON line.
 *
 *     java RmqClassicAclJava.java NAMESRV TOPIC SECRET_KEY
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

public class RmqClassicAclJava {
    static final int TIMEOUT = 20_000;

    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], secretKey = args[2];
        RPCHook signed = new AclClientRPCHook(new SessionCredentials("any-access-key", secretKey));
        Map<String, Object> outcome = new TreeMap<>();
        outcome.put("signed", send(namesrv, topic, signed, "signed"));
        outcome.put("wrong_key", send(namesrv, topic, new AclClientRPCHook(new SessionCredentials("any-access-key", "wrong")), "wrong key"));
        outcome.put("unsigned", send(namesrv, topic, null, "unsigned"));
        outcome.put("read", read(namesrv, topic, signed));
        System.out.println(outcome.entrySet().stream()
            .map(e -> "\"" + e.getKey() + "\": " + (e.getValue() instanceof List<?> l
                ? l.stream().map(v -> "\"" + v + "\"").collect(Collectors.joining(", ", "[", "]"))
                : "\"" + e.getValue() + "\""))
            .collect(Collectors.joining(", ", "{", "}")));
        System.exit(0);
    }

    /** The send's status, or what refused it: a broker's response code, or the client's. */
    static String send(String namesrv, String topic, RPCHook hook, String body) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("acl-producer", hook);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(TIMEOUT);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            return producer.send(new Message(topic, body.getBytes(StandardCharsets.UTF_8)), TIMEOUT).getSendStatus().name();
        } catch (MQBrokerException e) {
            return "broker refused " + e.getResponseCode();
        } catch (MQClientException e) {
            return "client refused " + e.getResponseCode();
        } finally {
            producer.shutdown();
        }
    }

    static List<String> read(String namesrv, String topic, RPCHook hook) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("acl-reader", hook);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.start();
        List<String> got = new ArrayList<>();
        try {
            consumer.assign(new ArrayList<>(consumer.fetchMessageQueues(topic)));
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.isEmpty() && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    got.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
            }
        } finally {
            consumer.shutdown();
        }
        return got;
    }
}
