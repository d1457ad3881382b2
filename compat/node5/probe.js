// Drives the official RocketMQ 5.x Node.js client (npm `rocketmq-client-nodejs`) against a gRPC
// endpoint; crates/cli/tests/node5_client.rs runs it. Each scenario prints `OK <name>` on
// stderr (the client's own log noise goes there too); the first failure throws (non-zero exit,
// stack on stderr). The broker needs `recallMessageEnable=true` for the recall scenario.
//
// Usage: node probe.js ENDPOINT PREFIX
// Topics (created by the test): PREFIX-normal (NORMAL), PREFIX-fifo (FIFO), PREFIX-delay (DELAY).
// Plaintext: this client checks TLS certificates (grpc-js createSsl), so a self-signed proxy
// certificate is refused; plaintext is its default.
'use strict';
const assert = require('assert');
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const [endpoint, prefix] = process.argv.slice(2);
const normal = `${prefix}-normal`;
const fifo = `${prefix}-fifo`;
const delay = `${prefix}-delay`;
const sleep = ms => new Promise(r => setTimeout(r, ms));

async function receiveAll(consumer, want, timeoutMs = 40000) {
  const got = new Map();
  const deadline = Date.now() + timeoutMs;
  while (got.size < want && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 15000)) {
      got.set(m.messageId, m);
      await consumer.ack(m);
    }
  }
  return got;
}

async function main() {
  // No `topics`: with several, this client's startup can hang. It sends Settings after the
  // first topic's route and only then starts waiting for the answer, while it still fetches
  // the other routes; an answer that comes back in between is missed and startup waits for
  // the next settings sync (5 minutes). Without topics it fetches routes when it first sends.
  const producer = new Producer({ endpoints: endpoint });
  await producer.startup();

  // Normal: tag, keys, properties; a SimpleConsumer receives and acks them all.
  const sent = new Map();
  for (let i = 0; i < 5; i++) {
    const r = await producer.send({
      topic: normal, tag: 'TagA', keys: [`k${i}`], properties: new Map([['color', 'red']]),
      body: Buffer.from(`node-${i}`),
    });
    sent.set(r.messageId, `node-${i}`);
  }
  const simple = new SimpleConsumer({
    consumerGroup: `${prefix}-g-simple`, endpoints: endpoint, subscriptions: new Map([[normal, 'TagA']]),
  });
  await simple.startup();
  const got = await receiveAll(simple, 5);
  assert.deepStrictEqual(new Map([...got].map(([k, m]) => [k, m.body.toString()])), sent);
  for (const m of got.values()) {
    assert.strictEqual(m.tag, 'TagA');
    assert.strictEqual(m.properties.get('color'), 'red');
    assert.ok(m.keys[0].startsWith('k'), m.keys);
  }
  await simple.shutdown();
  console.error('OK normal');

  // FIFO with a message group.
  const fifoIds = new Set();
  for (let i = 0; i < 4; i++) {
    fifoIds.add((await producer.send({ topic: fifo, messageGroup: 'g1', body: Buffer.from(`f-${i}`) })).messageId);
  }
  const fifoConsumer = new SimpleConsumer({
    consumerGroup: `${prefix}-g-fifo`, endpoints: endpoint, subscriptions: new Map([[fifo, '*']]),
  });
  await fifoConsumer.startup();
  const fifoGot = await receiveAll(fifoConsumer, 4);
  assert.deepStrictEqual(new Set(fifoGot.keys()), fifoIds);
  for (const m of fifoGot.values()) assert.strictEqual(m.messageGroup, 'g1');
  await fifoConsumer.shutdown();
  console.error('OK fifo');

  // Delay with recall: the recalled message never arrives, the other arrives after its delay.
  const recalled = await producer.send({ topic: delay, delay: 3000, body: Buffer.from('recalled') });
  assert.ok(recalled.recallHandle, 'a delayed message has a recall handle');
  await producer.recallMessage(delay, recalled.recallHandle);
  const start = Date.now();
  const kept = await producer.send({ topic: delay, delay: 3000, body: Buffer.from('kept') });
  const delayConsumer = new SimpleConsumer({
    consumerGroup: `${prefix}-g-delay`, endpoints: endpoint, subscriptions: new Map([[delay, '*']]),
  });
  await delayConsumer.startup();
  const delayGot = await receiveAll(delayConsumer, 1, 30000);
  assert.ok(delayGot.has(kept.messageId), 'the delayed message arrives');
  assert.ok(Date.now() - start >= 2500, 'not before its delay');
  await sleep(2000);
  const late = await receiveAll(delayConsumer, 1, 3000);
  assert.ok(![...delayGot.values(), ...late.values()].some(m => m.body.toString() === 'recalled'), 'the recalled one never arrives');
  await delayConsumer.shutdown();
  console.error('OK delay-recall');

  // PushConsumer: messages sent after it started are consumed by its listener.
  const pushed = new Set();
  const push = new PushConsumer({
    endpoints: endpoint, consumerGroup: `${prefix}-g-push`, subscriptions: new Map([[normal, 'TagP']]),
    messageListener: { async consume(m) { pushed.add(m.body.toString()); return ConsumeResult.SUCCESS; } },
  });
  await push.startup();
  for (let i = 0; i < 3; i++) await producer.send({ topic: normal, tag: 'TagP', body: Buffer.from(`push-${i}`) });
  const pushDeadline = Date.now() + 40000;
  while (pushed.size < 3 && Date.now() < pushDeadline) await sleep(200);
  assert.deepStrictEqual([...pushed].sort(), ['push-0', 'push-1', 'push-2']);
  await push.shutdown();
  console.error('OK push');

  await producer.shutdown();
  console.error('OK all');
}

main().then(() => process.exit(0), e => { console.error(e); process.exit(1); });
