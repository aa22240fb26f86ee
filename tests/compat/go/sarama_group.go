package main

// Sarama's ConsumerGroup: members that record and mark what they consume, the group
// scenarios (a second member joins, a later one resumes), and commits that outlive a
// broker restart.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

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
	limit    int // stop taking records after this many (0: no limit)
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
		if member.limit > 0 && len(member.values) >= member.limit {
			member.mu.Unlock()
			return nil // neither recorded nor marked: the next member gets it
		}
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

func startMember(ctx context.Context, bootstrap, groupID, topic, strategy string, limit int) (*runningMember, error) {
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
	member := &runningMember{&groupMember{limit: limit}, group, cancel, make(chan error, 1)}
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
		first, err := startMember(ctx, bootstrap, groupID, topic, strategy, 0)
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
		second, err := startMember(ctx, bootstrap, groupID, topic, strategy, 0)
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
		third, err := startMember(ctx, bootstrap, groupID, topic, strategy, 0)
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
		committed, err := saramaCommitted(bootstrap, groupID, topic, 4)
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

func saramaCommitted(bootstrap, groupID, topic string, partitions int32) (int64, error) {
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	all := make([]int32, partitions)
	for partition := range partitions {
		all[partition] = partition
	}
	response, err := admin.ListConsumerGroupOffsets(groupID, map[string][]int32{topic: all})
	if err != nil {
		return 0, err
	}
	var total int64
	for _, block := range response.Blocks[topic] {
		total += max(block.Offset, 0)
	}
	return total, nil
}

// saramaRestartBefore, then a broker restart, then saramaRestartAfter: 500 records acked by
// all, 200 consumed and committed by a group member; after the restart every record
// is there and a new member resumes from the commits.
func saramaRestartBefore(ctx context.Context, bootstrap string) (outcome, error) {
	if err := saramaCreateTopic(bootstrap, "sarama-durable", 2); err != nil {
		return nil, err
	}
	if err := saramaProduceValues(bootstrap, "sarama-durable", "d", 500, 2); err != nil {
		return nil, err
	}
	member, err := startMember(ctx, bootstrap, "sarama-durable", "sarama-durable", "range", 200)
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, "200 records", func() (bool, error) {
		values, _ := member.snapshot()
		return len(values) >= 200, nil
	})
	if err != nil {
		return nil, err
	}
	if err := member.stop(); err != nil {
		return nil, err
	}
	consumed, _ := member.snapshot()
	return outcome{"consumed": consumed}, nil
}

func saramaRestartAfter(ctx context.Context, bootstrap string) (outcome, error) {
	received, err := saramaReadAll(ctx, bootstrap, "sarama-durable", 2)
	if err != nil {
		return nil, err
	}
	readBack := make([]string, 0, len(received))
	for _, record := range received {
		readBack = append(readBack, record.Value)
	}
	committed, err := saramaCommitted(bootstrap, "sarama-durable", "sarama-durable", 2)
	if err != nil {
		return nil, err
	}
	member, err := startMember(ctx, bootstrap, "sarama-durable", "sarama-durable", "range", 0)
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, "the records after the commits", func() (bool, error) {
		values, _ := member.snapshot()
		return int64(len(values)) >= 500-committed, nil
	})
	if err != nil {
		return nil, err
	}
	if err := member.stop(); err != nil {
		return nil, err
	}
	resumed, _ := member.snapshot()
	sort.Strings(readBack)
	sort.Strings(resumed)
	return outcome{"read_back": readBack, "committed": committed, "resumed": resumed}, nil
}
