import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka's transaction admin API (KIP-664) as an operator uses it on a hanging transaction:
 * a transactional producer leaves a transaction open on a partition; Admin lists it,
 * describes it at its coordinator, describes the partition's producers, and aborts it
 * with {@code abortTransaction} (WriteTxnMarkers straight to the partition's leader, the
 * producer id, epoch and coordinator epoch taken from describeProducers, as
 * kafka-transactions.sh does). Prints one JSON line of what it saw.
 *
 * <p>Usage: {@code TxnAdminScenario HOST:PORT TOPIC TRANSACTIONAL_ID} (the topic exists,
 * one partition). Separate from StromScenarios: its own main, run by test_java_txn_admin.py.
 */
final class TxnAdminScenario {
    private TxnAdminScenario() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: TxnAdminScenario HOST:PORT TOPIC TRANSACTIONAL_ID");
            System.exit(2);
        }
        int code = 0;
        try {
            System.out.println(Json.write(run(args[0], args[1], args[2])));
        } catch (Exception error) {
            error.printStackTrace();
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }

    private static Map<String, Object> run(String bootstrap, String topic, String transactionalId) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        TopicPartition partition = new TopicPartition(topic, 0);
        Map<String, Object> extra = new TreeMap<>();
        extra.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        try (Admin admin = StromScenarios.admin(bootstrap);
             KafkaProducer<byte[], byte[]> producer = StromScenarios.producer(bootstrap, extra)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes())).get();
            }
            out.put("before", offsets(admin, partition));

            String listed = null;
            for (TransactionListing listing : admin.listTransactions().all().get()) {
                if (listing.transactionalId().equals(transactionalId)) {
                    listed = listing.state().toString();
                }
            }
            out.put("listed", listed);

            TransactionDescription description = admin.describeTransactions(Collections.singleton(transactionalId))
                    .description(transactionalId).get();
            List<Object> described = new ArrayList<>();
            description.topicPartitions().forEach(tp -> described.add(tp.toString()));
            out.put("described", List.of(description.state().toString(), description.transactionTimeoutMs(),
                    description.transactionStartTimeMs().isPresent(), description.producerEpoch(), described));

            List<ProducerState> active = admin.describeProducers(Collections.singleton(partition))
                    .partitionResult(partition).get().activeProducers();
            out.put("producers", active.size());
            ProducerState hanging = active.get(0);
            out.put("hanging", List.of(hanging.producerId() == description.producerId(), hanging.producerEpoch(),
                    hanging.lastSequence(), hanging.currentTransactionStartOffset().orElse(-1L)));

            admin.abortTransaction(new AbortTransactionSpec(partition, hanging.producerId(),
                    (short) hanging.producerEpoch(), hanging.coordinatorEpoch().orElse(0))).all().get();
            out.put("after", offsets(admin, partition));
            ProducerState cleared = admin.describeProducers(Collections.singleton(partition))
                    .partitionResult(partition).get().activeProducers().get(0);
            out.put("clearedStartOffset", cleared.currentTransactionStartOffset().orElse(-1L));

            producer.abortTransaction();  // the coordinator still had it open: end it there too
        }
        return out;
    }

    /** [last stable offset, high watermark] of the partition. */
    private static List<Long> offsets(Admin admin, TopicPartition partition) throws Exception {
        long stable = admin.listOffsets(Collections.singletonMap(partition, OffsetSpec.latest()),
                new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).partitionResult(partition).get().offset();
        long high = admin.listOffsets(Collections.singletonMap(partition, OffsetSpec.latest()))
                .partitionResult(partition).get().offset();
        return List.of(stable, high);
    }
}
