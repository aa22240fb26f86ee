package main

// segmentio/kafka-go: its Writer, its Reader (one partition, or a consumer group through
// GroupID) and its Client for admin requests, used as its README shows.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

func kafkaGoScenarios() map[string]scenario {
	table := map[string]scenario{
		"headers":         kafkaGoHeaders,
		"offsets-by-time": kafkaGoOffsetsByTime,
		"admin":           kafkaGoAdmin,
		"group":           kafkaGoGroup,
		"large-message":   kafkaGoLargeMessage,
		"restart-before":  kafkaGoRestartBefore,
		"restart-after":   kafkaGoRestartAfter,
	}
	for _, codec := range codecs {
		table["produce-"+codec] = kafkaGoProduce(codec)
	}
	return table
}

var kafkaGoCodecs = map[string]kafka.Compression{
	"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
}

func kafkaGoClient(bootstrap string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: 20 * time.Second}
}

// kafkaGoErrorCode is the Kafka error code inside err (kafka-go's Error), 0 for none, -1
// for an error that carries no code.
func kafkaGoErrorCode(err error) int {
	if err == nil {
		return 0
	}
	var code kafka.Error
	if errors.As(err, &code) {
		return int(code)
	}
	return -1
}

func kafkaGoCreate(ctx context.Context, bootstrap string, topics ...kafka.TopicConfig) (map[string]error, error) {
	response, err := kafkaGoClient(bootstrap).CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	return response.Errors, nil
}

func kafkaGoCreateTopic(ctx context.Context, bootstrap, topic string, partitions int) error {
	errs, err := kafkaGoCreate(ctx, bootstrap, kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1})
	if err != nil {
		return err
	}
	return errs[topic]
}

func kafkaGoWriter(bootstrap, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr: kafka.TCP(bootstrap), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, BatchSize: 500,
	}
}

// kafkaGoProduce sends 2000 keyed records with one codec, then reads both partitions back.
func kafkaGoProduce(codec string) scenario {
	return func(ctx context.Context, bootstrap string) (outcome, error) {
		topic := "kafka-go-" + codec
		if err := kafkaGoCreateTopic(ctx, bootstrap, topic, 2); err != nil {
			return nil, err
		}
		writer := kafkaGoWriter(bootstrap, topic)
		writer.Compression = kafkaGoCodecs[codec]
		sent := keyedRecords(2000)
		messages := make([]kafka.Message, 0, len(sent))
		for key, value := range sent {
			messages = append(messages, kafka.Message{Key: []byte(key), Value: []byte(value)})
		}
		if err := writer.WriteMessages(ctx, messages...); err != nil {
			return nil, err
		}
		if err := writer.Close(); err != nil {
			return nil, err
		}
		var received []readBack
		for partition := range 2 {
			read, err := kafkaGoReadPartition(ctx, bootstrap, topic, partition, kafka.FirstOffset)
			if err != nil {
				return nil, err
			}
			for _, message := range read {
				received = append(received, readBack{int32(message.Partition), message.Offset, string(message.Key), string(message.Value)})
			}
		}
		return summariseProduce(sent, received), nil
	}
}

func kafkaGoWatermarks(ctx context.Context, bootstrap, topic string, partition int) (kafka.PartitionOffsets, error) {
	response, err := kafkaGoClient(bootstrap).ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}},
	})
	if err != nil {
		return kafka.PartitionOffsets{}, err
	}
	offsets := response.Topics[topic]
	if len(offsets) != 1 {
		return kafka.PartitionOffsets{}, fmt.Errorf("ListOffsets answered %d partitions for %s/%d", len(offsets), topic, partition)
	}
	return offsets[0], offsets[0].Error
}

// kafkaGoReadPartition reads one partition from offset to its high watermark.
func kafkaGoReadPartition(ctx context.Context, bootstrap, topic string, partition int, from int64) ([]kafka.Message, error) {
	watermarks, err := kafkaGoWatermarks(ctx, bootstrap, topic, partition)
	if err != nil {
		return nil, err
	}
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{bootstrap}, Topic: topic, Partition: partition, MaxBytes: 10 << 20, MaxWait: 500 * time.Millisecond,
	})
	defer reader.Close()
	if err := reader.SetOffset(from); err != nil {
		return nil, err
	}
	var messages []kafka.Message
	for watermarks.LastOffset > 0 && (len(messages) == 0 || messages[len(messages)-1].Offset < watermarks.LastOffset-1) {
		message, err := reader.ReadMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s/%d: %d records, high watermark %d: %w", topic, partition, len(messages), watermarks.LastOffset, err)
		}
		messages = append(messages, message)
	}
	return messages, nil
}

// kafkaGoHeaders: a tombstone, a keyless record, repeated headers with a null value.
func kafkaGoHeaders(ctx context.Context, bootstrap string) (outcome, error) {
	if err := kafkaGoCreateTopic(ctx, bootstrap, "kafka-go-edge", 1); err != nil {
		return nil, err
	}
	writer := kafkaGoWriter(bootstrap, "kafka-go-edge")
	err := writer.WriteMessages(ctx,
		kafka.Message{Key: []byte("tombstone")},
		kafka.Message{Value: []byte("no key")},
		kafka.Message{Value: []byte("headers"), Headers: []kafka.Header{
			{Key: "h1", Value: []byte("v1")}, {Key: "h2"}, {Key: "h1", Value: []byte("again")},
		}},
	)
	if err != nil {
		return nil, err
	}
	if err := writer.Close(); err != nil {
		return nil, err
	}
	read, err := kafkaGoReadPartition(ctx, bootstrap, "kafka-go-edge", 0, kafka.FirstOffset)
	if err != nil {
		return nil, err
	}
	records := make([]recordSeen, 0, len(read))
	for _, message := range read {
		headers := make([]headerSeen, 0, len(message.Headers))
		for _, header := range message.Headers {
			headers = append(headers, headerSeen{header.Key, optional(header.Value)})
		}
		records = append(records, recordSeen{optional(message.Key), optional(message.Value), headers})
	}
	return outcome{"records": records}, nil
}

// kafkaGoOffsetsByTime: ten records one second apart, then ListOffsets by time.
func kafkaGoOffsetsByTime(ctx context.Context, bootstrap string) (outcome, error) {
	if err := kafkaGoCreateTopic(ctx, bootstrap, "kafka-go-timed", 1); err != nil {
		return nil, err
	}
	writer := kafkaGoWriter(bootstrap, "kafka-go-timed")
	messages := make([]kafka.Message, 10)
	for i := range messages {
		messages[i] = kafka.Message{Value: []byte(fmt.Sprint(i)), Time: time.UnixMilli(timedBase + int64(i)*1000)}
	}
	if err := writer.WriteMessages(ctx, messages...); err != nil {
		return nil, err
	}
	if err := writer.Close(); err != nil {
		return nil, err
	}
	watermarks, err := kafkaGoWatermarks(ctx, bootstrap, "kafka-go-timed", 0)
	if err != nil {
		return nil, err
	}
	offsets := map[string]int64{"earliest": watermarks.FirstOffset, "latest": watermarks.LastOffset}
	for name, at := range map[string]int64{"at_4500": timedBase + 4500, "after_last": timedBase + 60_000} {
		response, err := kafkaGoClient(bootstrap).ListOffsets(ctx, &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{"kafka-go-timed": {kafka.TimeOffsetOf(0, time.UnixMilli(at))}},
		})
		if err != nil {
			return nil, err
		}
		found := response.Topics["kafka-go-timed"][0]
		if found.Error != nil || len(found.Offsets) != 1 {
			return nil, fmt.Errorf("ListOffsets by time %d: %v, %d offsets", at, found.Error, len(found.Offsets))
		}
		for offset := range found.Offsets {
			offsets[name] = offset
		}
	}
	fromFound, err := kafkaGoReadPartition(ctx, bootstrap, "kafka-go-timed", 0, offsets["at_4500"])
	if err != nil {
		return nil, err
	}
	first := fromFound[0]
	return outcome{"offsets": offsets, "first_value": string(first.Value), "first_timestamp": first.Time.UnixMilli()}, nil
}

func kafkaGoTopicListed(ctx context.Context, bootstrap, topic string) (int, bool, error) {
	metadata, err := kafkaGoClient(bootstrap).Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return 0, false, err
	}
	for _, listed := range metadata.Topics {
		if listed.Name == topic {
			return len(listed.Partitions), true, nil
		}
	}
	return 0, false, nil
}

// kafkaGoAdmin: validate-only, create with a config, duplicate and replication-factor
// errors, delete, and deleting what is not there.
func kafkaGoAdmin(ctx context.Context, bootstrap string) (outcome, error) {
	client := kafkaGoClient(bootstrap)
	result := outcome{}
	// kafka-go waits after any successful CreateTopics until the topics appear in its
	// metadata, or its context ends, even for validate-only, where they never will (against
	// Kafka as well; FINDINGS.md). A short context bounds the wait; the answer comes first.
	validateCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dry, err := client.CreateTopics(validateCtx, &kafka.CreateTopicsRequest{
		ValidateOnly: true, Topics: []kafka.TopicConfig{{Topic: "dry", NumPartitions: 2, ReplicationFactor: 1}},
	})
	if err != nil || dry.Errors["dry"] != nil {
		return nil, fmt.Errorf("validate-only: %w %w", err, dry.Errors["dry"])
	}
	orders := kafka.TopicConfig{
		Topic: "orders", NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "3600000"}},
	}
	created, err := kafkaGoCreate(ctx, bootstrap, orders)
	if err != nil || created["orders"] != nil {
		return nil, fmt.Errorf("create: %w %w", err, created["orders"])
	}
	if _, result["dry_listed"], err = kafkaGoTopicListed(ctx, bootstrap, "dry"); err != nil {
		return nil, err
	}
	if result["orders_partitions"], _, err = kafkaGoTopicListed(ctx, bootstrap, "orders"); err != nil {
		return nil, err
	}
	described, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: "orders", ConfigNames: []string{"retention.ms"}},
	}})
	if err != nil {
		return nil, err
	}
	for _, resource := range described.Resources {
		for _, entry := range resource.ConfigEntries {
			result["orders_retention_ms"] = entry.ConfigValue
		}
	}
	failed, err := kafkaGoCreate(ctx, bootstrap,
		kafka.TopicConfig{Topic: "orders", NumPartitions: 1, ReplicationFactor: 1},
		kafka.TopicConfig{Topic: "replicated", NumPartitions: 1, ReplicationFactor: 3},
	)
	if err != nil {
		return nil, err
	}
	result["duplicate_error"] = kafkaGoErrorCode(failed["orders"])
	result["replication_error"] = kafkaGoErrorCode(failed["replicated"])
	deleted, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{"orders", "missing"}})
	if err != nil {
		return nil, err
	}
	if deleted.Errors["orders"] != nil {
		return nil, fmt.Errorf("delete: %w", deleted.Errors["orders"])
	}
	result["delete_missing_error"] = kafkaGoErrorCode(deleted.Errors["missing"])
	err = waitFor(ctx, "orders to leave the metadata", func() (bool, error) {
		_, listed, err := kafkaGoTopicListed(ctx, bootstrap, "orders")
		return !listed, err
	})
	if err != nil {
		return nil, err
	}
	result["deleted"] = true
	return result, nil
}

// kafkaGoGroupReader is a Reader in a consumer group that commits every record itself
// (CommitInterval 0: CommitMessages is synchronous).
func kafkaGoGroupReader(bootstrap, groupID, topic string) *kafka.Reader {
	return kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{bootstrap}, GroupID: groupID, Topic: topic, StartOffset: kafka.FirstOffset,
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second,
		MaxWait: 500 * time.Millisecond, GroupBalancers: []kafka.GroupBalancer{kafka.RangeGroupBalancer{}},
	})
}

// consumeInto reads and commits records until ctx ends, appending values under mu.
func consumeInto(ctx context.Context, reader *kafka.Reader, mu *sync.Mutex, values *[]string) error {
	for {
		message, err := reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// Commit before counting: the caller stops the readers once enough are counted,
		// and a record counted must also be committed, or the next reader gets it again.
		if err := reader.CommitMessages(ctx, message); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		*values = append(*values, string(message.Value))
		mu.Unlock()
	}
}

func kafkaGoProduceValues(ctx context.Context, bootstrap, topic, prefix string, count int) error {
	writer := kafkaGoWriter(bootstrap, topic)
	writer.Balancer = &kafka.RoundRobin{}
	messages := make([]kafka.Message, count)
	for i := range messages {
		messages[i] = kafka.Message{Value: []byte(fmt.Sprintf("%s%d", prefix, i))}
	}
	if err := writer.WriteMessages(ctx, messages...); err != nil {
		return err
	}
	return writer.Close()
}

// consumeUntil runs readers in one group until together they have read want records.
func consumeUntil(ctx context.Context, readers []*kafka.Reader, want int) ([]string, error) {
	var mu sync.Mutex
	var values []string
	readCtx, cancel := context.WithCancel(ctx)
	failures := make(chan error, len(readers))
	for _, reader := range readers {
		go func() { failures <- consumeInto(readCtx, reader, &mu, &values) }()
	}
	err := waitFor(ctx, fmt.Sprintf("%d records in the group", want), func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(values) >= want, nil
	})
	cancel()
	for range readers {
		if failure := <-failures; failure != nil && err == nil {
			err = failure
		}
	}
	for _, reader := range readers {
		if closeErr := reader.Close(); closeErr != nil && err == nil {
			err = closeErr
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(values)
	return values, err
}

// kafkaGoGroup: one reader consumes 40 and commits; two readers share 40 more; after they
// leave, a new reader resumes from the commits: exactly the 20 records produced since.
func kafkaGoGroup(ctx context.Context, bootstrap string) (outcome, error) {
	topic, groupID := "kafka-go-group", "kafka-go-range"
	if err := kafkaGoCreateTopic(ctx, bootstrap, topic, 4); err != nil {
		return nil, err
	}
	if err := kafkaGoProduceValues(ctx, bootstrap, topic, "a", 40); err != nil {
		return nil, err
	}
	alone, err := consumeUntil(ctx, []*kafka.Reader{kafkaGoGroupReader(bootstrap, groupID, topic)}, 40)
	if err != nil {
		return nil, err
	}
	if err := kafkaGoProduceValues(ctx, bootstrap, topic, "b", 40); err != nil {
		return nil, err
	}
	pair := []*kafka.Reader{kafkaGoGroupReader(bootstrap, groupID, topic), kafkaGoGroupReader(bootstrap, groupID, topic)}
	shared, err := consumeUntil(ctx, pair, 40)
	if err != nil {
		return nil, err
	}
	if err := kafkaGoProduceValues(ctx, bootstrap, topic, "c", 20); err != nil {
		return nil, err
	}
	resumed, err := consumeUntil(ctx, []*kafka.Reader{kafkaGoGroupReader(bootstrap, groupID, topic)}, 20)
	if err != nil {
		return nil, err
	}
	committed, err := kafkaGoClient(bootstrap).OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: groupID, Topics: map[string][]int{topic: {0, 1, 2, 3}}})
	if err != nil {
		return nil, err
	}
	var total int64
	for _, partition := range committed.Topics[topic] {
		total += max(partition.CommittedOffset, 0)
	}
	return outcome{"before_restart": append(alone, shared...), "resumed": resumed, "committed": total}, nil
}

// kafkaGoLargeMessage: one 5 MiB record to a topic whose max.message.bytes is raised to
// 6 MiB; the Writer's BatchBytes raised to match (the Reader's MaxBytes is 10 MiB).
func kafkaGoLargeMessage(ctx context.Context, bootstrap string) (outcome, error) {
	created, err := kafkaGoCreate(ctx, bootstrap, kafka.TopicConfig{
		Topic: "kafka-go-big", NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: fmt.Sprint(largeTopicLimit)}},
	})
	if err != nil || created["kafka-go-big"] != nil {
		return nil, fmt.Errorf("create: %w %w", err, created["kafka-go-big"])
	}
	writer := kafkaGoWriter(bootstrap, "kafka-go-big")
	writer.BatchBytes = largeTopicLimit + 1024
	value := largeValue()
	if err := writer.WriteMessages(ctx, kafka.Message{Value: value}); err != nil {
		return nil, err
	}
	if err := writer.Close(); err != nil {
		return nil, err
	}
	read, err := kafkaGoReadPartition(ctx, bootstrap, "kafka-go-big", 0, kafka.FirstOffset)
	if err != nil {
		return nil, err
	}
	return compareLarge(value, read[0].Value, len(read)), nil
}

// kafkaGoRestartBefore, then a broker restart, then kafkaGoRestartAfter: 500 records acked
// by all, 200 consumed and committed one by one by a group reader; after the restart every
// record is there and a new reader resumes from the commits.
func kafkaGoRestartBefore(ctx context.Context, bootstrap string) (outcome, error) {
	if err := kafkaGoCreateTopic(ctx, bootstrap, "kafka-go-durable", 2); err != nil {
		return nil, err
	}
	if err := kafkaGoProduceValues(ctx, bootstrap, "kafka-go-durable", "d", 500); err != nil {
		return nil, err
	}
	reader := kafkaGoGroupReader(bootstrap, "kafka-go-durable", "kafka-go-durable")
	consumed := make([]string, 0, 200)
	for len(consumed) < 200 {
		message, err := reader.FetchMessage(ctx)
		if err != nil {
			return nil, err
		}
		if err := reader.CommitMessages(ctx, message); err != nil {
			return nil, err
		}
		consumed = append(consumed, string(message.Value))
	}
	if err := reader.Close(); err != nil {
		return nil, err
	}
	return outcome{"consumed": consumed}, nil
}

func kafkaGoRestartAfter(ctx context.Context, bootstrap string) (outcome, error) {
	var readBack []string
	for partition := range 2 {
		read, err := kafkaGoReadPartition(ctx, bootstrap, "kafka-go-durable", partition, kafka.FirstOffset)
		if err != nil {
			return nil, err
		}
		for _, message := range read {
			readBack = append(readBack, string(message.Value))
		}
	}
	committed, err := kafkaGoClient(bootstrap).OffsetFetch(ctx, &kafka.OffsetFetchRequest{
		GroupID: "kafka-go-durable", Topics: map[string][]int{"kafka-go-durable": {0, 1}},
	})
	if err != nil {
		return nil, err
	}
	var total int64
	for _, partition := range committed.Topics["kafka-go-durable"] {
		total += max(partition.CommittedOffset, 0)
	}
	reader := kafkaGoGroupReader(bootstrap, "kafka-go-durable", "kafka-go-durable")
	resumed, err := consumeUntil(ctx, []*kafka.Reader{reader}, int(500-total))
	if err != nil {
		return nil, err
	}
	sort.Strings(readBack)
	return outcome{"read_back": readBack, "committed": total, "resumed": resumed}, nil
}
