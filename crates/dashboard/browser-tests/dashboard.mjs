// Drives FerroMQ's dashboard in headless Chromium: every page opens cleanly, a topic is
// created, a group's backlog is seen and skipped, the TPS chart moves, a message is found by
// key, and (optionally) a message trace is drawn. Run by the dashboard crate's integration test.
//
// Environment:
//   DASHBOARD_URL   the dashboard, e.g. http://127.0.0.1:18082/
//   SCREENSHOT_DIR  where screenshots go (created if missing)
//   DASH_TOPIC      an existing topic holding messages, some with key DASH_KEY
//   DASH_KEY        that key
//   DASH_GROUP      a consumer group subscribed to DASH_TOPIC with a backlog > 0
//   DASH_NEW_TOPIC  a topic to create through the UI
//   DASH_MSG_ID     optional: the unique id of a message with trace records
//   CHROMIUM        the browser (default /usr/bin/chromium)
//   STEP_TIMEOUT_MS per-step limit (default 30000; the chart step gets 30 s more)
//
// Prints one line per step; on a failure prints why, saves failure-<step>.png and exits 1.

import { chromium } from 'playwright-core';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name, fallback) => {
  const v = process.env[name];
  if (v !== undefined && v !== '') return v;
  if (fallback !== undefined) return fallback;
  console.log(`FAIL setup: environment variable ${name} is required`);
  process.exit(2);
};

const BASE = env('DASHBOARD_URL').replace(/\/?$/, '/');
const ORIGIN = new URL(BASE).origin;
const SHOTS = env('SCREENSHOT_DIR', join(tmpdir(), 'ferromq-dashboard-screenshots'));
const TOPIC = env('DASH_TOPIC');
const KEY = env('DASH_KEY');
const GROUP = env('DASH_GROUP');
const NEW_TOPIC = env('DASH_NEW_TOPIC');
const MSG_ID = process.env.DASH_MSG_ID || '';
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const STEP_MS = Number(env('STEP_TIMEOUT_MS', '30000'));
const PAGES = ['dashboard', 'cluster', 'topic', 'consumer', 'producer', 'message', 'dlq', 'trace', 'acl', 'controller', 'ops'];
// What shows that each page's main content is there.
const MARKERS = {
  dashboard: 'chart-broker-tps', cluster: 'cluster-table', topic: 'topic-table', consumer: 'consumer-table',
  producer: 'producer-form', message: 'message-tabs', dlq: 'dlq-form', trace: 'trace-form', acl: 'acl-user-table',
  controller: 'controller-state', ops: 'ops-namesrv-table',
};

mkdirSync(SHOTS, { recursive: true });
const started = Date.now();
const profile = mkdtempSync(join(tmpdir(), 'ferromq-dashboard-chromium-'));
let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 1440, height: 900 },
  });
} catch (e) {
  console.log(`FAIL setup: cannot start Chromium at ${CHROMIUM} (set CHROMIUM): ${String(e.message).split('\n')[0]}`);
  rmSync(profile, { recursive: true, force: true });
  process.exit(2);
}
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(STEP_MS);

// Problems seen by the browser; each step fails if any appeared while it ran.
let problems = [];
page.on('console', (m) => {
  if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  // The app logs every API failure it shows the user as a warning with this prefix.
  if (m.type() === 'warning' && m.text().startsWith('FerroMQ dashboard error:')) problems.push(`error shown: ${m.text()}`);
});
page.on('pageerror', (e) => problems.push(`uncaught page error: ${e.message}`));
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(ORIGIN + '/') && !u.startsWith('data:') && !u.startsWith('about:')) problems.push(`request outside the dashboard: ${u}`);
});
page.on('response', (r) => {
  if (r.url().startsWith(ORIGIN + '/') && r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
});
page.on('requestfailed', (r) => {
  if (r.url().startsWith(ORIGIN + '/')) problems.push(`request failed: ${r.request().method()} ${r.url()}: ${r.failure() && r.failure().errorText}`);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t = (name) => `[data-test="${name}"]`;
const named = (test, name) => `[data-test="${test}"][data-name="${name.replace(/["\\]/g, '\\$&')}"]`;

async function shot(name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function finish(code) {
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
}

let stepNo = 0;
// What the running step waits for, named in its timeout message.
let waitingFor = '';
const expecting = (what) => { waitingFor = what; };
async function step(name, body, limit = STEP_MS) {
  stepNo++;
  const t0 = Date.now();
  problems = [];
  waitingFor = '';
  let timer, watch;
  try {
    await Promise.race([
      body(),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${limit / 1000} s${waitingFor ? ` waiting for ${waitingFor}` : ''}`)), limit); }),
      // Fail at once when the browser reports a problem (an error shown, a failed request).
      new Promise((_, reject) => { watch = setInterval(() => { if (problems.length) reject(new Error(problems.join('; '))); }, 100); }),
    ]);
    await sleep(200); // let late responses and console messages arrive
    if (problems.length) throw new Error(problems.join('; '));
    console.log(`ok   ${stepNo} ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    const reason = (e && e.message ? e.message : String(e)).split('\n')[0];
    const extra = problems.length && !reason.includes(problems[0]) ? ` [browser: ${problems.join('; ')}]` : '';
    console.log(`FAIL ${stepNo} ${name}: ${reason}${extra}`);
    await shot(`failure-${name}`).then(() => console.log(`     screenshot ${join(SHOTS, `failure-${name}.png`)}`), () => {});
    await finish(1);
  } finally {
    clearTimeout(timer);
    clearInterval(watch);
  }
}

/** Opens a page through the nav bar and waits for its main content. */
async function open(name) {
  expecting(`the ${name} page to show its content ([data-test=${MARKERS[name]}])`);
  await page.click(t(`nav-${name}`));
  await page.waitForSelector(`${t(`page-${name}`)}[data-ready="1"] ${t(MARKERS[name])}`, { state: 'visible' });
}

/** Waits until `check()` is truthy, running `between()` (e.g. a refresh) every `every` ms. */
async function until(what, check, { every = 1000, between } = {}) {
  expecting(what);
  for (;;) {
    const v = await check();
    if (v) return v;
    if (problems.length) throw new Error(`${what}: ${problems.join('; ')}`);
    if (between) await between();
    await sleep(every);
    if (!page || page.isClosed()) throw new Error(`${what}: the page closed`);
  }
}

async function closeDialogs() {
  // The newest dialog is on top: close from the last.
  for (const b of (await page.$$(`#modals ${t('dialog-close')}`)).reverse()) await b.click();
  await page.waitForSelector('#modals .overlay', { state: 'detached' });
}

// 1. Every page opens without errors.
await step('open-pages', async () => {
  await page.goto(BASE + '#/dashboard');
  for (const name of PAGES) {
    await open(name);
    await shot(name);
  }
});

// 2. Create DASH_NEW_TOPIC with the Add form, see it listed, send it a message.
await step('create-topic', async () => {
  await open('topic');
  expecting('the Add topic dialog');
  await page.click(t('topic-add-btn'));
  const dialog = page.locator(t('topic-form-dialog'));
  await dialog.waitFor();
  const firstCluster = dialog.locator(t('topic-form-cluster')).first();
  await firstCluster.check();
  await dialog.locator(t('topic-form-name')).fill(NEW_TOPIC);
  await dialog.locator(t('topic-form-submit')).click();
  expecting('the Add topic dialog to close after Create');
  await dialog.waitFor({ state: 'detached' });
  await page.fill(t('topic-filter'), NEW_TOPIC);
  const row = page.locator(named('topic-row', NEW_TOPIC));
  await until(`topic ${NEW_TOPIC} listed`, () => row.count(), { every: 1500, between: () => page.click(t('topic-refresh-btn')) });
  expecting(`the SEND MESSAGE dialog of ${NEW_TOPIC} and its result`);
  await row.locator(t('topic-send-btn')).click();
  const send = page.locator(t('topic-send-dialog'));
  await send.locator(t('send-tag')).fill('dashboard');
  await send.locator(t('send-key')).fill('dashboard-browser-test');
  await send.locator(t('send-body')).fill('sent by the dashboard browser test');
  await send.locator(t('send-submit')).click();
  const status = await page.locator(`${t('send-result-dialog')} ${t('send-result-status')}`).getAttribute('data-status');
  if (status !== 'SEND_OK') throw new Error(`sending to ${NEW_TOPIC} gave ${status}`);
  await shot('topic-created');
  await closeDialogs();
});

// 3. DASH_GROUP shows a backlog; its consume detail lists DASH_TOPIC's queues.
await step('consumer-backlog', async () => {
  await open('consumer');
  await page.fill(t('consumer-filter'), GROUP);
  const row = page.locator(named('consumer-row', GROUP));
  const lag = await until(`group ${GROUP} listed with a backlog`, async () => {
    if (!await row.count()) return 0;
    const v = Number(await row.locator(t('consumer-diff')).getAttribute('data-value'));
    expecting(`group ${GROUP} to show a backlog > 0 (it shows ${v})`);
    return v > 0 ? v : 0;
  }, { every: 2000, between: () => page.click(t('consumer-refresh-btn')) });
  expecting(`CONSUME DETAIL of ${GROUP} to list topic ${TOPIC}`);
  await row.locator(t('consumer-detail-btn')).click();
  const topic = page.locator(`${t('consumer-detail-dialog')} ${named('consume-detail-topic', TOPIC)}`);
  await topic.waitFor();
  const queues = await topic.locator(t('consume-detail-row')).count();
  if (!queues) throw new Error(`consume detail of ${GROUP} shows no queue of ${TOPIC}`);
  console.log(`     ${GROUP}: backlog ${lag}, ${queues} queues of ${TOPIC}`);
  await shot('consume-detail');
  await closeDialogs();
});

// 4. The broker TPS chart rises above zero and gains points (messages are sent meanwhile).
await step('tps-chart', async () => {
  await open('dashboard');
  const chart = page.locator(t('chart-broker-tps'));
  const read = async () => ({ points: Number(await chart.getAttribute('data-points')), max: Number(await chart.getAttribute('data-max')) });
  let sent = 0;
  const produce = async () => {
    sent += await page.evaluate(async (topic) => {
      let ok = 0;
      for (let i = 0; i < 5; i++) {
        const r = await fetch('/topic/sendTopicMessage.do', { method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ topic, key: 'tps', tag: 'tps', messageBody: `tps ${Date.now()} ${i}`, traceEnabled: false }) });
        const j = await r.json();
        if (j.status === 0) ok++;
      }
      return ok;
    }, NEW_TOPIC);
  };
  const first = await until('the broker TPS chart shows traffic (data-max > 0)', async () => {
    const v = await read();
    return v.max > 0 ? v : null;
  }, { every: 1000, between: produce });
  const second = await until(`the broker TPS chart gains points (had ${first.points})`, async () => {
    const v = await read();
    return v.points > first.points ? v : null;
  }, { every: 1000, between: produce });
  console.log(`     chart: ${first.points} -> ${second.points} points, max ${second.max.toFixed(2)} msg/s (${sent} messages sent meanwhile)`);
  await shot('dashboard-traffic');
}, STEP_MS + 30000);

// 5. Find a message of DASH_TOPIC by DASH_KEY; its detail shows the body and the key.
await step('message-by-key', async () => {
  await open('message');
  await page.click(t('msg-tab-key'));
  await page.fill(t('msg-key-topic'), TOPIC);
  await page.fill(t('msg-key-input'), KEY);
  expecting(`a message of ${TOPIC} with key ${KEY}, then its detail dialog`);
  await page.click(t('msg-key-search'));
  const rows = page.locator(`${t('msg-key-result')} ${t('message-row')}`);
  await rows.first().waitFor();
  await rows.first().locator(t('message-detail-btn')).click();
  const dialog = page.locator(`${t('message-detail-dialog')}[data-ready="1"]`);
  await dialog.waitFor();
  const body = (await dialog.locator(t('message-body')).textContent()) || '';
  if (!body.trim() || body === '(no body)') throw new Error('the message detail shows no body');
  const keys = (await dialog.locator(`${named('property-row', 'KEYS')} ${t('property-value')}`).textContent()) || '';
  if (!keys.split(/\s+/).includes(KEY)) throw new Error(`the KEYS property is "${keys}", not ${KEY}`);
  await dialog.locator(t('message-body-hex-toggle')).click();
  const hex = (await dialog.locator(t('message-body')).textContent()) || '';
  if (!/^00000000 {2}[0-9a-f]{2}/.test(hex)) throw new Error('the hex view of the body is not a hex dump');
  console.log(`     ${await rows.count()} message(s) with key ${KEY}; body "${body.slice(0, 40)}"`);
  await shot('message-detail');
  await closeDialogs();
});

// 6. Skip DASH_GROUP's backlog on DASH_TOPIC.
await step('skip-backlog', async () => {
  await open('topic');
  await page.fill(t('topic-filter'), TOPIC);
  const row = page.locator(named('topic-row', TOPIC));
  if (!await row.count()) {
    // The topic may have a type hidden by default; show every type.
    for (const box of await page.locator(`${t('page-topic')} input[type=checkbox][data-test^="topic-type-"]`).all()) await box.check();
  }
  expecting(`the SKIP MESSAGE ACCUMULATE dialog of ${TOPIC} offering ${GROUP}, then its result`);
  await row.locator(t('topic-skip-btn')).click();
  const dialog = page.locator(`${t('topic-skip-dialog')}[data-ready="1"]`);
  await dialog.waitFor();
  await dialog.locator(`${t('reset-group')}[value="${GROUP}"]`).check();
  await dialog.locator(t('reset-submit')).click();
  const result = page.locator(`${t('reset-result-dialog')} ${named('reset-result-row', GROUP)}`);
  await result.waitFor();
  if (await result.getAttribute('data-status') !== 'true') {
    throw new Error(`skipping the backlog of ${GROUP} failed: ${(await result.textContent()).slice(0, 300)}`);
  }
  await shot('skip-backlog');
  await closeDialogs();
});

// 7. The trace of DASH_MSG_ID shows its producer.
if (MSG_ID) {
  await step('message-trace', async () => {
    await open('trace');
    await page.fill(t('trace-msgid'), MSG_ID);
    expecting(`the producer node of ${MSG_ID}'s trace`);
    await page.click(t('trace-search'));
    await page.locator(t('trace-producer-node')).waitFor();
    await shot('trace');
  });
} else {
  console.log('skip message-trace (DASH_MSG_ID is not set)');
}

console.log(`all ${stepNo} steps passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${SHOTS}`);
await finish(0);
