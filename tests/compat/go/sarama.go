package main

// IBM/sarama, configured as an application on Kafka 3.9 would configure it: the protocol
// version pinned to 3.9 (Sarama picks request versions from it), an idempotent producer
// for the codec runs, ConsumerGroup with each of its balance strategies.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func saramaScenarios() map[string]scenario {
	table := map[string]scenario{
		"headers":         saramaHeaders,
		"offsets-by-time": saramaOffsetsByTime,
		"admin":           saramaAdmin,
	}
	for _, codec := range codecs {
		table["produce-"+codec] = saramaProduce(codec)
	}
	for _, strategy := range []string{"range", "roundrobin", "cooperative-sticky"} {
		table["group-"+strategy] = saramaGroup(strategy)
	}
	return table
}

// STROM_GO_DEBUG=1 sends Sarama's own log to stderr, to see where a scenario waits.
func init() {
	if os.Getenv("STROM_GO_DEBUG") == "1" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
}

func saramaConfig() *sarama.Config {
	config := sarama.NewConfig()
	config.Version = sarama.V3_9_0_0
	config.ClientID = "strom-go-compat"
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Consumer.Return.Errors = true
	return config
}

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

// saramaErrorCode is the Kafka error code inside err (Sarama's KError), 0 for none, -1 for
// an error that carries no code.
func saramaErrorCode(err error) int {
	if err == nil {
		return 0
	}
	var code sarama.KError
	if errors.As(err, &code) {
		return int(code)
	}
	return -1
}

func saramaCreateTopic(bootstrap, topic string, partitions int32) error {
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	defer admin.Close()
	return admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

// saramaProduce sends 2000 keyed records through the idempotent async producer with one
// codec, then reads both partitions back from the beginning to their high watermarks.
func saramaProduce(codec string) scenario {
	return func(ctx context.Context, bootstrap string) (outcome, error) {
		topic := "sarama-" + codec
		if err := saramaCreateTopic(bootstrap, topic, 2); err != nil {
			return nil, err
		}
		config := saramaConfig()
		config.Producer.Compression = saramaCodecs[codec]
		config.Producer.Idempotent = true
		config.Net.MaxOpenRequests = 1
		config.Producer.Flush.Frequency = 5 * time.Millisecond
		producer, err := sarama.NewAsyncProducer([]string{bootstrap}, config)
		if err != nil {
			return nil, err
		}
		sent := keyedRecords(2000)
		go func() {
			for key, value := range sent {
				producer.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)}
			}
		}()
		var failures []string
		for range sent {
			select {
			case <-producer.Successes():
			case failure := <-producer.Errors():
				failures = append(failures, failure.Err.Error())
			case <-ctx.Done():
				return nil, fmt.Errorf("producing: %w", ctx.Err())
			}
		}
		if err := producer.Close(); err != nil {
			return nil, err
		}
		received, err := saramaReadAll(ctx, bootstrap, topic, 2)
		if err != nil {
			return nil, err
		}
		result := summariseProduce(sent, received)
		result["failures"] = failures
		return result, nil
	}
}

// saramaReadAll reads every partition of topic from its first offset to its high watermark.
func saramaReadAll(ctx context.Context, bootstrap, topic string, partitions int32) ([]readBack, error) {
	client, err := sarama.NewClient([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var received []readBack
	for partition := range partitions {
		messages, err := saramaReadPartition(ctx, client, consumer, topic, partition, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		for _, message := range messages {
			received = append(received, readBack{message.Partition, message.Offset, string(message.Key), string(message.Value)})
		}
	}
	return received, nil
}

func saramaReadPartition(
	ctx context.Context, client sarama.Client, consumer sarama.Consumer, topic string, partition int32, from int64,
) ([]*sarama.ConsumerMessage, error) {
	highWatermark, err := client.GetOffset(topic, partition, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	reader, err := consumer.ConsumePartition(topic, partition, from)
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	var messages []*sarama.ConsumerMessage
	for len(messages) == 0 || messages[len(messages)-1].Offset < highWatermark-1 {
		if from == sarama.OffsetOldest && highWatermark == 0 {
			break
		}
		select {
		case message := <-reader.Messages():
			messages = append(messages, message)
		case failure := <-reader.Errors():
			return nil, failure
		case <-ctx.Done():
			return nil, fmt.Errorf("reading %s/%d: %d records, high watermark %d: %w", topic, partition, len(messages), highWatermark, ctx.Err())
		}
	}
	return messages, nil
}

type headerSeen struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

type recordSeen struct {
	Key     *string      `json:"key"`
	Value   *string      `json:"value"`
	Headers []headerSeen `json:"headers"`
}

// saramaHeaders: a tombstone, a keyless record and repeated headers with a null value, as
// test_clients.py::test_headers_null_keys_and_null_values sends them.
func saramaHeaders(ctx context.Context, bootstrap string) (outcome, error) {
	if err := saramaCreateTopic(bootstrap, "sarama-edge", 1); err != nil {
		return nil, err
	}
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	messages := []*sarama.ProducerMessage{
		{Topic: "sarama-edge", Key: sarama.StringEncoder("tombstone")},
		{Topic: "sarama-edge", Value: sarama.StringEncoder("no key")},
		{Topic: "sarama-edge", Value: sarama.StringEncoder("headers"), Headers: []sarama.RecordHeader{
			{Key: []byte("h1"), Value: []byte("v1")}, {Key: []byte("h2")}, {Key: []byte("h1"), Value: []byte("again")},
		}},
	}
	if err := producer.SendMessages(messages); err != nil {
		return nil, err
	}
	if err := producer.Close(); err != nil {
		return nil, err
	}
	client, err := sarama.NewClient([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	read, err := saramaReadPartition(ctx, client, consumer, "sarama-edge", 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	records := make([]recordSeen, 0, len(read))
	for _, message := range read {
		headers := make([]headerSeen, 0, len(message.Headers))
		for _, header := range message.Headers {
			headers = append(headers, headerSeen{string(header.Key), optional(header.Value)})
		}
		records = append(records, recordSeen{optional(message.Key), optional(message.Value), headers})
	}
	return outcome{"records": records}, nil
}

// saramaOffsetsByTime: ten records one second apart; ListOffsets by time finds the first
// at or after a timestamp, -1 past the last; consuming from the found offset starts there.
func saramaOffsetsByTime(ctx context.Context, bootstrap string) (outcome, error) {
	if err := saramaCreateTopic(bootstrap, "sarama-timed", 1); err != nil {
		return nil, err
	}
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	for i := range 10 {
		message := &sarama.ProducerMessage{
			Topic: "sarama-timed", Value: sarama.StringEncoder(fmt.Sprint(i)), Timestamp: time.UnixMilli(timedBase + int64(i)*1000),
		}
		if _, _, err := producer.SendMessage(message); err != nil {
			return nil, err
		}
	}
	if err := producer.Close(); err != nil {
		return nil, err
	}
	client, err := sarama.NewClient([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	offsets := map[string]int64{}
	queries := map[string]int64{
		"earliest": sarama.OffsetOldest, "latest": sarama.OffsetNewest, "at_4500": timedBase + 4500, "after_last": timedBase + 60_000,
	}
	for name, query := range queries {
		if offsets[name], err = client.GetOffset("sarama-timed", 0, query); err != nil {
			return nil, err
		}
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	fromFound, err := saramaReadPartition(ctx, client, consumer, "sarama-timed", 0, offsets["at_4500"])
	if err != nil {
		return nil, err
	}
	first := fromFound[0]
	return outcome{"offsets": offsets, "first_value": string(first.Value), "first_timestamp": first.Timestamp.UnixMilli()}, nil
}

// saramaAdmin: validate-only, create with a config, the errors for a duplicate and for a
// replication factor above the broker count, delete, and deleting what is not there.
func saramaAdmin(ctx context.Context, bootstrap string) (outcome, error) {
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	result := outcome{}
	if err := admin.CreateTopic("dry", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, true); err != nil {
		return nil, fmt.Errorf("validate-only: %w", err)
	}
	retention := "3600000"
	detail := &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention}}
	if err := admin.CreateTopic("orders", detail, false); err != nil {
		return nil, err
	}
	topics, err := admin.ListTopics()
	if err != nil {
		return nil, err
	}
	_, result["dry_listed"] = topics["dry"]
	result["orders_partitions"] = topics["orders"].NumPartitions
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "orders", ConfigNames: []string{"retention.ms"}})
	if err != nil {
		return nil, err
	}
	for _, entry := range entries {
		result["orders_retention_ms"] = entry.Value
	}
	result["duplicate_error"] = saramaErrorCode(admin.CreateTopic("orders", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false))
	result["replication_error"] = saramaErrorCode(admin.CreateTopic("replicated", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 3}, false))
	if err := admin.DeleteTopic("orders"); err != nil {
		return nil, err
	}
	err = waitFor(ctx, "orders to leave the topic list", func() (bool, error) {
		topics, err := admin.ListTopics()
		_, listed := topics["orders"]
		return !listed, err
	})
	if err != nil {
		return nil, err
	}
	result["deleted"] = true
	result["delete_missing_error"] = saramaErrorCode(admin.DeleteTopic("missing"))
	return result, nil
}

// groupMember is one ConsumerGroup member: it records every value it is handed and marks
// it consumed, as a Sarama application does; Sarama's auto-commit sends the marks, and
// commits them before a partition is released (rebalance, leaving), so the next holder
// resumes exactly after the last value recorded. It counts the claims it is
// consuming: with a cooperative strategy Setup runs once, not per rebalance, so the
// running ConsumeClaim calls are what tells which partitions a member holds.
type groupMember struct {
	mu       sync.Mutex
	values   []string
	assigned int
}

func (member *groupMember) Setup(sarama.ConsumerGroupSession) error { return nil }

func (member *groupMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (member *groupMember) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	member.mu.Lock()
	member.assigned++
	member.mu.Unlock()
	defer func() {
		member.mu.Lock()
		member.assigned--
		member.mu.Unlock()
	}()
	for message := range claim.Messages() {
		member.mu.Lock()
		member.values = append(member.values, string(message.Value))
		member.mu.Unlock()
		session.MarkMessage(message, "")
	}
	return nil
}

func (member *groupMember) snapshot() ([]string, int) {
	member.mu.Lock()
	defer member.mu.Unlock()
	return append([]string(nil), member.values...), member.assigned
}

// runningMember is a member consuming in the background until stop.
type runningMember struct {
	*groupMember
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan error
}

func startMember(ctx context.Context, bootstrap, groupID, topic, strategy string) (*runningMember, error) {
	config := saramaConfig()
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	config.Consumer.Group.Session.Timeout = 6 * time.Second
	config.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	balance := map[string]sarama.BalanceStrategy{
		"range": sarama.NewBalanceStrategyRange(), "roundrobin": sarama.NewBalanceStrategyRoundRobin(),
		"cooperative-sticky": sarama.NewBalanceStrategyCooperativeSticky(),
	}[strategy]
	config.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{balance}
	group, err := sarama.NewConsumerGroup([]string{bootstrap}, groupID, config)
	if err != nil {
		return nil, err
	}
	memberCtx, cancel := context.WithCancel(ctx)
	member := &runningMember{&groupMember{}, group, cancel, make(chan error, 1)}
	go func() {
		for memberCtx.Err() == nil {
			if err := group.Consume(memberCtx, []string{topic}, member.groupMember); err != nil {
				member.done <- err
				return
			}
		}
		member.done <- nil
	}()
	return member, nil
}

func (member *runningMember) stop() error {
	member.cancel()
	if err := <-member.done; err != nil {
		return err
	}
	return member.group.Close()
}

func saramaProduceValues(bootstrap, topic string, prefix string, count, partitions int) error {
	config := saramaConfig()
	config.Producer.Partitioner = sarama.NewManualPartitioner
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, config)
	if err != nil {
		return err
	}
	messages := make([]*sarama.ProducerMessage, count)
	for i := range count {
		messages[i] = &sarama.ProducerMessage{Topic: topic, Partition: int32(i % partitions), Value: sarama.StringEncoder(fmt.Sprintf("%s%d", prefix, i))}
	}
	if err := producer.SendMessages(messages); err != nil {
		return err
	}
	return producer.Close()
}

// saramaGroup: member A consumes 40 records and commits each; member B joins (a rebalance
// with the named strategy) and both consume 40 more; both leave; after 20 more, a new
// member C must resume from the commits: exactly the 20 new records.
func saramaGroup(strategy string) scenario {
	return func(ctx context.Context, bootstrap string) (outcome, error) {
		topic, groupID := "sarama-group-"+strategy, "sarama-"+strategy
		if err := saramaCreateTopic(bootstrap, topic, 4); err != nil {
			return nil, err
		}
		if err := saramaProduceValues(bootstrap, topic, "a", 40, 4); err != nil {
			return nil, err
		}
		first, err := startMember(ctx, bootstrap, groupID, topic, strategy)
		if err != nil {
			return nil, err
		}
		seen := func(members ...*runningMember) []string {
			var all []string
			for _, member := range members {
				values, _ := member.snapshot()
				all = append(all, values...)
			}
			return all
		}
		if err := waitFor(ctx, "member A to read 40 records", func() (bool, error) { return len(seen(first)) >= 40, nil }); err != nil {
			return nil, err
		}
		second, err := startMember(ctx, bootstrap, groupID, topic, strategy)
		if err != nil {
			return nil, err
		}
		err = waitFor(ctx, "both members to hold partitions", func() (bool, error) {
			_, firstAssigned := first.snapshot()
			_, secondAssigned := second.snapshot()
			return firstAssigned > 0 && secondAssigned > 0 && firstAssigned+secondAssigned == 4, nil
		})
		if err != nil {
			return nil, err
		}
		if err := saramaProduceValues(bootstrap, topic, "b", 40, 4); err != nil {
			return nil, err
		}
		if err := waitFor(ctx, "80 records across both members", func() (bool, error) { return len(seen(first, second)) >= 80, nil }); err != nil {
			return nil, err
		}
		secondValues, _ := second.snapshot()
		before := seen(first, second)
		for _, member := range []*runningMember{first, second} {
			if err := member.stop(); err != nil {
				return nil, err
			}
		}
		if err := saramaProduceValues(bootstrap, topic, "c", 20, 4); err != nil {
			return nil, err
		}
		third, err := startMember(ctx, bootstrap, groupID, topic, strategy)
		if err != nil {
			return nil, err
		}
		if err := waitFor(ctx, "member C to read 20 records", func() (bool, error) { return len(seen(third)) >= 20, nil }); err != nil {
			return nil, err
		}
		resumed := seen(third)
		if err := third.stop(); err != nil {
			return nil, err
		}
		committed, err := saramaCommitted(bootstrap, groupID, topic)
		if err != nil {
			return nil, err
		}
		sort.Strings(before)
		sort.Strings(resumed)
		return outcome{
			"before_restart": before, "second_member_read": len(secondValues), "resumed": resumed, "committed": committed,
		}, nil
	}
}

func saramaCommitted(bootstrap, groupID, topic string) (int64, error) {
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	response, err := admin.ListConsumerGroupOffsets(groupID, map[string][]int32{topic: {0, 1, 2, 3}})
	if err != nil {
		return 0, err
	}
	var total int64
	for _, block := range response.Blocks[topic] {
		total += max(block.Offset, 0)
	}
	return total, nil
}
