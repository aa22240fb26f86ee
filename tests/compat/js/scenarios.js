// The compatibility matrix's scenarios with kafkajs, driven by tests/compat/test_matrix_kafkajs.py.
// Usage: node scenarios.js SCENARIO HOST:PORT TOPIC [ARG]; prints one JSON line with the outcome.
const crypto = require("crypto");
const { Kafka, logLevel } = require("kafkajs");

const GROUP = { sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 10000, maxWaitTimeInMs: 500 };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(condition, what, ms = 30000) {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function withAdmin(kafka, use) {
  const admin = kafka.admin();
  await admin.connect();
  try { return await use(admin); } finally { await admin.disconnect(); }
}

async function send(kafka, options, record) {
  const producer = kafka.producer(options);
  await producer.connect();
  try { await producer.send(record); } finally { await producer.disconnect(); }
}

const text = (buffer) => (buffer === null ? null : buffer.toString());

// Consume TOPIC with group ARG until COUNT records, then 500 ms more (a repeat would show),
// and disconnect, which commits what was consumed.
async function group(kafka, topic, [groupId, countText]) {
  const count = Number(countText);
  const consumer = kafka.consumer({ groupId, ...GROUP });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  await consumer.run({ eachMessage: async ({ message }) => { values.push(text(message.value)); } });
  await waitFor(() => values.length >= count, `${count} records, got ${values.length}`);
  await sleep(500);
  await consumer.disconnect();
  return { values };
}

// Two consumers in one group: the first reads, the second joins; once each holds two of the
// four partitions, 80 more records are produced. Every record with who read it.
async function two(kafka, topic, [groupId, totalText]) {
  const total = Number(totalText);
  const seen = [];
  const assigned = [[], []];
  const consumers = [0, 1].map(() => kafka.consumer({ groupId, ...GROUP }));
  const start = async (index) => {
    const consumer = consumers[index];
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      assigned[index] = payload.memberAssignment[topic] || [];
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        seen.push({ who: index, partition, offset: Number(message.offset), value: text(message.value) });
      },
    });
  };
  await start(0);
  await waitFor(() => seen.length >= 30, "the first consumer to read");
  await start(1);
  await waitFor(() => assigned[0].length === 2 && assigned[1].length === 2, "two partitions each");
  const messages = [];
  for (let i = 0; i < 80; i++) messages.push({ partition: i % 4, value: `f${i}` });
  await send(kafka, {}, { topic, messages });
  await waitFor(() => seen.length >= total, `${total} records, got ${seen.length}`);
  await sleep(500);
  await Promise.all(consumers.map((consumer) => consumer.disconnect()));
  return { seen, assigned };
}

async function idempotent(kafka, topic) {
  const messages = [];
  for (let i = 0; i < 200; i++) messages.push({ key: `k${i}`, value: `v${i} `.repeat((i % 20) + 1) });
  await send(kafka, { idempotent: true, maxInFlightRequests: 1 }, { topic, acks: -1, messages });
  return {};
}

async function edge(kafka, topic) {
  await send(kafka, {}, {
    topic,
    messages: [
      { key: "tombstone", value: null },
      { key: null, value: "no key" },
      { value: "headers", headers: { h1: ["v1", "again"], h2: "" } },
    ],
  });
  const consumer = kafka.consumer({ groupId: `${topic}-group`, ...GROUP });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const records = [];
  await consumer.run({
    eachMessage: async ({ message }) => {
      const headers = {};
      for (const [name, value] of Object.entries(message.headers)) {
        headers[name] = Array.isArray(value) ? value.map(text) : text(value);
      }
      records.push({ key: text(message.key), value: text(message.value), headers });
    },
  });
  await waitFor(() => records.length >= 3, "three records");
  await consumer.disconnect();
  return { records };
}

function bigValue() {
  const parts = [];
  for (let i = 0; parts.length * 64 < 5 * 1024 * 1024; i++) parts.push(crypto.createHash("sha256").update(`${i}`).digest("hex"));
  return parts.join("").slice(0, 5 * 1024 * 1024);
}

async function big(kafka, topic) {
  const sixMiB = 6 * 1024 * 1024;
  await withAdmin(kafka, (admin) => admin.createTopics({
    topics: [{ topic, numPartitions: 1, configEntries: [{ name: "max.message.bytes", value: `${sixMiB}` }] }],
  }));
  const value = bigValue();
  await send(kafka, {}, { topic, messages: [{ value }] });
  const consumer = kafka.consumer({ groupId: `${topic}-group`, maxBytesPerPartition: 2 * sixMiB, maxBytes: 2 * sixMiB, ...GROUP });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let received = null;
  await consumer.run({ eachMessage: async ({ message }) => { received = message.value; } });
  await waitFor(() => received !== null, "the 5 MiB record");
  await consumer.disconnect();
  const digest = (data) => crypto.createHash("sha256").update(data).digest("hex");
  return { sentLength: value.length, receivedLength: received.length, same: digest(value) === digest(received) };
}

async function remove(kafka, topic) {
  return withAdmin(kafka, async (admin) => {
    await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
    const before = await admin.listTopics();
    await admin.deleteTopics({ topics: [topic] });
    const after = await admin.listTopics();
    return { before: before.includes(topic), after: after.includes(topic) };
  });
}

// Offsets by timestamp, watermarks, and a seek: the group starts at the end (no commit,
// not fromBeginning), so every record it reads comes from the seek.
async function times(kafka, topic, [baseText]) {
  const base = Number(baseText);
  const messages = [];
  for (let i = 0; i < 10; i++) messages.push({ value: `${i}`, timestamp: `${base + i * 1000}` });
  await send(kafka, {}, { topic, messages });
  const { found, future, watermarks } = await withAdmin(kafka, async (admin) => ({
    found: await admin.fetchTopicOffsetsByTimestamp(topic, base + 4500),
    future: await admin.fetchTopicOffsetsByTimestamp(topic, base + 60000),
    watermarks: await admin.fetchTopicOffsets(topic),
  }));
  const consumer = kafka.consumer({ groupId: `${topic}-group`, ...GROUP });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: false });
  const afterSeek = [];
  await consumer.run({
    eachMessage: async ({ message }) => { afterSeek.push([Number(message.offset), text(message.value), Number(message.timestamp)]); },
  });
  consumer.seek({ topic, partition: 0, offset: "7" });
  await waitFor(() => afterSeek.length >= 3, "three records after the seek");
  await sleep(300);
  await consumer.disconnect();
  return { found, future, watermarks, afterSeek };
}

const SCENARIOS = { group, two, idempotent, edge, big, remove, times };

async function main() {
  const [scenario, bootstrap, topic, ...rest] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "strom-matrix", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const outcome = await SCENARIOS[scenario](kafka, topic, rest);
  console.log(JSON.stringify(outcome));
}

main().catch((error) => { console.error(error); process.exit(1); });
