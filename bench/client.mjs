// client.mjs: a TypeScript-SDK MCP client for tandem's latency benchmark
// (cmd/tandem BenchmarkTSClient). It shows what an agent built on
// @modelcontextprotocol/sdk pays per call, next to the go-sdk column.
//
// Usage: node client.mjs TANDEM-BINARY [TANDEM-ARGS...]
//        node client.mjs --http ENDPOINT-URL   (bearer token in $TANDEM_TOKEN)
// With $TANDEM_ROOTS (directories, ':'-separated) the client declares MCP
// roots and answers roots/list with them.
//
// It spawns tandem with the SDK's StdioClientTransport (or, with --http,
// reaches a running tandem over Streamable HTTP), lists the tools (as
// agents do, which also arms the SDK's output-schema validation), prints
// one ready line, then serves one JSON request per line on stdin with one
// JSON reply per line on stdout, in order:
//
//   {"op":"connect","name":"s1",...}     ssh_connect with these arguments
//     -> {"ok":true,"token":"..."}
//   {"op":"exec","session":"s1","command":"seq 1 100000","full":true}
//     -> {"ok":true,"ms":12.3,"fullMs":20.1,"bytes":588895,"sha256":"...",
//         "via":"inline"|"ssh_read_output"|"resources/read","exitCode":0}
//   {"op":"spawn","command":"echo hello"}  bash --noprofile --norc -c, from node
//     -> {"ok":true,"ms":1.2,"bytes":6}
//   {"op":"codec"}   JSON.stringify + JSON.parse of the last full output
//     -> {"ok":true,"ms":0.4,"bytes":588895}
//   {"op":"call","tool":"ssh_exec","args":{...}}   any tool, as is
//     -> {"ok":true,"ms":1.2,"reply":{...the tool's reply object...}}
//   {"op":"image","args":{...}}   ssh_download of an image
//     -> {"ok":true,"bytes":1234,"sha256":"...","reply":{...,"mimeType":"image/png"}}
//   {"op":"upload","file":"/path","args":{...}}   ssh_upload of the file's
//     bytes as base64 (encoded before the clock starts)
//     -> {"ok":true,"ms":812.3,"reply":{...}}
//   {"op":"download","args":{...}}   ssh_download, then every page of its
//     resource with resources/read, decoded to bytes
//     -> {"ok":true,"ms":401.2,"bytes":52428800,"sha256":"...","reply":{...}}
//   {"op":"cancel","tool":"ssh_exec","args":{...},"when":"/path"}
//     calls the tool, and cancels the call (AbortSignal, which sends
//     notifications/cancelled) once the file at "when" exists
//     -> {"ok":true,"error":"...the rejection the cancel gave the call..."}
//
// Any failure is {"ok":false,"error":"..."}. Times are taken here with
// performance.now(), so the pipe to the Go benchmark is not in them.
// stdout carries the protocol only; logs (and tandem's stderr) go to stderr.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [binary, ...args] = process.argv.slice(2);
if (!binary) {
  console.error('usage: node client.mjs TANDEM-BINARY [TANDEM-ARGS...]');
  process.exit(2);
}

// Largest chunk ssh_read_output serves per call.
const readChunk = 1 << 20;

/** send writes one protocol line to stdout. */
function send(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

/** payload is a tool reply's JSON object: structuredContent when the
 * server sent it (already parsed by the SDK), else content[0].text. */
function payload(res) {
  if (res.structuredContent) return res.structuredContent;
  const text = res.content?.[0]?.text;
  if (typeof text !== 'string') throw new Error(`reply without content: ${JSON.stringify(res).slice(0, 500)}`);
  return JSON.parse(text);
}

/** call invokes a tool and fails unless tandem says success. */
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  const r = payload(res);
  if (res.isError || !r.success) throw new Error(`${name}: ${JSON.stringify(r).slice(0, 1000)}`);
  return r;
}

/** chunk turns one delivered piece (text, or base64 when the bytes are not
 * UTF-8) into bytes. It runs after the clock stops. */
function chunk(data, encoding) {
  return encoding === 'base64' ? Buffer.from(data, 'base64') : Buffer.from(data, 'utf8');
}

/** readOutput reads a whole stream back with ssh_read_output, from offset
 * 0 until eof, and returns the pieces as delivered. */
async function readOutput(sess, commandId, stream) {
  const pieces = [];
  let offset = 0;
  for (;;) {
    const r = await call('ssh_read_output', {
      sessionName: sess.name, sessionToken: sess.token, commandId, stream, offset, maxBytes: readChunk,
    });
    pieces.push([r.data ?? '', r.encoding ?? r.dataEncoding]);
    if (r.eof) return pieces;
    if (!(r.bytes > 0)) throw new Error(`ssh_read_output made no progress at offset ${offset}: ${JSON.stringify(r).slice(0, 500)}`);
    offset += r.bytes;
  }
}

/** readPages reads every page of an output resource with resources/read. */
async function readPages(resource) {
  const pieces = [];
  for (let page = 0; page < Math.max(resource.pages, 1); page++) {
    const uri = page === 0 ? resource.uri : `${resource.uri}?page=${page}`;
    const res = await client.readResource({ uri });
    const c = res.contents[0];
    pieces.push(c.blob !== undefined ? [c.blob, 'base64'] : [c.text, undefined]);
  }
  return pieces;
}

/** exec runs one command with ssh_exec and, when full, reads back the whole
 * stdout however the reply delivers it. */
async function exec(req) {
  const sess = sessions.get(req.session);
  if (!sess) throw new Error(`no session ${req.session}`);
  const t0 = performance.now();
  const r = await call('ssh_exec', { sessionName: sess.name, sessionToken: sess.token, command: req.command });
  const t1 = performance.now();
  const res = r.result ?? {};
  let pieces = [[res.stdout ?? '', res.stdoutEncoding]];
  let via = 'inline';
  const resource = res.stdoutResource;
  if (req.full && resource) {
    const tool = readOutputTool && req.via !== 'resources/read';
    via = tool ? 'ssh_read_output' : 'resources/read';
    pieces = tool ? await readOutput(sess, r.commandId, 'stdout') : await readPages(resource);
  } else if (req.full && res.stdoutTruncated) {
    throw new Error(`stdout truncated with no resource to read it from: ${res.stdoutError ?? '(no stdoutError)'}`);
  }
  const t2 = performance.now();

  const out = Buffer.concat(pieces.map(([d, e]) => chunk(d, e)));
  if (req.full && resource && out.length !== resource.bytes) {
    throw new Error(`read ${out.length} bytes via ${via}, stdoutResource says ${resource.bytes}`);
  }
  if (req.full && res.stdoutBytes !== undefined && out.length !== res.stdoutBytes) {
    throw new Error(`read ${out.length} bytes via ${via}, stdoutBytes says ${res.stdoutBytes}`);
  }
  if (req.full) lastOutput = out.toString('utf8');
  return {
    ms: t1 - t0,
    fullMs: req.full ? t2 - t0 : undefined,
    bytes: out.length,
    sha256: createHash('sha256').update(out).digest('hex'),
    via,
    exitCode: res.exitCode,
  };
}

/** spawnBash is the local baseline: what a node agent pays to run the
 * command itself, without tandem. */
function spawnBash(command) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('bash', ['--noprofile', '--norc', '-c', command], { stdio: ['ignore', 'pipe', 'inherit'] });
    let bytes = 0;
    child.stdout.on('data', (d) => { bytes += d.length; });
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - t0;
      if (code !== 0) reject(new Error(`bash -c ${JSON.stringify(command)} exited ${code}`));
      else resolve({ ms, bytes });
    });
  });
}

/** codec times JSON-encoding the last full output string once and decoding
 * it back, in this process: the floor of any JSON transport for it. */
function codec() {
  if (lastOutput === undefined) throw new Error('codec: no full output yet');
  const t0 = performance.now();
  const back = JSON.parse(JSON.stringify(lastOutput));
  const ms = performance.now() - t0;
  if (back.length !== lastOutput.length) throw new Error('codec: round trip changed the string');
  return { ms, bytes: Buffer.byteLength(lastOutput) };
}

/** fetchFloor is the HTTP column's client floor: one POST with node's own
 * fetch (what the SDK's HTTP transport uses) to a handler that answers at
 * once, body read to the end. */
async function fetchFloor(url) {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
  });
  const body = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`fetch ${url}: ${res.status}`);
  return { ms, bytes: Buffer.byteLength(body) };
}

/** cancelCall calls a tool and cancels the call, as an agent whose user
 * interrupts it does, once the file req.when exists (the command has
 * started). It resolves with the call's rejection. */
async function cancelCall(req) {
  const ac = new AbortController();
  const call = client.callTool({ name: req.tool, arguments: req.args ?? {} }, undefined, { signal: ac.signal });
  const outcome = call.then(
    (res) => ({ settled: 'resolved', res }),
    (err) => ({ settled: 'rejected', err }),
  );
  const deadline = performance.now() + 15000;
  while (!existsSync(req.when)) {
    if (performance.now() > deadline) throw new Error(`cancel: ${req.when} never appeared`);
    const early = await Promise.race([outcome, new Promise((r) => setTimeout(() => r(undefined), 10))]);
    if (early) throw new Error(`cancel: the call ended before ${req.when} appeared: ${JSON.stringify(early.res ?? String(early.err))}`);
  }
  ac.abort(new Error('cancelled by the test'));
  const o = await outcome;
  if (o.settled === 'resolved') throw new Error(`cancel: the call resolved: ${JSON.stringify(o.res).slice(0, 500)}`);
  return { error: String(o.err?.message ?? o.err) };
}

/** handle serves one request line. */
async function handle(req) {
  switch (req.op) {
    case 'connect': {
      const { op, ...params } = req;
      const r = await call('ssh_connect', params);
      sessions.set(params.name, { name: params.name, token: r.sessionToken });
      return { token: r.sessionToken };
    }
    case 'adopt': // a session another client connected, by its name and token
      sessions.set(req.name, { name: req.name, token: req.token });
      return {};
    case 'exec':
      return exec(req);
    case 'spawn':
      return spawnBash(req.command);
    case 'codec':
      return codec();
    case 'fetch':
      return fetchFloor(req.url);
    case 'elicited':
      return { messages: elicited.splice(0) };
    case 'call': {
      const t0 = performance.now();
      const res = await client.callTool({ name: req.tool, arguments: req.args ?? {} });
      const ms = performance.now() - t0;
      return { ms, reply: payload(res), isError: res.isError === true };
    }
    case 'cancel':
      return cancelCall(req);
    case 'upload': {
      const content = (await readFile(req.file)).toString('base64');
      const t0 = performance.now();
      const r = await call('ssh_upload', { ...req.args, content, encoding: 'base64' });
      return { ms: performance.now() - t0, reply: r };
    }
    case 'download': {
      const t0 = performance.now();
      const r = await call('ssh_download', req.args ?? {});
      const pieces = r.resource ? await readPages(r.resource) : [[r.data ?? '', undefined]];
      const out = Buffer.concat(pieces.map(([d, e]) => chunk(d, e)));
      const ms = performance.now() - t0;
      return { ms, bytes: out.length, sha256: createHash('sha256').update(out).digest('hex'), reply: r };
    }
    case 'image': {
      // ssh_download of an image: the image block's bytes, as this SDK
      // hands them to an agent (base64 in data), decoded here.
      const res = await client.callTool({ name: 'ssh_download', arguments: req.args ?? {} });
      const r = payload(res);
      if (res.isError || !r.success) throw new Error(`ssh_download: ${JSON.stringify(r).slice(0, 1000)}`);
      const img = res.content.find((c) => c.type === 'image');
      if (!img) throw new Error(`ssh_download: no image block in ${JSON.stringify(res.content.map((c) => c.type))}`);
      const bytes = Buffer.from(img.data, 'base64');
      return { reply: { ...r, mimeType: img.mimeType }, bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
    }
    default:
      throw new Error(`unknown op ${JSON.stringify(req.op)}`);
  }
}

const sessions = new Map(); // name -> {name, token}
let lastOutput; // the last full stdout, for codec

const roots = (process.env.TANDEM_ROOTS ?? '').split(':').filter(Boolean);
// TANDEM_ELICIT, if set, is the JSON answer this client gives every
// elicitation (e.g. {"action":"accept","content":{"decision":"approve"}}).
const elicitAnswer = process.env.TANDEM_ELICIT ? JSON.parse(process.env.TANDEM_ELICIT) : undefined;
const elicited = []; // the messages of the elicitations answered, in order
const capabilities = {};
if (roots.length) capabilities.roots = { listChanged: true };
if (elicitAnswer) capabilities.elicitation = { form: {} };
const client = new Client({ name: 'tandem-bench-ts', version: '1' },
  Object.keys(capabilities).length ? { capabilities } : undefined);
if (elicitAnswer) {
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    elicited.push(req.params.message);
    return elicitAnswer;
  });
}
if (roots.length) {
  client.setRequestHandler(ListRootsRequestSchema, () => ({
    roots: roots.map((dir) => ({ uri: `file://${dir}`, name: dir })),
  }));
}
const transport = binary === '--http'
  ? new StreamableHTTPClientTransport(new URL(args[0]), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TANDEM_TOKEN ?? ''}` } },
  })
  : new StdioClientTransport({
    command: binary, args, stderr: 'inherit',
    // TANDEM_CPUPROFILE reaches tandem (the SDK passes on only a few
    // variables): a benchmark's CPU profile of the server.
    env: process.env.TANDEM_CPUPROFILE
      ? { ...getDefaultEnvironment(), TANDEM_CPUPROFILE: process.env.TANDEM_CPUPROFILE } : undefined,
  });
let readOutputTool = false;
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  readOutputTool = tools.some((t) => t.name === 'ssh_read_output');
  const server = client.getServerVersion();
  send({ ok: true, ready: true, server, tools: tools.map((t) => t.name), readOutput: readOutputTool });
} catch (err) {
  send({ ok: false, error: `connect to tandem: ${err.message}` });
  process.exit(1);
}

// Requests are served one at a time, in order: each reply is the line for
// the request before it.
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  try {
    send({ ok: true, ...(await handle(JSON.parse(line))) });
  } catch (err) {
    send({ ok: false, error: err?.stack ?? String(err) });
  }
}
await client.close();
