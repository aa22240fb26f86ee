// Command strom-go-compat drives a Kafka-compatible broker through Go's two most used
// client libraries besides franz-go, IBM/sarama and segmentio/kafka-go, one named scenario
// per run, the way an application would use them; and franz-go over SASL_SSL (franz.go),
// which its own kgo suite, run by the tests too, does not cover.
//
//	strom-go-compat <client> <scenario> <bootstrap>
//
// A scenario prints one line of JSON with what the client observed (records read back,
// error codes, offsets); the pytest wrapper tests/compat/test_go_clients.py asserts on it,
// so what "correct" means lives beside the Python scenarios it mirrors. A scenario that
// cannot run to its end prints one line to stderr and exits 1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"
)

// outcome is what a scenario observed, printed as JSON.
type outcome map[string]any

type scenario func(ctx context.Context, bootstrap string) (outcome, error)

// codecs are the five compression types Kafka defines, by their Kafka names.
var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// scenarioTimeout bounds one scenario; the pytest wrapper's own timeout is longer, so a
// stuck client is reported here, with what it was doing, rather than killed silently.
const scenarioTimeout = 90 * time.Second

func scenarios() map[string]map[string]scenario {
	all := map[string]map[string]scenario{"sarama": saramaScenarios(), "kafka-go": kafkaGoScenarios()}
	for _, table := range all {
		for _, codec := range codecs {
			if _, ok := table["produce-"+codec]; !ok {
				panic("missing produce scenario for " + codec)
			}
		}
	}
	all["franz-go"] = franzGoScenarios() // SASL_SSL only: franz-go's own kgo suite covers the rest
	return all
}

func main() {
	all := scenarios()
	if len(os.Args) == 2 && os.Args[1] == "list" {
		for _, client := range sortedKeys(all) {
			for _, name := range sortedKeys(all[client]) {
				fmt.Printf("%s %s\n", client, name)
			}
		}
		return
	}
	if len(os.Args) != 4 {
		fail("usage: strom-go-compat <client> <scenario> <bootstrap> | strom-go-compat list")
	}
	client, name, bootstrap := os.Args[1], os.Args[2], os.Args[3]
	table, ok := all[client]
	if !ok {
		fail(fmt.Sprintf("unknown client %q (known: %s)", client, strings.Join(sortedKeys(all), ", ")))
	}
	run, ok := table[name]
	if !ok {
		fail(fmt.Sprintf("unknown scenario %q for %s (known: %s)", name, client, strings.Join(sortedKeys(table), ", ")))
	}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	result, err := run(ctx, bootstrap)
	if err != nil {
		fail(fmt.Sprintf("%s %s: %v", client, name, err))
	}
	result["client"], result["scenario"] = client, name
	line, err := json.Marshal(result)
	if err != nil {
		fail(err.Error())
	}
	fmt.Println(string(line))
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, strings.ReplaceAll(message, "\n", " "))
	os.Exit(1)
}

func sortedKeys[V any](table map[string]V) []string {
	keys := make([]string, 0, len(table))
	for key := range table {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// keyedRecords are the records the produce scenarios send: distinct keys, values of many
// sizes (so some batches compress well and some do not), as test_clients.py sends them.
func keyedRecords(count int) map[string]string {
	records := make(map[string]string, count)
	for i := range count {
		records[fmt.Sprintf("key-%d", i)] = strings.Repeat(fmt.Sprintf("value %d ", i), i%50+1)
	}
	return records
}

// readBack is one record as read back, with its position.
type readBack struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

// summariseProduce compares what was read back with what was sent: every record once, with
// its value, and each partition's offsets contiguous from 0 (nothing lost, nothing twice).
func summariseProduce(sent map[string]string, received []readBack) outcome {
	matching := 0
	byPartition := map[int32][]int64{}
	for _, record := range received {
		if value, ok := sent[record.Key]; ok && value == record.Value {
			matching++
		}
		byPartition[record.Partition] = append(byPartition[record.Partition], record.Offset)
	}
	contiguous := true
	counts := map[string]int{}
	for partition, offsets := range byPartition {
		sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
		for index, offset := range offsets {
			contiguous = contiguous && offset == int64(index)
		}
		counts[fmt.Sprint(partition)] = len(offsets)
	}
	return outcome{
		"sent": len(sent), "received": len(received), "matching": matching,
		"contiguous": contiguous, "per_partition": counts,
	}
}

// optional renders bytes that may be null (a key, a value, a header value) for JSON: null
// stays null, so a tombstone and an empty value stay different.
func optional(raw []byte) *string {
	if raw == nil {
		return nil
	}
	text := string(raw)
	return &text
}

// waitFor polls check until it answers true or ctx ends; for states a broker reaches
// asynchronously (a deleted topic leaving the metadata).
func waitFor(ctx context.Context, what string, check func() (bool, error)) error {
	for {
		done, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// timedBase is the first record timestamp of the offsets-by-time scenarios (2023-11-14).
const timedBase = int64(1_700_000_000_000)

// largeTopicLimit is the raised max.message.bytes of the large-message scenarios (6 MiB),
// above the 5 MiB record they send.
const largeTopicLimit = 6 << 20

// largeValue is 5 MiB of seeded pseudo-random bytes: they do not compress, so the record
// really crosses the broker at that size.
func largeValue() []byte {
	random := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 5<<20)
	for index := range value {
		value[index] = byte(random.Uint32())
	}
	return value
}

func compareLarge(sent, received []byte, records int) outcome {
	return outcome{"records": records, "sent_bytes": len(sent), "received_bytes": len(received), "same": bytes.Equal(sent, received)}
}
