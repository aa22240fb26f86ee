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
	"time"

	"github.com/IBM/sarama"
)

func saramaScenarios() map[string]scenario {
	table := map[string]scenario{
		"headers":         saramaHeaders,
		"offsets-by-time": saramaOffsetsByTime,
		"admin":           saramaAdmin,
		"large-message":   saramaLargeMessage,
		"restart-before":  saramaRestartBefore,
		"restart-after":   saramaRestartAfter,
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
	return saramaCreateTopicWith(bootstrap, topic, partitions, nil)
}

func saramaCreateTopicWith(bootstrap, topic string, partitions int32, configs map[string]*string) error {
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
	if err != nil {
		return err
	}
	defer admin.Close()
	detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs}
	return admin.CreateTopic(topic, detail, false)
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

// saramaLargeMessage: one 5 MiB record to a topic whose max.message.bytes is raised to
// 6 MiB, with the producer's and the consumer's limits raised to match.
func saramaLargeMessage(ctx context.Context, bootstrap string) (outcome, error) {
	limit := fmt.Sprint(largeTopicLimit)
	if err := saramaCreateTopicWith(bootstrap, "sarama-big", 1, map[string]*string{"max.message.bytes": &limit}); err != nil {
		return nil, err
	}
	config := saramaConfig()
	config.Producer.MaxMessageBytes = largeTopicLimit + 1024
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, config)
	if err != nil {
		return nil, err
	}
	value := largeValue()
	if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "sarama-big", Value: sarama.ByteEncoder(value)}); err != nil {
		return nil, err
	}
	if err := producer.Close(); err != nil {
		return nil, err
	}
	consumerConfig := saramaConfig()
	consumerConfig.Consumer.Fetch.Default = 2 * largeTopicLimit
	client, err := sarama.NewClient([]string{bootstrap}, consumerConfig)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	read, err := saramaReadPartition(ctx, client, consumer, "sarama-big", 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	return compareLarge(value, read[0].Value, len(read)), nil
}
