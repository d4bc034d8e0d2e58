#!/usr/bin/env node
// check.js FILE [--schema] [--summary]: loads a tracer export with speedscope's own importer
// and prints what speedscope understood, as JSON, for test/integration/export_test.rb:
//   {"importer":"...","format":"speedscope json file","schema_errors":[...],
//    "profiles":[{"name":"...","total":N,"calls":[{"name":"...","depth":D,"start":S,"end":E}...]}]}
// --summary gives each profile's number of calls and of those not inside their caller
// ("unnested") instead of its calls, for big files.
// speedscope imports speedscope files, Chrome trace events, collapsed stacks and gzipped pprof
// profiles, guessing the format from the content as its web page does. --schema also
// validates the file against speedscope's published JSON schema (shipped in the same npm
// package) with ajv.
//
// speedscope's npm package ships only its web app: one browser bundle whose importer is not
// exported. The bundle is run in a node vm with a stub DOM, after one line is added at its
// top that hands out the importer behind the app's "loadFileFromBase64" hook (the function
// the speedscope CLI uses). The bundle's version is pinned in package-lock.json; if a new one
// no longer has that hook, this script says so instead of guessing.
'use strict'

const fs = require('fs')
const path = require('path')
const vm = require('vm')

const RELEASE = path.join(__dirname, 'node_modules', 'speedscope', 'dist', 'release')

function fail(msg) {
  process.stderr.write(`check.js: ${msg}\n`)
  process.exit(2)
}

function loadImporter(logs) {
  const bundle = fs.readdirSync(RELEASE).find(f => /^speedscope-.*\.js$/.test(f))
  if (!bundle) fail(`no speedscope bundle in ${RELEASE}`)
  const src = fs.readFileSync(path.join(RELEASE, bundle), 'utf8')
  const hook = /loadFileFromBase64:\((\w+),(\w+)\)=>\{this\.loadProfile\(\(\)=>(\w+)\(\1,\2\)\)\}/.exec(src)
  const head = '"use strict";(()=>{'
  if (!hook || !src.startsWith(head)) fail(`${bundle}: speedscope's loadFileFromBase64 hook not found`)

  // Anything the app touches while it starts: every property is itself, every call returns it.
  const any = new Proxy(function () {}, {
    get: (_, k) => (k === Symbol.toPrimitive ? () => '' : any),
    apply: () => any,
    construct: () => any,
  })
  const ctx = {
    console: { log: (...a) => logs.push(a.join(' ')), warn: (...a) => logs.push(a.join(' ')),
               error: (...a) => logs.push(a.join(' ')), info() {}, debug() {} },
    setTimeout, clearTimeout, setInterval, clearInterval, queueMicrotask,
    TextDecoder, TextEncoder, atob, btoa, URL, Promise,
    document: any, navigator: { userAgent: 'node' },
    location: { hash: '', search: '', href: 'file:///', protocol: 'file:' },
    localStorage: { getItem: () => null, setItem() {}, removeItem() {} },
    matchMedia: () => ({ matches: false, addEventListener() {}, addListener() {} }),
    addEventListener() {}, removeEventListener() {},
    requestAnimationFrame: () => 0,
  }
  ctx.window = ctx.self = ctx.globalThis = ctx
  vm.createContext(ctx)
  const patched = head + `Object.defineProperty(globalThis,"__importer",{get:()=>${hook[3]}});` +
    src.slice(head.length)
  try {
    vm.runInContext(patched, ctx, { filename: bundle })
  } catch (e) {
    // The app's rendering needs a real DOM and fails; the importer is defined before that.
  }
  if (typeof ctx.__importer !== 'function') fail('speedscope importer not reachable')
  return ctx.__importer
}

function validateSchema(text) {
  const Ajv = require('ajv')
  const schema = JSON.parse(fs.readFileSync(path.join(RELEASE, 'file-format-schema.json'), 'utf8'))
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema)
  return validate(JSON.parse(text)) ? [] : validate.errors.map(e => `${e.instancePath} ${e.message}`)
}

// Every call in the profile, in the order speedscope replays them, with its nesting depth.
function calls(profile) {
  const out = []
  const stack = []
  profile.forEachCall(
    (node, t) => {
      stack.push(out.length)
      out.push({ name: node.frame.name, depth: stack.length - 1, start: t, end: null })
    },
    (node, t) => {
      out[stack.pop()].end = t
    },
  )
  return out
}

// A profile's size, and the calls that end after their caller or begin before it.
function summary(profile) {
  const stack = []
  let n = 0, unnested = 0
  profile.forEachCall(
    (node, t) => {
      n++
      if (stack.length && t < stack[stack.length - 1]) unnested++
      stack.push(t)
    },
    () => stack.pop(),
  )
  return { name: profile.getName(), total: profile.getTotalWeight(), ncalls: n, unnested }
}

async function main() {
  const [file, ...flags] = process.argv.slice(2)
  if (!file) fail('usage: check.js FILE [--schema]')
  const data = fs.readFileSync(file)
  const schemaErrors = flags.includes('--schema') ? validateSchema(data.toString('utf8')) : null
  const logs = []
  const importer = loadImporter(logs)
  let group
  try {
    group = await importer(path.basename(file), data.toString('base64'))
  } catch (e) {
    fail(`speedscope rejected ${file}: ${e && e.stack ? e.stack : e}` +
         (schemaErrors && schemaErrors.length ? `\nschema: ${schemaErrors.join('; ')}` : ''))
  }
  if (!group) fail(`speedscope could not import ${file}: ${logs.join('; ')}`)
  const version = require(path.join(RELEASE, '..', '..', 'package.json')).version
  const format = (logs.find(l => l.startsWith('Importing as ')) || '').replace('Importing as ', '')
  const result = {
    importer: `speedscope ${version}`,
    format,
    warnings: logs.filter(l => /Tried|Warning|warn/i.test(l)),
    schema_errors: schemaErrors,
    name: group.name,
    profiles: group.profiles.map(p => flags.includes('--summary') ? summary(p)
      : { name: p.getName(), total: p.getTotalWeight(), calls: calls(p) }),
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch(e => fail(e && e.stack ? e.stack : String(e)))
