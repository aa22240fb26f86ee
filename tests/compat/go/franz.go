package main

// twmb/franz-go over SASL_SSL with SCRAM (issue 20): its own pkg/kgo suite covers the rest
// of franz-go (test_go_clients.py runs it), but that suite's SCRAM tests dial without TLS and
// only ping, so this scenario produces, consumes in a group and commits as an application
// would, then logs in with a wrong password.
//
// The listener's settings come from the environment, as kgo's own tests take theirs:
//
//	STROM_GO_SCRAM   MECHANISM:USER:PASSWORD (SCRAM-SHA-256 or SCRAM-SHA-512)
//	STROM_GO_TLS_CA  the CA certificate (PEM) the broker's certificate is issued by

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const franzRecords = 5

func franzGoScenarios() map[string]scenario {
	return map[string]scenario{"sasl-ssl-scram": franzSaslSslScram}
}

// franzSecurity is the TLS configuration and the SCRAM mechanism the environment names;
// wrongPassword swaps the password for one the broker does not know.
func franzSecurity(wrongPassword bool) ([]kgo.Opt, error) {
	parts := strings.SplitN(os.Getenv("STROM_GO_SCRAM"), ":", 3)
	if len(parts) != 3 {
		return nil, errors.New("STROM_GO_SCRAM must be MECHANISM:USER:PASSWORD")
	}
	auth := scram.Auth{User: parts[1], Pass: parts[2]}
	if wrongPassword {
		auth.Pass = "not-" + auth.Pass
	}
	var mechanism sasl.Mechanism
	switch parts[0] {
	case "SCRAM-SHA-256":
		mechanism = auth.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		mechanism = auth.AsSha512Mechanism()
	default:
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", parts[0])
	}
	ca, err := os.ReadFile(os.Getenv("STROM_GO_TLS_CA"))
	if err != nil {
		return nil, fmt.Errorf("STROM_GO_TLS_CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("STROM_GO_TLS_CA holds no PEM certificate")
	}
	return []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}), kgo.SASL(mechanism)}, nil
}

func franzSaslSslScram(ctx context.Context, bootstrap string) (outcome, error) {
	security, err := franzSecurity(false)
	if err != nil {
		return nil, err
	}
	// One topic and group per mechanism: the test runs both against one broker.
	topic := "franz-" + strings.ToLower(strings.SplitN(os.Getenv("STROM_GO_SCRAM"), ":", 2)[0])
	group := topic + "-group"
	result := outcome{}
	offsets, err := franzProduce(ctx, bootstrap, topic, security)
	if err != nil {
		return nil, err
	}
	result["offsets"] = offsets
	values, committed, err := franzConsumeAndCommit(ctx, bootstrap, topic, group, security)
	if err != nil {
		return nil, err
	}
	result["values"], result["committed"] = values, committed
	result["wrong_password_error"], err = franzWrongPassword(ctx, bootstrap)
	return result, err
}

func franzProduce(ctx context.Context, bootstrap, topic string, security []kgo.Opt) ([]int64, error) {
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.AllowAutoTopicCreation()}, security...)...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	records := make([]*kgo.Record, franzRecords)
	for i := range records {
		records[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "record-%d", i)}
	}
	produced := client.ProduceSync(ctx, records...)
	if err := produced.FirstErr(); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	offsets := make([]int64, 0, franzRecords)
	for _, record := range produced {
		offsets = append(offsets, record.Record.Offset)
	}
	return offsets, nil
}

// franzConsumeAndCommit reads the topic in a group, commits, and reads the commit back with
// OffsetFetch (franz-go's kadm is a module of its own; kmsg is already here).
func franzConsumeAndCommit(ctx context.Context, bootstrap, topic, group string, security []kgo.Opt) ([]string, int64, error) {
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		security...)...)
	if err != nil {
		return nil, 0, err
	}
	defer client.Close()
	var values []string
	for len(values) < franzRecords {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			return nil, 0, fmt.Errorf("poll (%d records so far): %w", len(values), err)
		}
		fetches.EachRecord(func(record *kgo.Record) { values = append(values, string(record.Value)) })
	}
	if err := client.CommitUncommittedOffsets(ctx); err != nil {
		return nil, 0, fmt.Errorf("commit: %w", err)
	}
	request := kmsg.NewPtrOffsetFetchRequest()
	request.Group = group
	fetchTopic := kmsg.NewOffsetFetchRequestTopic()
	fetchTopic.Topic, fetchTopic.Partitions = topic, []int32{0}
	request.Topics = append(request.Topics, fetchTopic)
	response, err := request.RequestWith(ctx, client)
	if err != nil {
		return nil, 0, fmt.Errorf("offset fetch: %w", err)
	}
	if err := kerr.ErrorForCode(response.ErrorCode); err != nil {
		return nil, 0, fmt.Errorf("offset fetch: %w", err)
	}
	if len(response.Topics) != 1 || len(response.Topics[0].Partitions) != 1 {
		return nil, 0, fmt.Errorf("offset fetch answered %d topics", len(response.Topics))
	}
	return values, response.Topics[0].Partitions[0].Offset, nil
}

// franzWrongPassword is the Kafka error the broker's refusal carries, by name, as franz-go
// hands it to the application (from a metadata request, the first it sends).
func franzWrongPassword(ctx context.Context, bootstrap string) (string, error) {
	security, err := franzSecurity(true)
	if err != nil {
		return "", err
	}
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.RequestRetries(0)}, security...)...)
	if err != nil {
		return "", err
	}
	defer client.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	var refused *kerr.Error
	if errors.As(err, &refused) {
		return refused.Message, nil
	}
	return fmt.Sprintf("not a Kafka error: %v", err), nil
}
