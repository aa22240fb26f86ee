import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Apache Kafka's Java client (kafka-clients) driven through one scenario per invocation, for
 * tests/compat/test_java_client.py: {@code java StromScenarios SCENARIO HOST:PORT ARGS...}
 * prints one JSON line of what the client observed, so the assertions live in pytest, next
 * to the other clients' ones. A failure exits 1 with its cause as the last line on stderr; a
 * bad command line exits 2.
 *
 * <p>The same source compiles against kafka-clients 3.9 and 4.x: it keeps to the API both
 * have (no poll(long), no DescribeTopicsResult.all(), no Admin.listGroups). The group
 * scenarios are in GroupScenarios.java, the JSON writer in Json.java.
 */
public final class StromScenarios {
    static final Duration POLL = Duration.ofMillis(100);
    /** How long any one wait may take: generous, for a loaded 2-core machine. */
    static final long WAIT_MS = 60_000;
    static final int FIVE_MIB = 5 * 1024 * 1024;
    static final int SIX_MIB = 6 * 1024 * 1024;

    private StromScenarios() {
    }

    /** A command line that cannot be run: exit 2, as for any bad command line. */
    static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    public static void main(String[] args) {
        String scenario = args.length > 0 ? args[0] : "";
        int code;
        try {
            if (args.length < 2) {
                throw new UsageError("usage: StromScenarios SCENARIO HOST:PORT [ARGS...]");
            }
            List<String> rest = Arrays.asList(args).subList(2, args.length);
            System.out.println(Json.write(run(scenario, args[1], rest)));
            code = 0;
        } catch (UsageError error) {
            System.err.println("StromScenarios: " + error.getMessage());
            code = 2;
        } catch (Exception error) {
            error.printStackTrace();
            System.err.println("StromScenarios " + scenario + " failed: " + describe(error));
            code = 1;
        }
        System.out.flush();
        // The clients are closed; exit at once rather than wait for any thread a failed
        // client left running.
        System.exit(code);
    }

    private static Map<String, Object> run(String scenario, String bootstrap, List<String> args) throws Exception {
        switch (scenario) {
            case "admin": return admin(bootstrap, arg(args, 0, "PREFIX"));
            case "send": return send(bootstrap, arg(args, 0, "TOPIC"), number(args, 1, "PARTITIONS"),
                    arg(args, 2, "VALUE_PREFIX"), number(args, 3, "COUNT"));
            case "codecs": return codecs(bootstrap, arg(args, 0, "TOPIC_PREFIX"), number(args, 1, "COUNT"),
                    args.subList(Math.min(2, args.size()), args.size()));
            case "edge": return edge(bootstrap, arg(args, 0, "TOPIC"));
            case "times": return times(bootstrap, arg(args, 0, "TOPIC"), longNumber(args, 1, "BASE_MS"));
            case "big": return big(bootstrap, arg(args, 0, "TOPIC"));
            case "cooperative": return GroupScenarios.cooperative(bootstrap, arg(args, 0, "TOPIC"),
                    arg(args, 1, "GROUP"), number(args, 2, "COUNT"));
            case "commit": return GroupScenarios.commit(bootstrap, arg(args, 0, "TOPIC"),
                    arg(args, 1, "GROUP"), number(args, 2, "COUNT"));
            case "kip848": return GroupScenarios.kip848(bootstrap, arg(args, 0, "TOPIC"), arg(args, 1, "GROUP"));
            default:
                throw new UsageError("unknown scenario '" + scenario
                        + "' (admin, send, codecs, edge, times, big, cooperative, commit, kip848)");
        }
    }

    // --- clients -------------------------------------------------------------------------

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> extra) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.putAll(extra);
        return new KafkaProducer<>(props);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> extra) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.putAll(extra);
        return new KafkaConsumer<>(props);
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    /** Every record of the partitions from their beginning, until {@code expected} arrived. */
    static List<ConsumerRecord<byte[], byte[]>> readFromStart(
            KafkaConsumer<byte[], byte[]> consumer, Collection<TopicPartition> partitions, int expected) {
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (records.size() < expected) {
            checkDeadline(deadline, expected + " records (got " + records.size() + ")");
            consumer.poll(POLL).forEach(records::add);
        }
        return records;
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<TopicPartition> partitions = new ArrayList<>();
        consumer.partitionsFor(topic).forEach(info -> partitions.add(new TopicPartition(topic, info.partition())));
        return partitions;
    }

    // --- scenarios -----------------------------------------------------------------------

    /** Create (validate-only, real, refused twice), describe, grow, describe configs, delete. */
    static Map<String, Object> admin(String bootstrap, String prefix) throws Exception {
        Map<String, Object> outcome = new LinkedHashMap<>();
        String topic = prefix + "-orders";
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(prefix + "-dry", 2, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all().get();
            outcome.put("dryRunListed", admin.listTopics().names().get().contains(prefix + "-dry"));
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "3600000")))).all().get();
            outcome.put("listed", admin.listTopics().names().get().contains(topic));
            outcome.put("createAgain", errorOf(() ->
                    admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get()));
            outcome.put("replicationFactor3", errorOf(() ->
                    admin.createTopics(List.of(new NewTopic(prefix + "-replicated", 1, (short) 3))).all().get()));
            outcome.put("describeMissing", errorOf(() ->
                    admin.describeTopics(List.of(prefix + "-missing")).allTopicNames().get()));

            TopicDescription described = admin.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get().get(topic);
            outcome.put("topic", describeTopic(described));

            DescribeClusterResult cluster = admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true));
            Map<String, Object> clusterOutcome = new LinkedHashMap<>();
            clusterOutcome.put("clusterId", cluster.clusterId().get());
            clusterOutcome.put("controller", cluster.controller().get().id());
            List<Object> nodes = new ArrayList<>();
            for (Node node : cluster.nodes().get()) {
                nodes.add(List.of(node.id(), node.host(), node.port()));
            }
            clusterOutcome.put("nodes", nodes);
            clusterOutcome.put("authorizedOperations", operationNames(cluster.authorizedOperations().get()));
            outcome.put("cluster", clusterOutcome);

            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            ConfigEntry retention = config.get("retention.ms");
            outcome.put("retentionMs", List.of(retention.value(), retention.source().name()));
            ConfigEntry cleanup = config.get("cleanup.policy");
            outcome.put("cleanupPolicy", List.of(cleanup.value(), cleanup.source().name()));

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
            outcome.put("partitionsAfterGrow", admin.describeTopics(List.of(topic)).allTopicNames().get()
                    .get(topic).partitions().size());

            admin.deleteTopics(List.of(topic)).all().get();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (admin.listTopics().names().get().contains(topic)) {
                checkDeadline(deadline, "the deleted topic to leave the topic list");
                Thread.sleep(50);
            }
            outcome.put("listedAfterDelete", false);
            outcome.put("deleteAgain", errorOf(() -> admin.deleteTopics(List.of(topic)).all().get()));
        }
        return outcome;
    }

    private static Map<String, Object> describeTopic(TopicDescription described) {
        Map<String, Object> topic = new LinkedHashMap<>();
        topic.put("name", described.name());
        topic.put("internal", described.isInternal());
        topic.put("topicIdSet", described.topicId() != null && !described.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"));
        List<Object> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : described.partitions()) {
            partitions.add(List.of(info.partition(), info.leader().id(), info.replicas().size(), info.isr().size()));
        }
        topic.put("partitions", partitions);
        topic.put("authorizedOperations", operationNames(described.authorizedOperations()));
        return topic;
    }

    private static List<String> operationNames(Set<AclOperation> operations) {
        if (operations == null) {
            return null;
        }
        List<String> names = new ArrayList<>();
        for (AclOperation operation : operations) {
            names.add(operation.name());
        }
        names.sort(null);
        return names;
    }

    /** An idempotent producer sends VALUE_PREFIX0..COUNT-1 round-robin over the partitions. */
    static Map<String, Object> send(String bootstrap, String topic, int partitions, String prefix, int count)
            throws Exception {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
            // A send to a partition the topic lacks would block for max.block.ms per record.
            int existing = producer.partitionsFor(topic).size();
            if (existing < partitions) {
                throw new IllegalStateException("topic " + topic + " has " + existing + " partitions, not " + partitions);
            }
            for (int i = 0; i < count; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, bytes(prefix + i))));
            }
            producer.flush();
            for (Future<RecordMetadata> ack : acks) {
                ack.get();
            }
        }
        return Map.of("sent", count);
    }

    /**
     * For each CODEC, an idempotent producer with it writes COUNT records to the topic
     * TOPIC_PREFIX-CODEC, read back in full with a plain consumer. One JVM for all five
     * codecs: its start is most of the time each would take alone.
     */
    static Map<String, Object> codecs(String bootstrap, String prefix, int count, List<String> codecs)
            throws Exception {
        if (codecs.isEmpty()) {
            throw new UsageError("missing argument CODEC (none, gzip, snappy, lz4, zstd)");
        }
        Map<String, Object> outcome = new LinkedHashMap<>();
        for (String codec : codecs) {
            outcome.put(codec, codec(bootstrap, prefix + "-" + codec, codec, count));
        }
        return outcome;
    }

    /** An idempotent producer with one codec; read back in full with a plain consumer. */
    static Map<String, Object> codec(String bootstrap, String topic, String codec, int count) throws Exception {
        Map<String, byte[]> sent = new HashMap<>();
        Map<Integer, List<Long>> ackedOffsets = new TreeMap<>();
        double compressionRate;
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap,
                Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec))) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                String key = "key-" + i;
                byte[] value = bytes(("value " + i + " ").repeat(i % 50 + 1));
                sent.put(key, value);
                acks.add(producer.send(new ProducerRecord<>(topic, bytes(key), value)));
            }
            producer.flush();
            for (Future<RecordMetadata> ack : acks) {
                RecordMetadata metadata = ack.get();
                ackedOffsets.computeIfAbsent(metadata.partition(), p -> new ArrayList<>()).add(metadata.offset());
            }
            compressionRate = metricValue(producer.metrics(), "producer-metrics", "compression-rate-avg");
        }
        List<ConsumerRecord<byte[], byte[]>> records;
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, Map.of())) {
            records = readFromStart(consumer, partitionsOf(consumer, topic), count);
        }
        boolean allMatch = records.size() == sent.size();
        Set<String> positions = new HashSet<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            allMatch &= Arrays.equals(sent.get(text(record.key())), record.value());
            positions.add(record.partition() + "@" + record.offset());
        }
        boolean contiguous = true;
        for (List<Long> offsets : ackedOffsets.values()) {
            offsets.sort(null);
            for (int i = 0; i < offsets.size(); i++) {
                contiguous &= offsets.get(i) == i;
            }
        }
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("codec", codec);
        outcome.put("sent", sent.size());
        outcome.put("received", records.size());
        outcome.put("distinctPositions", positions.size());
        outcome.put("allMatch", allMatch);
        outcome.put("ackedContiguous", contiguous);
        outcome.put("partitions", ackedOffsets.size());
        outcome.put("compressionRate", compressionRate);
        return outcome;
    }

    private static double metricValue(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            if (entry.getKey().group().equals(group) && entry.getKey().name().equals(name)) {
                return ((Number) entry.getValue().metricValue()).doubleValue();
            }
        }
        throw new IllegalStateException("no metric " + group + "/" + name);
    }

    /** A tombstone, a keyless record, and headers with a repeated key and a null value. */
    static Map<String, Object> edge(String bootstrap, String topic) throws Exception {
        List<Header> headers = List.of(new RecordHeader("h1", bytes("v1")), new RecordHeader("h2", (byte[]) null),
                new RecordHeader("h1", bytes("again")));
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
            producer.send(new ProducerRecord<>(topic, 0, bytes("tombstone"), null)).get();
            producer.send(new ProducerRecord<>(topic, 0, null, bytes("no key"))).get();
            producer.send(new ProducerRecord<>(topic, 0, null, null, bytes("headers"), headers)).get();
        }
        List<Object> records = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, Map.of())) {
            for (ConsumerRecord<byte[], byte[]> record : readFromStart(consumer, List.of(new TopicPartition(topic, 0)), 3)) {
                List<Object> recordHeaders = new ArrayList<>();
                for (Header header : record.headers()) {
                    recordHeaders.add(Arrays.asList(header.key(), text(header.value())));
                }
                Map<String, Object> observed = new LinkedHashMap<>();
                observed.put("offset", record.offset());
                observed.put("key", text(record.key()));
                observed.put("value", text(record.value()));
                observed.put("headers", recordHeaders);
                records.add(observed);
            }
        }
        return Map.of("records", records);
    }

    /** Ten records a second apart from BASE_MS: offsetsForTimes, ListOffsets specs, seek. */
    static Map<String, Object> times(String bootstrap, String topic, long base) throws Exception {
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, Map.of())) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + i * 1000L, null, bytes("t" + i)));
            }
            producer.flush();
        }
        Map<String, Object> outcome = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, Map.of())) {
            consumer.assign(List.of(partition));
            OffsetAndTimestamp found = consumer.offsetsForTimes(Map.of(partition, base + 4500)).get(partition);
            outcome.put("found", List.of(found.offset(), found.timestamp()));
            Map<TopicPartition, Long> query = new HashMap<>();
            query.put(partition, base + 60_000);
            outcome.put("future", String.valueOf(consumer.offsetsForTimes(query).get(partition)));
            outcome.put("beginning", consumer.beginningOffsets(List.of(partition)).get(partition));
            outcome.put("end", consumer.endOffsets(List.of(partition)).get(partition));
            consumer.seek(partition, found.offset());
            List<Object> afterSeek = new ArrayList<>();
            long deadline = System.currentTimeMillis() + WAIT_MS;
            while (afterSeek.size() < 5) {
                checkDeadline(deadline, "5 records after the seek (got " + afterSeek.size() + ")");
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    afterSeek.add(List.of(record.offset(), record.timestamp(), text(record.value())));
                }
            }
            outcome.put("afterSeek", afterSeek);
        }
        try (Admin admin = admin(bootstrap)) {
            Map<String, Object> specs = new LinkedHashMap<>();
            specs.put("earliest", listOffset(admin, partition, OffsetSpec.earliest()));
            specs.put("latest", listOffset(admin, partition, OffsetSpec.latest()));
            specs.put("maxTimestamp", listOffset(admin, partition, OffsetSpec.maxTimestamp()));
            specs.put("forTimestamp", listOffset(admin, partition, OffsetSpec.forTimestamp(base + 2000)));
            outcome.put("listOffsets", specs);
        }
        return outcome;
    }

    private static List<Long> listOffset(Admin admin, TopicPartition partition, OffsetSpec spec) throws Exception {
        ListOffsetsResult.ListOffsetsResultInfo info =
                admin.listOffsets(Map.of(partition, spec)).partitionResult(partition).get();
        return List.of(info.offset(), info.timestamp());
    }

    /**
     * A 5 MiB record to a topic whose max.message.bytes is 6 MiB, with the producer's
     * max.request.size and the consumer's fetch limits raised; the same record to a topic
     * left at the default limit must be refused by the broker.
     */
    static Map<String, Object> big(String bootstrap, String topic) throws Exception {
        String small = topic + "-default-limit";
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(
                    new NewTopic(topic, 1, (short) 1).configs(Map.of("max.message.bytes", String.valueOf(SIX_MIB))),
                    new NewTopic(small, 1, (short) 1))).all().get();
        }
        byte[] value = bigValue();
        Map<String, Object> outcome = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap,
                Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, String.valueOf(SIX_MIB + 1024)))) {
            outcome.put("offset", producer.send(new ProducerRecord<>(topic, 0, null, value)).get().offset());
            outcome.put("toDefaultLimit", errorOf(() -> producer.send(new ProducerRecord<>(small, 0, null, value)).get()));
        }
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, Map.of(
                ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(2 * SIX_MIB),
                ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(2 * SIX_MIB)))) {
            ConsumerRecord<byte[], byte[]> record =
                    readFromStart(consumer, List.of(new TopicPartition(topic, 0)), 1).get(0);
            outcome.put("sentLength", value.length);
            outcome.put("receivedLength", record.value().length);
            outcome.put("same", Arrays.equals(value, record.value()));
        }
        return outcome;
    }

    /** The 5 MiB value tests/compat/matrix.py's _big_value() makes: SHA-256 of "0", "1", .... */
    private static byte[] bigValue() throws Exception {
        MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
        byte[] value = new byte[FIVE_MIB];
        for (int i = 0; i < FIVE_MIB / 32; i++) {
            System.arraycopy(sha256.digest(bytes(Integer.toString(i))), 0, value, i * 32, 32);
        }
        return value;
    }

    // --- small helpers -------------------------------------------------------------------

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    /** "none" when the call succeeds, else the class of the exception the client raised. */
    static String errorOf(Callable<?> call) {
        try {
            call.call();
            return "none";
        } catch (ExecutionException error) {
            return error.getCause().getClass().getSimpleName();
        } catch (Exception error) {
            return error.getClass().getSimpleName();
        }
    }

    static void checkDeadline(long deadline, String what) {
        if (System.currentTimeMillis() > deadline) {
            throw new IllegalStateException("timed out after " + WAIT_MS / 1000 + " s waiting for " + what);
        }
    }

    static String describe(Throwable error) {
        StringBuilder out = new StringBuilder();
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof ExecutionException && cause.getCause() != null) {
                continue;
            }
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(cause.getClass().getName()).append(": ").append(cause.getMessage());
        }
        return out.toString();
    }

    static String arg(List<String> args, int index, String name) {
        if (index >= args.size()) {
            throw new UsageError("missing argument " + name);
        }
        return args.get(index);
    }

    static int number(List<String> args, int index, String name) {
        long value = longNumber(args, index, name);
        if (value < 0 || value > Integer.MAX_VALUE) {
            throw new UsageError(name + " must be between 0 and " + Integer.MAX_VALUE + ", got " + value);
        }
        return (int) value;
    }

    static long longNumber(List<String> args, int index, String name) {
        String value = arg(args, index, name);
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException error) {
            throw new UsageError(name + " must be a whole number, got '" + value + "'");
        }
    }

    static List<Integer> sortedPartitions(Collection<TopicPartition> partitions) {
        List<Integer> numbers = new ArrayList<>();
        partitions.forEach(tp -> numbers.add(tp.partition()));
        numbers.sort(null);
        return numbers;
    }
}
