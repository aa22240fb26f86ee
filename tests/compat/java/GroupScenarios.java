import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * The consumer-group scenarios of StromScenarios: cooperative-sticky rebalancing between two
 * members, commit and resume (run twice around a broker restart by the test), and the new
 * consumer protocol (KIP-848), which Strom does not offer.
 */
final class GroupScenarios {
    private GroupScenarios() {
    }

    /** The classic protocol's timeouts the other clients' group tests use. */
    private static Map<String, Object> classicGroup(String group, String clientId) {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        return config;
    }

    /**
     * One member of the cooperative group: it records every non-empty rebalance callback in
     * the shared event list and commits exactly what it consumed from the partitions it gives
     * up, so the member that takes them over neither repeats nor skips a record.
     */
    private static final class Member implements ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<Object> events;
        final List<Object> seen;

        Member(String name, KafkaConsumer<byte[], byte[]> consumer, List<Object> events, List<Object> seen) {
            this.name = name;
            this.consumer = consumer;
            this.events = events;
            this.seen = seen;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (partitions.isEmpty()) {
                return;
            }
            events.add(List.of(name, "revoked", StromScenarios.sortedPartitions(partitions)));
            Map<TopicPartition, OffsetAndMetadata> consumed = new HashMap<>();
            for (TopicPartition partition : partitions) {
                consumed.put(partition, new OffsetAndMetadata(consumer.position(partition)));
            }
            consumer.commitSync(consumed);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                events.add(List.of(name, "assigned", StromScenarios.sortedPartitions(partitions)));
            }
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            events.add(List.of(name, "lost", StromScenarios.sortedPartitions(partitions)));
        }

        void poll() {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(StromScenarios.POLL)) {
                seen.add(List.of(name, record.partition(), record.offset(), StromScenarios.text(record.value())));
            }
        }

        int owned() {
            return consumer.assignment().size();
        }
    }

    /**
     * Two members with CooperativeStickyAssignor on a 4-partition topic holding COUNT records:
     * a reads alone; b joins and each ends with two partitions (a gives up only the two that
     * move); COUNT more records are read by both; b leaves and a takes all four back; 40 more
     * records are read by a alone.
     */
    static Map<String, Object> cooperative(String bootstrap, String topic, String group, int count) throws Exception {
        List<Object> events = new ArrayList<>();
        List<Object> seen = new ArrayList<>();
        Map<String, Object> outcome = new LinkedHashMap<>();
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        // Few records per poll, so that each member's share shows while both are in the group.
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
        Map<String, Object> configA = new HashMap<>(config);
        configA.putAll(classicGroup(group, "member-a"));
        Map<String, Object> configB = new HashMap<>(config);
        configB.putAll(classicGroup(group, "member-b"));
        Member a = new Member("a", StromScenarios.consumer(bootstrap, configA), events, seen);
        Member b = new Member("b", StromScenarios.consumer(bootstrap, configB), events, seen);
        try (Admin admin = StromScenarios.admin(bootstrap);
             KafkaProducer<byte[], byte[]> producer = StromScenarios.producer(bootstrap, Map.of())) {
            a.consumer.subscribe(List.of(topic), a);
            pollUntil(List.of(a), () -> a.owned() == 4 && seen.size() >= Math.min(50, count),
                    "member a to own all 4 partitions and read 50 records", seen);

            b.consumer.subscribe(List.of(topic), b);
            pollUntil(List.of(a, b), () -> a.owned() == 2 && b.owned() == 2,
                    "members a and b to own 2 partitions each", seen);
            outcome.put("assignedWhileBoth", Map.of(
                    "a", StromScenarios.sortedPartitions(a.consumer.assignment()),
                    "b", StromScenarios.sortedPartitions(b.consumer.assignment())));
            outcome.put("describedWhileBoth", describeGroup(admin, group));
            sendRound(producer, topic, "mid", count);
            pollUntil(List.of(a, b), () -> seen.size() >= 2 * count, (2 * count) + " records", seen);

            b.consumer.close();  // LeaveGroup; its listener commits what it read first
            pollUntil(List.of(a), () -> a.owned() == 4, "member a to own all 4 partitions again", seen);
            sendRound(producer, topic, "late", 40);
            pollUntil(List.of(a), () -> seen.size() >= 2 * count + 40, (2 * count + 40) + " records", seen);
            a.consumer.commitSync();
            outcome.put("describedAfterLeave", describeGroup(admin, group));
        } finally {
            a.consumer.close();
            b.consumer.close();
        }
        outcome.put("events", events);
        outcome.put("seen", seen);
        return outcome;
    }

    private interface Condition {
        boolean holds();
    }

    private static void pollUntil(List<Member> members, Condition done, String what, List<Object> seen) {
        long deadline = System.currentTimeMillis() + StromScenarios.WAIT_MS;
        while (!done.holds()) {
            StromScenarios.checkDeadline(deadline, what + " (" + seen.size() + " records read)");
            for (Member member : members) {
                member.poll();
            }
        }
    }

    private static void sendRound(KafkaProducer<byte[], byte[]> producer, String topic, String prefix, int count)
            throws Exception {
        List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            acks.add(producer.send(new ProducerRecord<>(topic, i % 4, null, StromScenarios.bytes(prefix + i))));
        }
        producer.flush();
        for (java.util.concurrent.Future<?> ack : acks) {
            ack.get();
        }
    }

    /** The group as the admin client sees it: the assignor and each member's partitions. */
    private static Map<String, Object> describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get();
        Map<String, Object> members = new TreeMap<>();
        for (MemberDescription member : description.members()) {
            members.put(member.clientId(), StromScenarios.sortedPartitions(member.assignment().topicPartitions()));
        }
        Map<String, Object> described = new LinkedHashMap<>();
        described.put("assignor", description.partitionAssignor());
        described.put("members", members);
        return described;
    }

    /**
     * Subscribe with GROUP, read until COUNT records arrived, commitSync, close. What the group
     * had committed before is reported, so a second run (after a broker restart) shows where
     * it resumed.
     */
    static Map<String, Object> commit(String bootstrap, String topic, String group, int count) throws Exception {
        Map<String, Object> outcome = new LinkedHashMap<>();
        List<Object> records = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = StromScenarios.consumer(bootstrap, classicGroup(group, "resumer"))) {
            Set<TopicPartition> partitions = new HashSet<>(StromScenarios.partitionsOf(consumer, topic));
            outcome.put("committedBefore", committed(consumer, partitions));
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + StromScenarios.WAIT_MS;
            while (records.size() < count || consumer.assignment().size() < partitions.size()) {
                StromScenarios.checkDeadline(deadline, count + " records (got " + records.size() + ")");
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(StromScenarios.POLL)) {
                    records.add(List.of(record.partition(), record.offset(), StromScenarios.text(record.value())));
                }
            }
            consumer.commitSync();
            outcome.put("committedAfter", committed(consumer, partitions));
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            boolean atEnd = true;
            for (TopicPartition partition : partitions) {
                atEnd &= consumer.position(partition) == ends.get(partition);
            }
            outcome.put("positionsAtEnd", atEnd);
        }
        outcome.put("records", records);
        return outcome;
    }

    private static Map<String, Object> committed(KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> partitions) {
        Map<String, Object> offsets = new TreeMap<>();
        consumer.committed(partitions).forEach((partition, committed) ->
                offsets.put(String.valueOf(partition.partition()), committed == null ? null : committed.offset()));
        return offsets;
    }

    /**
     * group.protocol=consumer (KIP-848) speaks ConsumerGroupHeartbeat (API 68), which Strom
     * does not list in ApiVersions: the client must fail poll() with a clear error, and soon,
     * instead of retrying forever.
     */
    static Map<String, Object> kip848(String bootstrap, String topic, String group) {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put("group.protocol", "consumer");  // the constant is missing before 3.7; the name is stable
        Map<String, Object> outcome = new LinkedHashMap<>();
        long start = System.currentTimeMillis();
        KafkaException failure = null;
        int polls = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = StromScenarios.consumer(bootstrap, config)) {
            consumer.subscribe(List.of(topic));
            while (System.currentTimeMillis() - start < StromScenarios.WAIT_MS) {
                polls++;
                try {
                    consumer.poll(StromScenarios.POLL);
                } catch (KafkaException error) {
                    failure = error;
                    break;
                }
            }
            outcome.put("failedAfterMs", System.currentTimeMillis() - start);
        }
        outcome.put("closedAfterMs", System.currentTimeMillis() - start);
        outcome.put("polls", polls);
        outcome.put("error", failure == null ? null : failure.getClass().getName());
        outcome.put("message", failure == null ? null : failure.getMessage());
        return outcome;
    }
}
