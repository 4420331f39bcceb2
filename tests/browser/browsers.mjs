// The browsers the dashboard is tested in, behind one small page API, so a
// test body runs unchanged in each:
//   chromium  Debian's Chromium, driven by playwright-core (chromium.mjs)
//   firefox   Debian's Firefox ESR, driven by puppeteer-core over WebDriver
//             BiDi (playwright-core's BiDi Firefox sends commands Firefox
//             ESR does not know, and its own Firefox build is not used)
// Each page collects its JavaScript errors and console errors in errors.
// keysActivateButtons is false in Firefox: a focused <button> there ignores
// the Enter and Space that WebDriver BiDi synthesizes (links follow Enter,
// forms submit on it; the same on a page holding nothing but a button).
// Selectors are CSS; what reads the page runs in the page, the same for both.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { launch as launchChromium } from './chromium.mjs';

export const browsers = ['chromium', 'firefox'];
export const executables = { chromium: '/usr/bin/chromium', firefox: '/usr/bin/firefox-esr' };

const WAIT = 30000;
const POLL = 100; // ms between checks of a waited-for condition

// What both drivers spell alike (their pages answer the same goto, reload,
// evaluate, focus, keyboard.press, screenshot and events), and the reading
// of the page, written once over evaluate().
class Page {
  constructor(name, browser, page) {
    this.name = name;
    this.browser = browser;
    this.page = page;
    this.errors = [];
    this.keysActivateButtons = name !== 'firefox';
    page.setDefaultTimeout(WAIT);
    page.on('pageerror', (e) => this.errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') this.errors.push(m.text()); });
  }

  goto(url) { return this.page.goto(url); }
  reload() { return this.page.reload(); }
  evaluate(fn, arg) { return this.page.evaluate(fn, arg); }
  focus(sel) { return this.page.focus(sel); }
  press(key) { return this.page.keyboard.press(key); }
  screenshot(file) { return this.page.screenshot({ path: file, fullPage: true }); }

  url() { return this.evaluate(() => location.href); }
  text(sel) { return this.evaluate((s) => document.querySelector(s)?.textContent ?? null, sel); }
  texts(sel) { return this.evaluate((s) => [...document.querySelectorAll(s)].map((e) => e.textContent), sel); }
  count(sel) { return this.evaluate((s) => document.querySelectorAll(s).length, sel); }
  attr(sel, name) { return this.evaluate(([s, n]) => document.querySelector(s)?.getAttribute(n) ?? null, [sel, name]); }
  value(sel) { return this.evaluate((s) => document.querySelector(s)?.value ?? null, sel); }
  visible(sel) { return this.evaluate(isVisible, sel); }

  // Waits until the canvas under sel has more than min pixels within 40 of
  // the colour rgb: drawn data, not only axes and grid.
  drawn(sel, rgb, min) {
    return this.waitFor(([s, c, least]) => {
      const canvas = document.querySelector(`${s} canvas`);
      if (!canvas) return false;
      const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (d[i + 3] > 200 && Math.abs(d[i] - c[0]) < 40 && Math.abs(d[i + 1] - c[1]) < 40 && Math.abs(d[i + 2] - c[2]) < 40) n++;
      return n > least;
    }, [sel, rgb, min]);
  }
  waitVisible(sel) { return this.waitFor(isVisible, sel); }

  // Waits until fn(arg), run in the page, is true; past the deadline the
  // error says what the page shows.
  async waitFor(fn, arg) {
    try {
      return await this.waitForFunction(fn, arg);
    } catch (e) {
      const shown = await this.evaluate(() => `${location.href}: ${document.querySelector('main')?.innerText}`)
        .catch((e2) => `(unreadable: ${e2.message})`);
      e.message += `\n  waited for: ${fn}\n  the page at ${shown.slice(0, 1500)}`;
      throw e;
    }
  }
}

function isVisible(sel) {
  const e = document.querySelector(sel);
  return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
}

class PlaywrightPage extends Page {
  waitForFunction(fn, arg) { return this.page.waitForFunction(fn, arg, { timeout: WAIT, polling: POLL }); }
  click(sel) { return this.page.click(sel); }
  fill(sel, value) { return this.page.fill(sel, value); }
  select(sel, value) { return this.page.selectOption(sel, value); }
  viewport(width, height) { return this.page.setViewportSize({ width, height }); }

  // Clicks sel and resolves to the file the page saved: { name, text }.
  async download(sel) {
    const [dl] = await Promise.all([this.page.waitForEvent('download', { timeout: WAIT }), this.page.click(sel)]);
    return { name: dl.suggestedFilename(), text: fs.readFileSync(await dl.path(), 'utf8') };
  }

  close() { return this.browser.close(); }
}

class PuppeteerPage extends Page {
  constructor(name, browser, page, dir) {
    super(name, browser, page);
    this.dir = dir; // the profile and the downloads, removed on close
    this.downloads = path.join(dir, 'downloads');
  }

  waitForFunction(fn, arg) { return this.page.waitForFunction(fn, { timeout: WAIT, polling: POLL }, arg); }
  click(sel) { return this.page.locator(sel).click(); }
  fill(sel, value) { return this.page.locator(sel).fill(value); }
  select(sel, value) { return this.page.select(sel, value); }
  viewport(width, height) { return this.page.setViewport({ width, height }); }

  // The profile saves downloads to this.downloads without asking; a file is
  // complete once Firefox has renamed it from its .part name.
  async download(sel) {
    const before = new Set(fs.readdirSync(this.downloads));
    await this.click(sel);
    const deadline = Date.now() + WAIT;
    for (;;) {
      const files = fs.readdirSync(this.downloads).filter((f) => !before.has(f));
      const done = files.find((f) => !f.endsWith('.part'));
      if (done && !files.some((f) => f.endsWith('.part')))
        return { name: done, text: fs.readFileSync(path.join(this.downloads, done), 'utf8') };
      if (Date.now() > deadline) throw new Error(`no download in ${WAIT} ms (files: ${files.join(', ') || 'none'})`);
      await new Promise((resolve) => setTimeout(resolve, POLL));
    }
  }

  async close() {
    await this.browser.close();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// Starts the browser named (one of browsers) headless with a fresh profile
// and opens one page of width × height. The caller closes it.
export async function open(name, { width, height }) {
  if (name === 'chromium') {
    const browser = await launchChromium();
    try {
      return new PlaywrightPage(name, browser, await browser.newPage({ viewport: { width, height } }));
    } catch (e) {
      await browser.close();
      throw e;
    }
  }
  if (name !== 'firefox') throw new Error(`unknown browser '${name}' (known: ${browsers.join(', ')})`);
  // A directory of its own: the profile (new each time) and the downloads.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'simfarm-firefox-'));
  const downloads = path.join(dir, 'downloads');
  fs.mkdirSync(downloads);
  let browser;
  try {
    // puppeteer adds to the profile its preferences that turn updates,
    // telemetry and other network use off.
    browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath: executables.firefox,
      headless: true,
      timeout: WAIT,
      userDataDir: path.join(dir, 'profile'),
      extraPrefsFirefox: {
        'browser.download.folderList': 2,
        'browser.download.dir': downloads,
        'browser.download.useDownloadDir': true,
        'browser.download.always_ask_before_handling_new_types': false,
        'browser.download.start_downloads_in_tmp_dir': false,
        'browser.download.alwaysOpenPanel': false,
      },
    });
    // the page Firefox starts with keeps the window's size (1366 × 768)
    // until it is given one
    const [page] = await browser.pages();
    await page.setViewport({ width, height });
    return new PuppeteerPage(name, browser, page, dir);
  } catch (e) {
    await browser?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
