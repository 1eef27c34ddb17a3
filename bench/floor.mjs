// floor.mjs: the least an MCP server behind the TypeScript SDK can do to
// move a file, for BenchmarkTransferTS's "floor" row. It speaks MCP over
// stdio by hand (no SDK) and does only what any server must: an upload's
// base64 decoded and hashed; a download read, hashed, and served as
// base64 pages of 1 MiB by resources/read, as tandem serves them. What the
// TypeScript client then reaches is the ceiling of every server behind it.
//
// Usage: node floor.mjs DIR   (ssh_download of any path serves DIR/<its base name>)

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const dir = process.argv[2];
const page = 1 << 20;
const files = new Map();

function reply(id, result) {
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, result }) + '\n');
}
function text(id, obj) {
  reply(id, { content: [{ type: 'text', text: JSON.stringify(obj) }] });
}

const tools = ['ssh_connect', 'ssh_exec', 'ssh_upload', 'ssh_download'].map((name) => ({
  name, inputSchema: { type: 'object' },
}));

function handle(msg) {
  const { id, method, params } = msg;
  if (id === undefined) return; // a notification
  switch (method) {
    case 'initialize':
      return reply(id, { protocolVersion: params.protocolVersion, capabilities: { tools: {}, resources: {} }, serverInfo: { name: 'floor', version: '0' } });
    case 'tools/list':
      return reply(id, { tools });
    case 'resources/read': {
      const [uri, q] = params.uri.split('?page=');
      const buf = files.get(uri);
      const n = Number(q ?? 0);
      return reply(id, { contents: [{ uri: params.uri, mimeType: 'application/octet-stream', blob: buf.subarray(n * page, (n + 1) * page).toString('base64') }] });
    }
    case 'tools/call': {
      const a = params.arguments ?? {};
      switch (params.name) {
        case 'ssh_connect':
          return text(id, { success: true, sessionToken: 'floor' });
        case 'ssh_exec':
          return text(id, { success: true, result: { stdout: dir + '\n', exitCode: 0 } });
        case 'ssh_upload': {
          const b = Buffer.from(a.content, 'base64');
          return text(id, { success: true, bytes: b.length, sha256: createHash('sha256').update(b).digest('hex') });
        }
        case 'ssh_download': {
          const b = readFileSync(join(dir, basename(a.path)));
          const uri = 'floor://file/' + files.size;
          files.set(uri, b);
          return text(id, { success: true, bytes: b.length, sha256: createHash('sha256').update(b).digest('hex'),
            resource: { uri, pages: Math.ceil(b.length / page) } });
        }
      }
    }
  }
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: `floor: no ${method}` } }) + '\n');
}

// Lines are gathered as pieces and joined once: a 67 MB upload arrives in
// 64 KiB reads.
let pieces = [];
process.stdin.on('data', (chunk) => {
  let start = 0;
  for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
    pieces.push(chunk.subarray(start, nl));
    const line = Buffer.concat(pieces).toString('utf8');
    pieces = [];
    start = nl + 1;
    if (line.trim() !== '') handle(JSON.parse(line));
  }
  if (start < chunk.length) pieces.push(chunk.subarray(start));
});
process.stdin.on('end', () => process.exit(0));
