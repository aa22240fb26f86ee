// Drives a Strom broker with kafkajs: create a topic, produce (gzip), consume with a group,
// commit, and print what happened as one JSON line. Usage: node kafkajs_client.js HOST:PORT TOPIC COUNT
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, countText] = process.argv.slice(2);
  const count = Number(countText);
  const kafka = new Kafka({ clientId: "strom-compat", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  await admin.disconnect();

  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) {
    messages.push({ key: `k${i}`, value: `v${i}`, headers: { n: `${i}` } });
  }
  await producer.send({ topic, compression: CompressionTypes.GZIP, messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `${topic}-group`, sessionTimeout: 6000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Map();
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out with ${seen.size} of ${count}`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.set(message.key.toString(), message.value.toString());
        if (seen.size >= count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  const admin2 = kafka.admin();
  await admin2.connect();
  const committed = await admin2.fetchOffsets({ groupId: `${topic}-group`, topics: [topic] });
  await admin2.disconnect();
  const committedTotal = committed[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0);
  console.log(JSON.stringify({ created, consumed: seen.size, allMatch: [...seen].every(([k, v]) => v === `v${k.slice(1)}`), committedTotal }));
}

main().catch((error) => { console.error(error); process.exit(1); });
