import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Apache Kafka's Java client over TLS and SASL, for tests/security/test_java_security.py:
 * {@code java SecurityScenarios CASE_FILE...} runs one case per file and prints one JSON line,
 * {@code {"<file name without .properties>": outcome, ...}}; a bad command line exits 2.
 *
 * <p>A case file is a Java properties file: {@code case} names what to do, {@code client.*}
 * are the client's own settings (bootstrap, security protocol, TLS material, JAAS), the rest
 * the case's arguments. Cases:
 * <ul>
 *   <li>{@code scram-users}: Admin's alterUserScramCredentials (KIP-554) upserts {@code users}
 *       ({@code name:mechanism:iterations:password,...}), then describeUserScramCredentials
 *       reads them back: {@code {name: [[mechanism, iterations]...]}};</li>
 *   <li>{@code round-trip}: an idempotent producer sends {@code count} records to
 *       {@code topic}, a consumer in {@code group} reads them, commits and reads the commit
 *       back: {@code {"offsets", "values", "committed"}};</li>
 *   <li>{@code refused}: the same producer's first send, which the broker should refuse:
 *       {@code {"error": class, "message"}} as the client raises it.</li>
 * </ul>
 * The {@code scram-users} cases run first, one after another (the others log in as those
 * users); then every other case at once, each on its own thread with its own clients, so a
 * run costs one JVM start and about one case's time. A case that fails is reported as
 * {@code {"failed": cause}} without stopping the others.
 *
 * <p>Only API that kafka-clients 3.9 and 4.x both have, as in StromScenarios.
 */
final class SecurityScenarios {
    private static final String USAGE = "usage: SecurityScenarios CASE_FILE...";

    private SecurityScenarios() {
    }

    public static void main(String[] args) {
        int code;
        try {
            if (args.length == 0) {
                throw new StromScenarios.UsageError(USAGE);
            }
            System.out.println(Json.write(runAll(loadCases(args))));
            code = 0;
        } catch (StromScenarios.UsageError error) {
            System.err.println("SecurityScenarios: " + error.getMessage());
            code = 2;
        } catch (Exception error) {
            error.printStackTrace();
            System.err.println("SecurityScenarios failed: " + StromScenarios.describe(error));
            code = 1;
        }
        System.out.flush();
        System.exit(code);  // exit at once rather than wait for a thread a refused client left
    }

    private static Map<String, Properties> loadCases(String[] files) throws Exception {
        Map<String, Properties> cases = new LinkedHashMap<>();
        for (String file : files) {
            Properties properties = new Properties();
            try (InputStream in = new FileInputStream(file)) {
                properties.load(in);
            }
            String kind = properties.getProperty("case", "");
            if (!List.of("scram-users", "round-trip", "refused").contains(kind)) {
                throw new StromScenarios.UsageError(file + ": unknown case '" + kind + "' (scram-users, round-trip, refused)");
            }
            cases.put(Path.of(file).getFileName().toString().replaceFirst("\\.properties$", ""), properties);
        }
        return cases;
    }

    private static Map<String, Object> runAll(Map<String, Properties> cases) throws Exception {
        Map<String, Object> outcomes = new LinkedHashMap<>();
        cases.forEach((name, properties) -> {
            if ("scram-users".equals(properties.getProperty("case"))) {
                outcomes.put(name, outcomeOf(properties));
            }
        });
        ExecutorService threads = Executors.newCachedThreadPool();
        Map<String, Future<Object>> running = new LinkedHashMap<>();
        cases.forEach((name, properties) -> {
            if (!outcomes.containsKey(name)) {
                running.put(name, threads.submit(() -> outcomeOf(properties)));
            }
        });
        for (Map.Entry<String, Future<Object>> entry : running.entrySet()) {
            outcomes.put(entry.getKey(), entry.getValue().get());
        }
        threads.shutdown();
        return outcomes;
    }

    private static Object outcomeOf(Properties properties) {
        try {
            switch (properties.getProperty("case")) {
                case "scram-users": return scramUsers(properties);
                case "round-trip": return roundTrip(properties);
                default: return refused(properties);
            }
        } catch (Exception error) {
            return Map.of("failed", StromScenarios.describe(error));
        }
    }

    /** The {@code client.*} settings, without their prefix. */
    private static Map<String, Object> client(Properties properties) {
        Map<String, Object> settings = new TreeMap<>();
        for (String key : properties.stringPropertyNames()) {
            if (key.startsWith("client.")) {
                settings.put(key.substring("client.".length()), properties.getProperty(key));
            }
        }
        return settings;
    }

    private static String required(Properties properties, String key) {
        String value = properties.getProperty(key);
        if (value == null) {
            throw new StromScenarios.UsageError("a '" + properties.getProperty("case") + "' case needs " + key);
        }
        return value;
    }

    // --- the cases --------------------------------------------------------------------------

    private static Map<String, Object> scramUsers(Properties properties) throws Exception {
        List<UserScramCredentialAlteration> upsertions = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (String user : required(properties, "users").split(",")) {
            String[] parts = user.split(":", 4);  // name:mechanism:iterations:password
            ScramMechanism mechanism = ScramMechanism.fromMechanismName(parts[1]);
            upsertions.add(new UserScramCredentialUpsertion(
                    parts[0], new ScramCredentialInfo(mechanism, Integer.parseInt(parts[2])), parts[3]));
            names.add(parts[0]);
        }
        Properties settings = new Properties();
        settings.putAll(client(properties));
        Map<String, Object> described = new TreeMap<>();
        try (Admin admin = Admin.create(settings)) {
            admin.alterUserScramCredentials(upsertions).all().get();
            Map<String, UserScramCredentialsDescription> descriptions =
                    admin.describeUserScramCredentials(names).all().get();
            descriptions.forEach((name, description) -> {
                List<Object> infos = new ArrayList<>();
                for (ScramCredentialInfo info : description.credentialInfos()) {
                    infos.add(List.of(info.mechanism().mechanismName(), info.iterations()));
                }
                described.put(name, infos);
            });
        }
        return described;
    }

    private static Map<String, Object> roundTrip(Properties properties) throws Exception {
        String topic = required(properties, "topic");
        String group = required(properties, "group");
        int count = Integer.parseInt(required(properties, "count"));
        Map<String, Object> settings = client(properties);
        String bootstrap = (String) settings.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG);
        Map<String, Object> outcome = new LinkedHashMap<>();
        List<Object> offsets = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = StromScenarios.producer(bootstrap, settings)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, StromScenarios.bytes("record-" + i))));
            }
            for (Future<RecordMetadata> metadata : sent) {
                offsets.add(metadata.get().offset());
            }
        }
        outcome.put("offsets", offsets);
        Map<String, Object> consumerSettings = new TreeMap<>(settings);
        consumerSettings.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        List<Object> values = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = StromScenarios.consumer(bootstrap, consumerSettings)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + StromScenarios.WAIT_MS;
            while (values.size() < count) {
                StromScenarios.checkDeadline(deadline, count + " records (got " + values.size() + ")");
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(StromScenarios.POLL)) {
                    values.add(StromScenarios.text(record.value()));
                }
            }
            consumer.commitSync();
            TopicPartition partition = new TopicPartition(topic, 0);
            OffsetAndMetadata committed = consumer.committed(Set.of(partition)).get(partition);
            outcome.put("values", values);
            outcome.put("committed", committed == null ? null : committed.offset());
        }
        return outcome;
    }

    /** The first send, expected to fail: what the client raises, as an application sees it. */
    private static Map<String, Object> refused(Properties properties) {
        Map<String, Object> settings = client(properties);
        String bootstrap = (String) settings.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG);
        Throwable error;
        try (KafkaProducer<byte[], byte[]> producer = StromScenarios.producer(bootstrap, settings)) {
            producer.send(new ProducerRecord<>(required(properties, "topic"), StromScenarios.bytes("refused"))).get();
            return Map.of("error", "none");
        } catch (ExecutionException failed) {
            error = failed.getCause();
        } catch (Exception failed) {
            error = failed;
        }
        Map<String, Object> outcome = new LinkedHashMap<>();
        outcome.put("error", error.getClass().getName());
        outcome.put("message", error.getMessage());
        return outcome;
    }
}
