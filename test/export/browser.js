#!/usr/bin/env node
// browser.js FILE PNG NAME [HOSTILE...]: opens a flame graph (tracer --format flamegraph) in
// headless Chromium, Debian's /usr/bin/chromium (CHROMIUM overrides), and reports as JSON what
// a person would see, for test/integration/flame_test.rb:
//   {"viewport":{...},"root":{box},"frames":{"NAME":{box, label, shown}}, "details":"...",
//    "matched":"...", "highlighted":N, "zoomed":{box}, "requests":[urls], "console":[...],
//    "errors":[...], "dialogs":[...], "marker":null, "screenshots":[PNG, PNG-search, PNG-zoom]}
// NAME is the frame to look at: its label, a hover over it, a search for it, a click on it.
// HOSTILE names are looked for too: their text must be there as text, and the page's marker
// (window.__pwned, which a name that ran as code would set) must stay unset.
//
// Chromium is driven through its DevTools protocol over a pipe (--remote-debugging-pipe: JSON
// messages ended by a NUL on fds 3 and 4), with no npm package: nothing to download, no
// browser of a pinned version. Each run has a fresh profile directory, removed at the end.
'use strict'

const { spawn } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const zlib = require('zlib')

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium'
const DEADLINE_MS = Number(process.env.BROWSER_DEADLINE_MS || 90000)
const WIDTH = 1280
const HEIGHT = 900

function fail(msg) {
  process.stderr.write(`browser.js: ${msg}\n`)
  process.exit(2)
}

class Browser {
  constructor() {
    this.profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tracer-chromium-'))
    this.proc = spawn(CHROMIUM, [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-extensions', '--disable-default-apps', '--mute-audio', '--hide-scrollbars',
      `--user-data-dir=${this.profile}`, `--window-size=${WIDTH},${HEIGHT}`,
      '--remote-debugging-pipe', 'about:blank',
    ], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true })
    this.exit = new Promise(resolve => this.proc.on('exit', resolve))
    this.stderr = ''
    this.proc.stderr.on('data', d => { this.stderr = (this.stderr + d).slice(-4000) })
    this.proc.on('exit', (code, sig) => {
      this.exited = true
      for (const { reject } of this.pending.values()) reject(new Error(`chromium exited (${code ?? sig}): ${this.stderr}`))
    })
    this.proc.on('error', e => fail(`cannot run ${CHROMIUM}: ${e.message} (Debian's chromium package: script/deps test)`))
    this.pending = new Map()
    this.listeners = []
    this.next = 1
    this.buf = Buffer.alloc(0)
    this.proc.stdio[4].on('data', d => this.read(d))
  }

  read(d) {
    this.buf = Buffer.concat([this.buf, d])
    let end
    while ((end = this.buf.indexOf(0)) >= 0) {
      const msg = JSON.parse(this.buf.subarray(0, end).toString('utf8'))
      this.buf = this.buf.subarray(end + 1)
      if (msg.id && this.pending.has(msg.id)) {
        const { resolve, reject } = this.pending.get(msg.id)
        this.pending.delete(msg.id)
        if (msg.error) reject(new Error(`${msg.error.message} ${msg.error.data || ''}`))
        else resolve(msg.result)
      } else if (msg.method) {
        this.listeners.forEach(l => l(msg))
      }
    }
  }

  send(method, params = {}, sessionId) {
    const id = this.next++
    const msg = { id, method, params }
    if (sessionId) msg.sessionId = sessionId
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.proc.stdio[3].write(JSON.stringify(msg) + '\0')
    })
  }

  // Resolves with the first event named method (of the session) for which pred holds.
  once(method, sessionId, pred = () => true) {
    return new Promise(resolve => {
      const l = msg => {
        if (msg.method === method && msg.sessionId === sessionId && pred(msg.params)) {
          this.listeners = this.listeners.filter(x => x !== l)
          resolve(msg.params)
        }
      }
      this.listeners.push(l)
    })
  }

  // Chromium's own processes (its group: it was started detached) go first, then its profile,
  // which they write to until they are gone.
  async close() {
    if (!this.exited) {
      try { await Promise.race([this.send('Browser.close'), new Promise(r => setTimeout(r, 5000))]) } catch (e) { /* gone */ }
      try { process.kill(-this.proc.pid, 'SIGKILL') } catch (e) { /* gone */ }
      await Promise.race([this.exit, new Promise(r => setTimeout(r, 10000))])
    }
    try { process.kill(-this.proc.pid, 'SIGKILL') } catch (e) { /* the group is gone */ }
    fs.rmSync(this.profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
  }
}

// The colour of a 1x1 PNG's pixel, "rgb(r,g,b)". Its one row has one pixel: whatever its
// filter, the bytes after the filter byte are the pixel (no left or upper neighbour to add).
function pixelOf(png) {
  let at = 8, idat = []
  let type
  while (at < png.length) {
    const len = png.readUInt32BE(at)
    type = png.toString('latin1', at + 4, at + 8)
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + len))
    at += 12 + len
  }
  const row = zlib.inflateSync(Buffer.concat(idat))
  return `rgb(${row[1]},${row[2]},${row[3]})`
}

// What the page shows of the frame named name: its box, its label, whether it is drawn.
const LOOK = `(function (name) {
  var gs = document.querySelectorAll('#frames g.f'), out = null;
  for (var i = 0; i < gs.length; i++) {
    var t = gs[i].querySelector('title').textContent.split('\\n')[0];
    if (t !== name) continue;
    var r = gs[i].querySelector('rect').getBoundingClientRect();
    var cand = { x: r.x, y: r.y, width: r.width, height: r.height,
      label: gs[i].querySelector('text').textContent, shown: getComputedStyle(gs[i]).display !== 'none',
      title: gs[i].querySelector('title').textContent };
    if (!out || cand.width > out.width) out = cand;
  }
  return out;
})`

async function main() {
  const [file, png, name, ...hostile] = process.argv.slice(2)
  if (!file || !png || !name) fail('usage: browser.js FILE PNG NAME [HOSTILE...]')
  const b = new Browser()
  const timer = setTimeout(() => {
    try { process.kill(-b.proc.pid, 'SIGKILL') } catch (e) { /* gone */ }
    setTimeout(() => {
      fs.rmSync(b.profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 })
      fail(`no result within ${DEADLINE_MS} ms: ${b.stderr}`)
    }, 500)
  }, DEADLINE_MS)
  const result = { console: [], errors: [], dialogs: [], requests: [], screenshots: [] }
  try {
    const { targetId } = await b.send('Target.createTarget', { url: 'about:blank' })
    const { sessionId: s } = await b.send('Target.attachToTarget', { targetId, flatten: true })
    b.listeners.push(msg => {
      if (msg.sessionId !== s) return
      if (msg.method === 'Runtime.consoleAPICalled')
        result.console.push(msg.params.args.map(a => a.value ?? a.description).join(' '))
      else if (msg.method === 'Runtime.exceptionThrown')
        result.errors.push(msg.params.exceptionDetails.exception?.description || msg.params.exceptionDetails.text)
      else if (msg.method === 'Page.javascriptDialogOpening') {
        result.dialogs.push(msg.params.message)
        b.send('Page.handleJavaScriptDialog', { accept: false }, s)
      } else if (msg.method === 'Network.requestWillBeSent')
        result.requests.push(msg.params.request.url)
    })
    await b.send('Page.enable', {}, s)
    await b.send('Runtime.enable', {}, s)
    await b.send('Network.enable', {}, s)
    await b.send('Emulation.setDeviceMetricsOverride', { width: WIDTH, height: HEIGHT, deviceScaleFactor: 1, mobile: false }, s)
    const loaded = b.once('Page.loadEventFired', s)
    await b.send('Page.navigate', { url: 'file://' + path.resolve(file) }, s)
    await loaded
    const evaluate = async expr => {
      const r = await b.send('Runtime.evaluate', { expression: expr, returnByValue: true }, s)
      if (r.exceptionDetails) throw new Error(`${expr}: ${r.exceptionDetails.text}`)
      return r.result.value
    }
    // FULL_PAGE=1: the whole picture, however tall, for documentation; else what the window shows.
    const shot = async suffix => {
      const out = png.replace(/\.png$/, '') + suffix + '.png'
      const clip = process.env.FULL_PAGE ? { x: 0, y: 0, width: result.svg.width, height: result.svg.height, scale: 1 } : undefined
      const { data } = await b.send('Page.captureScreenshot', { format: 'png', clip, captureBeyondViewport: !!clip }, s)
      fs.writeFileSync(out, Buffer.from(data, 'base64'))
      result.screenshots.push(out)
    }
    // What a person sees at a point: the pixel's colour on the screen, and the frame there.
    const see = async (x, y) => {
      const { data } = await b.send('Page.captureScreenshot', { format: 'png', clip: { x, y, width: 1, height: 1, scale: 1 } }, s)
      const frame = await evaluate(`(function () { var e = document.elementFromPoint(${x}, ${y});
        var g = e && e.closest ? e.closest('g.f') : null;
        return g ? g.querySelector('title').textContent.split('\\n')[0] : null; })()`)
      return { pixel: pixelOf(Buffer.from(data, 'base64')), frame, fill: null }
    }
    // The top row of a frame's box: below the gap above it, above its label's glyphs.
    const seeFrame = async (f, n) => {
      if (!f) return null
      const r = await see(Math.round(f.x + f.width / 2), Math.floor(f.y) + 1)
      r.fill = await evaluate(`(function (n) { var gs = document.querySelectorAll('#frames g.f');
        for (var i = 0; i < gs.length; i++) if (gs[i].querySelector('title').textContent.split('\\n')[0] === n)
          return gs[i].querySelector('rect').getAttribute('fill'); return null; })(${JSON.stringify(n)})`)
      return r
    }
    const mouse = async (type, x, y) =>
      b.send('Input.dispatchMouseEvent', { type, x, y, button: type === 'mouseMoved' ? 'none' : 'left', clickCount: 1 }, s)

    result.viewport = await evaluate('({ width: innerWidth, height: innerHeight })')
    // From the request to the end of the load event: the page's script has run by then.
    result.load_ms = await evaluate("(function () { var n = performance.getEntriesByType('navigation')[0]; return n ? Math.round(n.loadEventEnd - n.startTime) : null; })()")
    result.frames_drawn = await evaluate("document.querySelectorAll('#frames g.f').length")
    result.svg = await evaluate("(function () { var r = document.getElementById('flame').getBoundingClientRect(); return { x: r.x, width: r.width, height: r.height }; })()")
    result.root = await evaluate(`${LOOK}('all')`)
    result.frames = {}
    for (const n of [name, ...hostile]) result.frames[n] = await evaluate(`${LOOK}(${JSON.stringify(n)})`)
    result.seen = { root: await seeFrame(result.root, 'all'), frame: await seeFrame(result.frames[name], name) }
    await shot('')

    const f = result.frames[name]
    if (f) {
      const cx = f.x + Math.min(f.width / 2, 40), cy = f.y + f.height / 2
      await mouse('mouseMoved', cx, cy)
      result.details = await evaluate("document.getElementById('details').textContent")
      await b.send('Runtime.evaluate', { expression: "document.getElementById('search').focus()" }, s)
      await b.send('Input.insertText', { text: name }, s)
      result.matched = await evaluate("document.getElementById('matched').textContent")
      result.highlighted = await evaluate("document.querySelectorAll('#frames rect[fill=\"rgb(230,0,230)\"]').length")
      await mouse('mouseMoved', 1, 1)
      result.seen.found = await see(Math.round(f.x + f.width / 2), Math.floor(f.y) + 1)
      await shot('-search')
      await mouse('mousePressed', cx, cy)
      await mouse('mouseReleased', cx, cy)
      result.zoomed = await evaluate(`${LOOK}(${JSON.stringify(name)})`)
      result.root_zoomed = await evaluate(`${LOOK}('all')`)
      await shot('-zoom')
      await b.send('Input.dispatchKeyEvent', { type: 'keyDown', key: 'Escape', code: 'Escape', windowsVirtualKeyCode: 27 }, s)
      result.unzoomed = await evaluate(`${LOOK}(${JSON.stringify(name)})`)
    }
    result.marker = await evaluate('window.__pwned === undefined ? null : String(window.__pwned)')
    result.title = await evaluate('document.title')
  } finally {
    await b.close()
    clearTimeout(timer)
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch(e => fail(e && e.stack ? e.stack : String(e)))
