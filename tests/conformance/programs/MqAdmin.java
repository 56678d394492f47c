// Runs RocketMQ's mqadmin commands (rocketmq-tools, the broker's version) one after another in one
// JVM, each through MQAdminStartup, the main class bin/mqadmin runs, with the arguments given and
// "-n NAMESRV" after them, and prints what each printed and its status as one JSON object. Running
// them in one JVM spares a JVM start (about 2 s of CPU) per command. Each command runs on a thread
// of its own. mqadmin reports a failed command by printing its exception and still ends with
// status 0, so a command's status is 0 unless it threw out of MQAdminStartup (it does not); the
// commands that would call System.exit (a bad option, -h) are not run.
//
//     java -cp 'rocketmq-tools and its dependencies' MqAdmin NAMESRV < steps.json
//
// steps.json: [{"name": ..., "tool": ..., "args": [...]}]; "tool" is "mqadmin" (args: the command
// and its options) or a step of the scenario's own:
//   "send"    args [topic, key, tag, body]: a producer (group P-producer, started at the first
//             send) sends one message, to the topic's queues in turn (the first send to queue 0,
//             the next to queue 1, ...); "{uniq}" and "{offsetId}" in a later step's arguments are
//             then its message id and its offset message id;
//   "consume" args [group, topic, count]: a consumer of the group takes count messages from the
//             first offset, commits their offsets and shuts down (which sends them to the broker,
//             one-way), then waits until the broker holds them (consumerProgress's figures).

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class MqAdmin {
    static final long STEP_TIMEOUT_S = 120;
    static final long CONSUME_TIMEOUT_MS = 60_000;
    static String namesrv;
    static DefaultMQProducer producer;
    static int sends;
    static final Map<String, String> vars = new HashMap<>();

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        JSONArray steps = JSON.parseArray(new String(System.in.readAllBytes(), StandardCharsets.UTF_8));
        PrintStream out = System.out, err = System.err;
        Map<String, Object> ran = new LinkedHashMap<>();
        for (int i = 0; i < steps.size(); i++) {
            JSONObject step = steps.getJSONObject(i);
            String name = step.getString("name"), tool = step.getString("tool");
            List<String> stepArgs = new ArrayList<>();
            for (Object arg : step.getJSONArray("args")) {
                String value = (String) arg;
                for (Map.Entry<String, String> var : vars.entrySet()) {
                    value = value.replace("{" + var.getKey() + "}", var.getValue());
                }
                stepArgs.add(value);
            }
            if (tool.equals("mqadmin")) {
                stepArgs.add("-n");
                stepArgs.add(namesrv);
            }
            ByteArrayOutputStream stdout = new ByteArrayOutputStream(), stderr = new ByteArrayOutputStream();
            System.setOut(new PrintStream(stdout, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(stderr, true, StandardCharsets.UTF_8));
            CompletableFuture<Integer> status = new CompletableFuture<>();
            Thread thread = new Thread(() -> {
                try {
                    run(tool, stepArgs.toArray(new String[0]));
                    status.complete(0);
                } catch (Throwable thrown) { // as a JVM reports an exception out of main, and its status
                    System.err.println("Exception in thread \"main\" " + thrown);
                    status.complete(1);
                }
            }, "main-" + name);
            thread.setDaemon(true);
            thread.start();
            int code = status.get(STEP_TIMEOUT_S, TimeUnit.SECONDS);
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
            ran.put(name, Map.of("status", code, "out", stdout.toString(StandardCharsets.UTF_8),
                                 "err", stderr.toString(StandardCharsets.UTF_8)));
        }
        if (producer != null) {
            producer.shutdown();
        }
        System.out.println(JSON.toJSONString(ran));
        System.out.flush();
        System.exit(0); // without waiting for the threads the tools and clients left behind
    }

    static void run(String tool, String[] args) throws Exception {
        switch (tool) {
            case "mqadmin" -> MQAdminStartup.main0(args, null);
            case "send" -> send(args[0], args[1], args[2], args[3]);
            case "consume" -> consume(args[0], args[1], Integer.parseInt(args[2]));
            default -> throw new IllegalArgumentException("no such step: " + tool);
        }
    }

    static void send(String topic, String key, String tag, String body) throws Exception {
        if (producer == null) {
            // the group is named as the run's topics are: "P-" in the steps is the run's prefix
            producer = new DefaultMQProducer(topic.substring(0, topic.lastIndexOf('-')) + "-producer");
            producer.setNamesrvAddr(namesrv);
            producer.start();
        }
        // the queues in turn, from the first: the client's own choice starts at a random queue
        int turn = sends++;
        Message message = new Message(topic, tag, key, body.getBytes(StandardCharsets.UTF_8));
        SendResult sent = producer.send(message, (queues, unused, arg) -> queues.get(turn % queues.size()), null);
        vars.put("uniq", sent.getMsgId());
        vars.put("offsetId", sent.getOffsetMsgId());
        System.out.println(sent.getSendStatus());
    }

    static void consume(String group, String topic, int count) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setAutoCommit(false);
        consumer.subscribe(topic, "*");
        consumer.start();
        try {
            List<String> taken = new ArrayList<>();
            long deadline = System.currentTimeMillis() + CONSUME_TIMEOUT_MS;
            while (taken.size() < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("group " + group + " took " + taken.size() + " of " + count
                                                    + " messages of " + topic + " in 60 s");
                }
                for (MessageExt message : consumer.poll(1000)) {
                    taken.add(message.getKeys() + " " + new String(message.getBody(), StandardCharsets.UTF_8));
                }
            }
            consumer.commitSync();
            taken.sort(null); // the queues' messages come in no promised order
            taken.forEach(System.out::println);
        } finally {
            consumer.shutdown(); // sends the committed offsets to the broker, one-way
        }
        awaitCommitted(group, topic, count);
    }

    // The client's shutdown does not wait for its one-way offset updates: wait until the broker's
    // committed offsets of the group on the topic add up to count.
    static void awaitCommitted(String group, String topic, int count) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        try {
            long deadline = System.currentTimeMillis() + CONSUME_TIMEOUT_MS;
            while (true) {
                long committed = admin.examineConsumeStats(group).getOffsetTable().entrySet().stream()
                    .filter(e -> e.getKey().getTopic().equals(topic))
                    .mapToLong(e -> Math.max(0, e.getValue().getConsumerOffset())).sum();
                if (committed >= count) {
                    return;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("the broker holds " + committed + " of " + count
                                                    + " committed offsets of group " + group + " in 60 s");
                }
                Thread.sleep(100);
            }
        } finally {
            admin.shutdown();
        }
    }
}
