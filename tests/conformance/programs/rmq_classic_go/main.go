// RocketMQ scenarios with the classic (remoting) Go client, github.com/apache/rocketmq-client-go/v2,
// written as that client's own examples are (examples/producer/simple and tag, the transaction
// producer of examples/producer/transaction, examples/producer/delay, the push consumers of
// examples/consumer/retry/concurrent and examples/consumer/orderly, and the pull consumer of
// examples/consumer/pull/poll, which reads every scenario's outcome);
// each prints its observable outcome as one JSON line, the same against halfmq's name server and
// against Apache RocketMQ's. The scenarios, and the fields of their outcomes, are those of
// RmqClassicJava.java, so that one list of departures serves both clients.
//
//	rmq_classic_go NAMESRV PREFIX SCENARIO    run SCENARIO, print its outcome
//	rmq_classic_go --needs PREFIX SCENARIO    print the topics it uses (and no groups: a remoting
//	                                          client's groups need no creating)
//	rmq_classic_go --answer NAMESRV GROUP TOPIC  be a transaction producer of GROUP that answers
//	                                             the broker's checks by RmqClassicCrashJava's rule
//	                                             (t-i commits when i is even), printing each answer
//	                                             as a JSON line, until stdin ends. Its one send, a
//	                                             transaction of TOPIC rolled back at once, makes
//	                                             the client know the broker, which it then tells
//	                                             of its group at each heartbeat.
//
// Built once per test run by tests/test_conformance_rocketmq_classic.py. The client logs to stderr
// (ROCKETMQ_GO_LOG_LEVEL sets how much: warnings and errors unless it is set), so stdout carries
// only the outcome.
//
// What an outcome leaves out, as not the broker's to decide: message ids (the client makes them;
// only whether the reader saw the ids the sender was given is kept) and which queue a send picks
// (the producer goes round the topic's queues, so a queue is recorded counted from the first send's
// queue). A topic is new in each run, so its queue offsets start at 0. A committed transaction's
// properties name the ids they hold, and TRANSACTION_CHECK_TIMES (how often the broker checked it
// back before its answer was in) is kept as present, not as a count.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	wait      = 30 * time.Second // how long a scenario waits for what it expects before it records what it has
	checkWait = 60 * time.Second // how long the transaction scenario waits for the broker's check-backs
	settle    = 5 * time.Second  // how long a transaction's reader goes on reading once it has what it expects
	// A send waits 20 s, not the client's 3 s, as RmqClassicJava's do: the real broker, its JVM
	// beside the suite's on two cores, has been seen to take over 3 s to answer.
	sendTimeout = 20 * time.Second
)

type topic struct {
	suffix string
	queues int
	kind   string // message type
}

// What each scenario uses: topics.
var needs = map[string][]topic{
	"quickstart":  {{"orders", 4, "NORMAL"}},
	"transaction": {{"txn", 2, "TRANSACTION"}},
	"scheduled":   {{"scheduled", 1, "DELAY"}},
	"retry":       {{"retry", 1, "NORMAL"}},
	"orderly":     {{"orderly", 2, "NORMAL"}},
}

// Properties the client or broker sets (Java's MessageConst.STRING_HASH_SET in rocketmq-common
// 5.5.0): what remains of a message's properties is the user's.
var systemProperties = map[string]bool{}

func init() {
	for _, name := range []string{
		"TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "ORIGIN_GROUP",
		"REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
		"ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY",
		"MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
		"TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID",
		"REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
		"INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
		"TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
		"TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
		"__CRC32#", "_SYS_MSG_PRIORITY_", "__LITE_TOPIC",
	} {
		systemProperties[name] = true
	}
}

const transactionCheckTimes = "TRANSACTION_CHECK_TIMES"

func main() {
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("warn")
	}
	if len(os.Args) == 5 && os.Args[1] == "--answer" {
		if err := answer(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fail(err)
		}
		return
	}
	if len(os.Args) != 4 {
		fail(fmt.Errorf("usage: %s NAMESRV PREFIX SCENARIO | --needs PREFIX SCENARIO | --answer NAMESRV GROUP TOPIC", os.Args[0]))
	}
	if os.Args[1] == "--needs" {
		prefix, scenario := os.Args[2], os.Args[3]
		used, ok := needs[scenario]
		if !ok {
			fail(fmt.Errorf("no scenario %s", scenario))
		}
		topics := [][]any{}
		for _, t := range used {
			topics = append(topics, []any{prefix + "-" + t.suffix, t.queues, t.kind})
		}
		printJSON(map[string]any{"topics": topics, "groups": []any{}})
		return
	}
	s := scenarios{namesrv: os.Args[1], prefix: os.Args[2]}
	var outcome map[string]any
	var err error
	switch os.Args[3] {
	case "quickstart":
		outcome, err = s.quickstart()
	case "transaction":
		outcome, err = s.transaction()
	case "scheduled":
		outcome, err = s.scheduled()
	case "retry":
		outcome, err = s.retry()
	case "orderly":
		outcome, err = s.orderly()
	default:
		err = fmt.Errorf("no scenario %s", os.Args[3])
	}
	if err != nil {
		fail(err)
	}
	printJSON(outcome)
}

type scenarios struct {
	namesrv string
	prefix  string
}

func (s scenarios) resolver() primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{s.namesrv})
}

// A message as the examples make one: topic and body, a tag and a key, and a user property.
func message(topic, tag, key, body string, n int) *primitive.Message {
	msg := primitive.NewMessage(topic, []byte(body))
	msg.WithTag(tag)
	msg.WithKeys([]string{key})
	msg.WithProperty("n", strconv.Itoa(n))
	return msg
}

// producer is a started producer as the examples make one, its sends waiting sendTimeout, with
// any options more.
func (s scenarios) producer(more ...producer.Option) (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(append([]producer.Option{
		producer.WithNsResolver(s.resolver()),
		producer.WithRetry(2),
		producer.WithGroupName(s.prefix + "-producer"),
		producer.WithSendMsgTimeout(sendTimeout),
	}, more...)...)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	if err = p.Start(); err != nil {
		return nil, fmt.Errorf("start producer: %w", err)
	}
	return p, nil
}

// The simple producer: 8 synchronous sends round the topic's 4 queues, tags TagA and TagB in turn,
// keys o-0..o-7; then everything read back from the start of each queue.
func (s scenarios) quickstart() (map[string]any, error) {
	topic := s.prefix + "-orders"
	p, err := s.producer()
	if err != nil {
		return nil, err
	}
	var results []*primitive.SendResult
	for i := 0; i < 8; i++ {
		tag := "TagA"
		if i%2 == 1 {
			tag = "TagB"
		}
		msg := message(topic, tag, fmt.Sprintf("o-%d", i), fmt.Sprintf("Hello RocketMQ %d", i), i)
		res, err := p.SendSync(context.Background(), msg)
		if err != nil {
			_ = p.Shutdown()
			return nil, fmt.Errorf("send %d: %w", i, err)
		}
		results = append(results, res)
	}
	if err = p.Shutdown(); err != nil {
		return nil, fmt.Errorf("shutdown producer: %w", err)
	}
	first := results[0].MessageQueue.QueueId
	read, err := s.read(s.prefix+"-reader", topic, func(got []*primitive.MessageExt) bool { return len(got) >= 8 }, wait, 0)
	if err != nil {
		return nil, err
	}
	sent := []any{}
	var sentIds, sentOffsetIds []string
	for _, r := range results {
		sent = append(sent, map[string]any{
			"status":       sendStatus(r.Status),
			"topic":        r.MessageQueue.Topic,
			"queue_id":     queueFrom(r.MessageQueue.QueueId, first, 4),
			"queue_offset": r.QueueOffset,
			"region_id":    r.RegionID,
		})
		sentIds = append(sentIds, r.MsgID)
		sentOffsetIds = append(sentOffsetIds, r.OffsetMsgID)
	}
	var readIds, readOffsetIds []string
	var seenAll []map[string]any
	for _, m := range read {
		seenOne := seen(m)
		seenOne["queue_id"] = queueFrom(m.Queue.QueueId, first, 4)
		seenAll = append(seenAll, seenOne)
		readIds = append(readIds, m.MsgId)
		readOffsetIds = append(readOffsetIds, m.OffsetMsgId)
	}
	return map[string]any{
		"sent":                 sent,
		"read":                 byBody(seenAll),
		"msg_ids_match":        sameIds(sentIds, readIds),
		"offset_msg_ids_match": sameIds(sentOffsetIds, readOffsetIds),
	}, nil
}

// The transaction example's listener, told what each local transaction comes to: that of t-0
// commits and that of t-1 rolls back when the half message is sent; those of t-2 and t-3 are not
// known then (UnkonwnState), and the broker's check-backs find them committed (t-2) and rolled back
// (t-3).
type demoListener struct {
	localTrans map[string]primitive.LocalTransactionState
	known      map[string]bool // the local transactions done when their half message is sent
	mu         sync.Mutex
	checks     map[string]int
}

func (dl *demoListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	if dl.known[msg.GetKeys()] {
		return dl.localTrans[msg.GetKeys()]
	}
	return primitive.UnkonwnState
}

func (dl *demoListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	dl.mu.Lock()
	dl.checks[msg.GetKeys()]++
	dl.mu.Unlock()
	if state, ok := dl.localTrans[msg.GetKeys()]; ok {
		return state
	}
	return primitive.UnkonwnState
}

func (dl *demoListener) checked() map[string]bool {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	keys := map[string]bool{}
	for key := range dl.checks {
		keys[key] = true
	}
	return keys
}

func (s scenarios) transaction() (map[string]any, error) {
	topic := s.prefix + "-txn"
	listener := &demoListener{
		localTrans: map[string]primitive.LocalTransactionState{
			"t-0": primitive.CommitMessageState, "t-1": primitive.RollbackMessageState,
			"t-2": primitive.CommitMessageState, "t-3": primitive.RollbackMessageState,
		},
		known:  map[string]bool{"t-0": true, "t-1": true},
		checks: map[string]int{},
	}
	p, err := rocketmq.NewTransactionProducer(
		listener,
		producer.WithNsResolver(s.resolver()),
		producer.WithRetry(1),
		producer.WithGroupName(s.prefix+"-txn-producer"),
		producer.WithSendMsgTimeout(sendTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("new transaction producer: %w", err)
	}
	if err = p.Start(); err != nil {
		return nil, fmt.Errorf("start transaction producer: %w", err)
	}
	sent := []any{}
	names := map[string]string{} // ids this run made, by what they are
	for i := 0; i < 4; i++ {
		key := fmt.Sprintf("t-%d", i)
		res, err := p.SendMessageInTransaction(context.Background(), message(topic, "TagA", key, fmt.Sprintf("txn %d", i), i))
		if err != nil {
			_ = p.Shutdown()
			return nil, fmt.Errorf("send %s: %w", key, err)
		}
		sent = append(sent, []string{key, sendStatus(res.Status), transactionState(res.State)})
		names[res.MsgID] = fmt.Sprintf("<msg id of %s>", key)
		if res.TransactionID != "" {
			names[res.TransactionID] = fmt.Sprintf("<transaction id of %s>", key)
		}
	}
	// The producer stays up to answer check-backs while the reader waits for the commits.
	read, err := s.read(s.prefix+"-reader", topic, func(got []*primitive.MessageExt) bool {
		b, checked := bodies(got), listener.checked()
		return b["txn 0"] && b["txn 2"] && checked["t-2"] && checked["t-3"]
	}, checkWait, settle)
	if shutdownErr := p.Shutdown(); err == nil && shutdownErr != nil {
		err = fmt.Errorf("shutdown transaction producer: %w", shutdownErr)
	}
	if err != nil {
		return nil, err
	}
	properties := map[string]any{}
	for _, m := range read {
		user := userProperties(m)
		for key, value := range user {
			if name, ok := names[value]; ok {
				user[key] = name
			}
		}
		// How often the broker checked a transaction back before its answer was in is a matter of timing.
		if _, ok := user[transactionCheckTimes]; ok {
			user[transactionCheckTimes] = "<checks>"
		}
		properties[string(m.Body)] = user
	}
	return map[string]any{
		"sent":                  sent,
		"read":                  sortedKeys(bodies(read)), // at least once: a commit may come twice
		"checked_at_least_once": sortedKeys(listener.checked()),
		"properties":            properties,
	}, nil
}

// ruleListener answers checks as RmqClassicCrashJava's local transactions end: t-i commits when i
// is even and rolls back when it is odd.
type ruleListener struct{}

func (ruleListener) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return primitive.RollbackMessageState // its one send, which only finds the broker
}

func (ruleListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	i, err := strconv.Atoi(strings.TrimPrefix(msg.GetKeys(), "t-"))
	state := primitive.UnkonwnState
	if err == nil && i%2 == 0 {
		state = primitive.CommitMessageState
	} else if err == nil {
		state = primitive.RollbackMessageState
	}
	printJSON(map[string]any{"answered": msg.GetKeys(), "state": transactionState(state)})
	return state
}

// answer runs a transaction producer of group that answers checks, until stdin ends.
func answer(namesrv, group, topic string) error {
	p, err := rocketmq.NewTransactionProducer(
		ruleListener{},
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		producer.WithGroupName(group),
	)
	if err != nil {
		return fmt.Errorf("new transaction producer: %w", err)
	}
	if err = p.Start(); err != nil {
		return fmt.Errorf("start transaction producer: %w", err)
	}
	if _, err = p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte("go-probe"))); err != nil {
		return fmt.Errorf("send the probe: %w", err)
	}
	printJSON(map[string]any{"started": group})
	_, _ = io.Copy(io.Discard, os.Stdin)
	return p.Shutdown()
}

// The delay example: a message at delay level 2 (5 s), to a topic of delayed messages, beside one
// sent at once; both read back, with whether each became readable no sooner than it was due (its
// store time against its born time), as RmqClassicJava's scheduled scenario records them.
func (s scenarios) scheduled() (map[string]any, error) {
	topic := s.prefix + "-scheduled"
	p, err := s.producer()
	if err != nil {
		return nil, err
	}
	delayed := message(topic, "TagA", "s-level", "level 2", 0)
	delayed.WithDelayTimeLevel(2)
	delays := map[string]int64{"level 2": 5000, "now": 0}
	for _, msg := range []*primitive.Message{delayed, message(topic, "TagA", "s-now", "now", 4)} {
		if _, err = p.SendSync(context.Background(), msg); err != nil {
			_ = p.Shutdown()
			return nil, fmt.Errorf("send %s: %w", msg.GetKeys(), err)
		}
	}
	if err = p.Shutdown(); err != nil {
		return nil, fmt.Errorf("shutdown producer: %w", err)
	}
	read, err := s.read(s.prefix+"-reader", topic, func(got []*primitive.MessageExt) bool { return len(got) >= 2 }, wait, settle)
	if err != nil {
		return nil, err
	}
	found := []map[string]any{}
	for _, m := range read {
		one := seen(m)
		delete(one, "queue_offset") // the order in which they came due
		// A timing wheel of a second's grain may hand a message out up to a second early.
		one["not_before_due"] = m.StoreTimestamp-m.BornTimestamp >= delays[string(m.Body)]-1000
		found = append(found, one)
	}
	return map[string]any{"read": byBody(found)}, nil
}

// A started push consumer of group as the consumer examples make one (clustering, from the first
// offset), subscribed to every message of topic, redelivering a message at most maxReconsumeTimes
// times; an orderly one when orderly.
func (s scenarios) pushConsumer(group, topic string, maxReconsumeTimes int32, orderly bool,
	listener func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) (rocketmq.PushConsumer, error) {
	c, err := rocketmq.NewPushConsumer(
		consumer.WithGroupName(group),
		consumer.WithNsResolver(s.resolver()),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumerOrder(orderly),
		consumer.WithMaxReconsumeTimes(maxReconsumeTimes),
	)
	if err != nil {
		return nil, fmt.Errorf("new push consumer: %w", err)
	}
	if err = c.Subscribe(topic, consumer.MessageSelector{}, listener); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if err = c.Start(); err != nil {
		return nil, fmt.Errorf("start push consumer: %w", err)
	}
	return c, nil
}

// deadLetters waits until the push consumer c of group was handed n deliveries (by handed) or
// checkWait is over, then for settle more, so that anything beyond what was expected shows; shuts
// c down, and reads the group's dead-letter topic.
func (s scenarios) deadLetters(c rocketmq.PushConsumer, group string, handed func() int, n int) ([]*primitive.MessageExt, error) {
	deadline := time.Now().Add(checkWait)
	for handed() < n && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(settle)
	if err := c.Shutdown(); err != nil {
		return nil, fmt.Errorf("shutdown push consumer: %w", err)
	}
	return s.read(s.prefix+"-dlq-reader", "%DLQ%"+group, func(got []*primitive.MessageExt) bool { return len(got) > 0 }, wait, 0)
}

// The retry example (examples/consumer/retry/concurrent), as RmqClassicJava's retry scenario: three
// messages; a concurrent push consumer of a group that redelivers at most twice succeeds with
// "retry 0", fails "retry 1" once and "retry 2" always, each time asking for delay level 1; then the
// group's dead-letter topic is read.
func (s scenarios) retry() (map[string]any, error) {
	topic, group := s.prefix+"-retry", s.prefix+"-retry-consumer"
	p, err := s.producer()
	if err != nil {
		return nil, err
	}
	firstIds := map[string]string{}
	for i := 0; i < 3; i++ {
		body := fmt.Sprintf("retry %d", i)
		res, err := p.SendSync(context.Background(), message(topic, "TagA", fmt.Sprintf("r-%d", i), body, i))
		if err != nil {
			_ = p.Shutdown()
			return nil, fmt.Errorf("send %s: %w", body, err)
		}
		firstIds[body] = res.MsgID
	}
	if err = p.Shutdown(); err != nil {
		return nil, fmt.Errorf("shutdown producer: %w", err)
	}
	var mu sync.Mutex
	deliveries := []map[string]any{}
	c, err := s.pushConsumer(group, topic, 2, false, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		concurrentCtx, _ := primitive.GetConcurrentlyCtx(ctx)
		concurrentCtx.DelayLevelWhenNextConsume = 1 // only when the result is ConsumeRetryLater
		failed := false
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			one := seen(m)
			delete(one, "queue_offset") // a retry's place in the group's retry topic
			one["first_msg_id"] = m.MsgId == firstIds[string(m.Body)]
			deliveries = append(deliveries, one)
			body := string(m.Body)
			failed = failed || body == "retry 2" || body == "retry 1" && m.ReconsumeTimes == 0
		}
		if failed {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return nil, err
	}
	dead, err := s.deadLetters(c, group, func() int { mu.Lock(); defer mu.Unlock(); return len(deliveries) }, 6)
	if err != nil {
		return nil, err
	}
	deadLetters := []map[string]any{}
	for _, m := range dead {
		one := seen(m)
		one["first_msg_id"] = m.MsgId == firstIds[string(m.Body)]
		one["retry_topic"] = m.GetProperty(primitive.PropertyRetryTopic)
		deadLetters = append(deadLetters, one)
	}
	mu.Lock()
	defer mu.Unlock()
	sort.SliceStable(deliveries, func(i, j int) bool {
		a, b := deliveries[i], deliveries[j]
		if a["body"] != b["body"] {
			return a["body"].(string) < b["body"].(string)
		}
		return a["reconsume_times"].(int32) < b["reconsume_times"].(int32)
	})
	return map[string]any{"deliveries": deliveries, "dead_letters": byBody(deadLetters)}, nil
}

// The orderly consumer example (examples/consumer/orderly), as RmqClassicJava's orderly scenario:
// two orders of four steps each, sent in order to one queue each (a hash queue selector over the
// order's sharding key); an orderly push consumer of a group that redelivers at most once
// suspends its queue a moment on "order 0 step 1" once and on "order 1 step 3" always. What it
// was handed, by order, and the group's dead letters.
func (s scenarios) orderly() (map[string]any, error) {
	topic, group := s.prefix+"-orderly", s.prefix+"-orderly-consumer"
	p, err := s.producer(producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		return nil, err
	}
	queues := map[string]int{} // the queue of each order
	for order := 0; order < 2; order++ {
		for step := 0; step < 4; step++ {
			key := fmt.Sprintf("o-%d", order)
			msg := message(topic, "TagA", key, fmt.Sprintf("order %d step %d", order, step), step)
			msg.WithShardingKey(key)
			res, err := p.SendSync(context.Background(), msg)
			if err != nil {
				_ = p.Shutdown()
				return nil, fmt.Errorf("send %s step %d: %w", key, step, err)
			}
			queues[fmt.Sprintf("%s %d", key, res.MessageQueue.QueueId)] = order
		}
	}
	if err = p.Shutdown(); err != nil {
		return nil, fmt.Errorf("shutdown producer: %w", err)
	}
	var mu sync.Mutex
	byOrder := map[string][]any{}
	handed := 0
	c, err := s.pushConsumer(group, topic, 1, true, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			body := string(m.Body)
			byOrder[m.GetKeys()] = append(byOrder[m.GetKeys()], []any{body, m.ReconsumeTimes})
			handed++
			if body == "order 1 step 3" || body == "order 0 step 1" && m.ReconsumeTimes == 0 {
				return consumer.SuspendCurrentQueueAMoment, nil
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return nil, err
	}
	// Order 0's five deliveries, and order 1's: its first three steps, then its last until the
	// client dead-letters it (after its ReconsumeTimes passes the maximum: three deliveries).
	dead, err := s.deadLetters(c, group, func() int { mu.Lock(); defer mu.Unlock(); return handed }, 11)
	if err != nil {
		return nil, err
	}
	deadLetters := []map[string]any{}
	for _, m := range dead {
		one := seen(m)
		one["retry_topic"] = m.GetProperty(primitive.PropertyRetryTopic)
		deadLetters = append(deadLetters, one)
	}
	mu.Lock()
	defer mu.Unlock()
	outcome := map[string]any{"dead_letters": byBody(deadLetters), "one_queue_per_order": len(queues) == 2}
	for key, handed := range byOrder {
		outcome[key] = handed
	}
	return outcome, nil
}

// The pull consumer of examples/consumer/pull/poll, subscribed to every message of topic (a new
// group, from the first offset), polling until enough or the wait is over, then for settle more (at
// least one more poll: anything beyond what was expected shows).
//
// It subscribes rather than assigning the queues as poll_assign does: Assign rebalances at once,
// outside the lock the client's own rebalancing takes (at start, and on the broker's
// NOTIFY_CONSUMER_IDS_CHANGED), and when the two meet, a queue gets two pull loops and its messages
// come twice (seen against both brokers).
func (s scenarios) read(group, topic string, enough func([]*primitive.MessageExt) bool, wait, settle time.Duration) ([]*primitive.MessageExt, error) {
	pullConsumer, err := rocketmq.NewPullConsumer(
		consumer.WithGroupName(group),
		consumer.WithNsResolver(s.resolver()),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return nil, fmt.Errorf("new pull consumer: %w", err)
	}
	selector := consumer.MessageSelector{
		Type:       consumer.TAG,
		Expression: "*",
	}
	if err = pullConsumer.Subscribe(topic, selector); err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if err = pullConsumer.Start(); err != nil {
		return nil, fmt.Errorf("start pull consumer: %w", err)
	}
	defer func() {
		if err := pullConsumer.Shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "shutdown pull consumer: %v\n", err)
		}
	}()
	var got []*primitive.MessageExt
	poll := func() {
		cr, err := pullConsumer.Poll(context.TODO(), time.Second)
		if consumer.IsNoNewMsgError(err) {
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "[poll error] err=%v\n", err)
			time.Sleep(time.Second)
			return
		}
		got = append(got, cr.GetMsgList()...)
		pullConsumer.ACK(context.TODO(), cr, consumer.ConsumeSuccess)
	}
	deadline := time.Now().Add(wait)
	for !enough(got) && time.Now().Before(deadline) {
		poll()
	}
	settled := time.Now().Add(settle)
	for {
		poll()
		if !time.Now().Before(settled) {
			break
		}
	}
	return got, nil
}

// queueId counted from first round a topic of queues queues.
func queueFrom(queueID, first, queues int) int {
	return ((queueID-first)%queues + queues) % queues
}

// What a reader observes of a message, without ids, hosts or times.
func seen(m *primitive.MessageExt) map[string]any {
	return map[string]any{
		"topic":           m.Topic,
		"queue_id":        m.Queue.QueueId,
		"queue_offset":    m.QueueOffset,
		"tags":            m.GetTags(),
		"keys":            m.GetKeys(),
		"body":            string(m.Body),
		"properties":      userProperties(m),
		"reconsume_times": m.ReconsumeTimes,
		"flag":            m.Flag,
	}
}

// A message's properties but the system ones.
func userProperties(m *primitive.MessageExt) map[string]string {
	user := map[string]string{}
	for key, value := range m.GetProperties() {
		if !systemProperties[key] {
			user[key] = value
		}
	}
	return user
}

func byBody(seen []map[string]any) []map[string]any {
	sorted := append([]map[string]any{}, seen...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i]["body"].(string) < sorted[j]["body"].(string) })
	return sorted
}

func bodies(messages []*primitive.MessageExt) map[string]bool {
	found := map[string]bool{}
	for _, m := range messages {
		found[string(m.Body)] = true
	}
	return found
}

func sortedKeys(set map[string]bool) []string {
	keys := []string{}
	for key := range set {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// Whether the ids a sender was given are those its reader saw.
func sameIds(sent, read []string) bool {
	a, b := map[string]bool{}, map[string]bool{}
	for _, id := range sent {
		a[id] = true
	}
	for _, id := range read {
		b[id] = true
	}
	if len(a) != len(b) {
		return false
	}
	for id := range a {
		if !b[id] {
			return false
		}
	}
	return true
}

// The client's names for a send's status and a local transaction's state.
func sendStatus(status primitive.SendStatus) string {
	switch status {
	case primitive.SendOK:
		return "SendOK"
	case primitive.SendFlushDiskTimeout:
		return "SendFlushDiskTimeout"
	case primitive.SendFlushSlaveTimeout:
		return "SendFlushSlaveTimeout"
	case primitive.SendSlaveNotAvailable:
		return "SendSlaveNotAvailable"
	default:
		return "SendUnknownError"
	}
}

func transactionState(state primitive.LocalTransactionState) string {
	switch state {
	case primitive.CommitMessageState:
		return "CommitMessageState"
	case primitive.RollbackMessageState:
		return "RollbackMessageState"
	case primitive.UnkonwnState:
		return "UnkonwnState"
	default:
		return strconv.Itoa(int(state))
	}
}

func printJSON(value any) {
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false) // names such as "<checks>" as they are
	if err := out.Encode(value); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
