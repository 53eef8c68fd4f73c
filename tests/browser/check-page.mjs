// Opens a page of conform's in headless Chromium and says what it saw, as one JSON document on
// stdout: the errors the page raised (exceptions, console errors, the log's errors: a load the
// Content-Security-Policy refused, a resource that failed), what the page holds (failures and
// their timelines, pictures without a text alternative, links to nowhere), and the
// screenshots it took. The Rust tests (tests/suite/html_page.rs) judge it.
//
//   node check-page.mjs --chromium /usr/bin/chromium --page PAGE.html
//        [--shot 'CSS selector=out.png']... [--top out.png] [--full out.png] [--reveal FRAGMENT]
//
// --shot takes the element (its folded ancestors opened), --top the first screen of the page
// as a person sees it (1200 × 900), --full the whole page, --reveal opens PAGE#FRAGMENT and
// says whether the element is shown (a link into a folded scenario must show it).
//
// It drives Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: messages
// are JSON, each ended by a NUL byte, commands on fd 3 and answers on fd 4), so it needs
// nothing but node and the browser: no package, no port, no download.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

function parse(argv) {
  const out = { shots: [], reveal: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === '--chromium') out.chromium = value;
    else if (key === '--page') out.page = path.resolve(value);
    else if (key === '--full') out.full = path.resolve(value);
    else if (key === '--top') out.top = path.resolve(value);
    else if (key === '--reveal') out.reveal.push(value);
    else if (key === '--shot') {
      const at = value.lastIndexOf('=');
      out.shots.push({ selector: value.slice(0, at), file: path.resolve(value.slice(at + 1)) });
    } else throw new Error(`unknown argument ${key}`);
  }
  if (!out.chromium || !out.page) throw new Error('--chromium and --page are needed');
  return out;
}

const args = parse(process.argv.slice(2));
const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'conform-chromium-'));
const chrome = spawn(
  args.chromium,
  [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--hide-scrollbars',
    '--window-size=1200,900',
    `--user-data-dir=${profileDir}`,
    '--remote-debugging-pipe',
    'about:blank',
  ],
  { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
);
let chromeStderr = '';
chrome.stdio[2].on('data', (d) => { chromeStderr += d.toString(); });
const toChrome = chrome.stdio[3];
const fromChrome = chrome.stdio[4];

let nextId = 1;
const pending = new Map();
const events = [];
const waiters = [];
let buffer = '';
fromChrome.on('data', (chunk) => {
  buffer += chunk.toString('utf8');
  let end;
  while ((end = buffer.indexOf('\0')) >= 0) {
    const message = JSON.parse(buffer.slice(0, end));
    buffer = buffer.slice(end + 1);
    if (message.id !== undefined && pending.has(message.id)) {
      const { resolve, reject } = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) reject(new Error(`${JSON.stringify(message.error)}`));
      else resolve(message.result);
    } else if (message.method) {
      events.push(message);
      for (const waiter of waiters.splice(0)) waiter(message);
    }
  }
});

function send(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  toChrome.write(JSON.stringify({ id, method, params, sessionId }) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

function waitFor(method, sessionId, ms) {
  return new Promise((resolve, reject) => {
    const found = events.find((e) => e.method === method && e.sessionId === sessionId);
    if (found) return resolve(found);
    const timer = setTimeout(() => reject(new Error(`no ${method} within ${ms} ms`)), ms);
    const watch = (e) => {
      if (e.method === method && e.sessionId === sessionId) {
        clearTimeout(timer);
        resolve(e);
      } else waiters.push(watch);
    };
    waiters.push(watch);
  });
}

const CHECKS = `(() => {
  const text = (el) => (el ? el.textContent.trim() : '');
  const failures = [...document.querySelectorAll('article.failure')];
  const withoutTimeline = failures
    .filter((a) => {
      const svg = a.querySelector('svg.timeline[role="img"]');
      if (!svg) return true;
      const box = svg.getBoundingClientRect();
      return box.width < 100 || box.height < 20;
    })
    .map((a) => text(a.querySelector('h3')));
  const pictures = [...document.querySelectorAll('svg[role="img"]')];
  const unlabelled = pictures
    .filter((svg) => {
      const ids = (svg.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean);
      return ids.length < 2 || !ids.every((id) => text(document.getElementById(id)));
    })
    .map((svg) => svg.id || svg.getAttribute('aria-labelledby'));
  const nowhere = [...document.querySelectorAll('a[href^="#"]')]
    .map((a) => a.getAttribute('href').slice(1))
    .filter((id) => !document.getElementById(decodeURIComponent(id)));
  const ids = [...document.querySelectorAll('[id]')].map((e) => e.id);
  const duplicateIds = ids.filter((id, i) => ids.indexOf(id) !== i);
  return {
    title: document.title,
    failures: failures.length,
    withoutTimeline,
    pictures: pictures.length,
    unlabelled,
    nowhere: [...new Set(nowhere)],
    duplicateIds: [...new Set(duplicateIds)],
    matrixCells: document.querySelectorAll('table.matrix td a').length,
    height: document.documentElement.scrollHeight,
  };
})()`;

async function evaluate(expression, sessionId) {
  const result = await send('Runtime.evaluate', { expression, returnByValue: true }, sessionId);
  if (result.exceptionDetails) throw new Error(`page script failed: ${JSON.stringify(result.exceptionDetails)}`);
  return result.result.value;
}

async function open(url, sessionId) {
  const loaded = waitFor('Page.loadEventFired', sessionId, 30000);
  await send('Page.navigate', { url }, sessionId);
  await loaded;
  events.splice(0, events.length, ...events.filter((e) => e.method !== 'Page.loadEventFired'));
}

async function shoot(selector, file, sessionId) {
  const box = await evaluate(
    `(() => { const el = document.querySelector(${JSON.stringify(selector)});
       if (!el) return null;
       for (let d = el.closest('details'); d; d = d.parentElement.closest('details')) d.open = true;
       el.scrollIntoView();
       const r = el.getBoundingClientRect();
       return { x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height }; })()`,
    sessionId,
  );
  if (!box) return { selector, file, error: 'no such element' };
  const clip = { x: Math.max(0, box.x - 8), y: Math.max(0, box.y - 8), width: box.width + 16, height: Math.min(box.height + 16, 12000), scale: 1 };
  const shot = await send('Page.captureScreenshot', { format: 'png', clip, captureBeyondViewport: true }, sessionId);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, Buffer.from(shot.data, 'base64'));
  return { selector, file, width: Math.round(clip.width), height: Math.round(clip.height) };
}

const timeout = setTimeout(() => {
  process.stderr.write(`check-page: timed out\n${chromeStderr}`);
  chrome.kill('SIGKILL');
  process.exit(3);
}, 120000);

try {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  await send('Page.enable', {}, sessionId);
  await send('Runtime.enable', {}, sessionId);
  await send('Log.enable', {}, sessionId);
  const url = pathToFileURL(args.page).href;
  await open(url, sessionId);
  const checks = await evaluate(CHECKS, sessionId);
  const shots = [];
  for (const { selector, file } of args.shots) shots.push(await shoot(selector, file, sessionId));
  if (args.full) shots.push(await shoot('body', args.full, sessionId));
  if (args.top) {
    await evaluate('window.scrollTo(0, 0)', sessionId);
    const shot = await send('Page.captureScreenshot', { format: 'png' }, sessionId);
    fs.writeFileSync(args.top, Buffer.from(shot.data, 'base64'));
    shots.push({ selector: '(the first screen)', file: args.top });
  }
  // A link into a folded scenario must show it: the browser opens the details around it.
  const revealed = [];
  for (const fragment of args.reveal) {
    // The same document: no load, a navigation within it.
    const moved = waitFor('Page.navigatedWithinDocument', sessionId, 30000);
    await send('Page.navigate', { url: `${url}#${fragment}` }, sessionId);
    await moved;
    events.splice(0, events.length, ...events.filter((e) => e.method !== 'Page.navigatedWithinDocument'));
    await new Promise((r) => setTimeout(r, 300));
    const shown = await evaluate(
      `(() => { const el = document.getElementById(${JSON.stringify(fragment)});
         return !!el && el.getClientRects().length > 0 && el.offsetHeight > 0; })()`,
      sessionId,
    );
    revealed.push({ fragment, shown });
  }
  const errors = events
    .filter((e) => e.sessionId === sessionId)
    .filter(
      (e) =>
        e.method === 'Runtime.exceptionThrown' ||
        (e.method === 'Runtime.consoleAPICalled' && ['error', 'assert'].includes(e.params.type)) ||
        (e.method === 'Log.entryAdded' && e.params.entry.level === 'error'),
    )
    .map((e) => JSON.stringify(e.params).slice(0, 600));
  process.stdout.write(JSON.stringify({ browser: 'chromium', url, errors, checks, shots, revealed }) + '\n');
  await send('Browser.close').catch(() => {});
} catch (e) {
  process.stderr.write(`check-page: ${e.stack || e}\n--- chromium's stderr\n${chromeStderr}\n`);
  chrome.kill('SIGKILL');
  clearTimeout(timeout);
  process.exit(2);
}
clearTimeout(timeout);
chrome.on('exit', () => fs.rmSync(profileDir, { recursive: true, force: true }));
setTimeout(() => chrome.kill('SIGKILL'), 3000).unref();
