// Reference GPT-2 encoding with the npm package gpt-3-encoder, for the tests and the benchmark.
//
//   node ref_encode.js [options] PKG_DIR FILE    token ids of FILE, one per line
//   node ref_encode.js [options] PKG_DIR --stream FILE
//                                                 encodes each document of a document stream
//                                                 and prints "documents bytes tokens seconds"
// options:
//   --white-space   use Unicode White_Space for \s in GPT-2's pattern (what tiktoken and
//                   OpenAI's encoder do) instead of JavaScript's \s, which differs on U+0085
//                   and U+FEFF
//   --as-shipped    run the package exactly as shipped; by default its quadratic
//                   `bpe_tokens = bpe_tokens.concat(...)` is replaced by a push, which changes
//                   the speed on long texts but not the result
//
// PKG_DIR is the installed package (node_modules/gpt-3-encoder). Its Encoder.js is loaded from
// source so that the two edits above can be applied; each must match exactly once.
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

const WS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const SHIPPED_PATTERN = "/'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+/gu";
const WHITE_SPACE_PATTERN = `/'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+/gu`;
const SHIPPED_CONCAT = 'bpe_tokens = bpe_tokens.concat(new_tokens)';
const LINEAR_CONCAT = 'for (const t of new_tokens) { bpe_tokens.push(t) }';

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

// replaces the single occurrence of `from` in src, failing if there is not exactly one
function replaceOnce(src, from, to) {
  const at = src.indexOf(from);
  if (at < 0 || src.indexOf(from, at + 1) >= 0) fail(`Encoder.js does not contain exactly one '${from}'`);
  return src.slice(0, at) + to + src.slice(at + from.length);
}

// loads Encoder.js from source with the requested edits, as a module of its own directory
function loadEncoder(pkgDir, whiteSpace, asShipped) {
  const file = path.join(pkgDir, 'Encoder.js');
  if (!fs.existsSync(file)) fail(`${file} not found; run \`make vocab\``);
  let src = fs.readFileSync(file, 'utf8');
  if (whiteSpace) src = replaceOnce(src, SHIPPED_PATTERN, WHITE_SPACE_PATTERN);
  if (!asShipped) src = replaceOnce(src, SHIPPED_CONCAT, LINEAR_CONCAT);
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(pkgDir);
  m._compile(src, file);
  return m.exports;
}

// splits a document stream (per document: decimal byte length, newline, bytes) into strings
function readStream(file) {
  const buf = fs.readFileSync(file);
  const docs = [];
  let pos = 0;
  while (pos < buf.length) {
    const nl = buf.indexOf(10, pos);
    const len = nl < 0 ? NaN : Number(buf.toString('latin1', pos, nl));
    if (!Number.isInteger(len) || nl + 1 + len > buf.length) fail(`${file}: bad document stream at byte ${pos}`);
    docs.push(buf.toString('utf8', nl + 1, nl + 1 + len));
    pos = nl + 1 + len;
  }
  return docs;
}

function main() {
  const args = process.argv.slice(2);
  const whiteSpace = args.includes('--white-space');
  const asShipped = args.includes('--as-shipped');
  const stream = args.includes('--stream');
  const rest = args.filter((a) => !a.startsWith('--'));
  if (rest.length !== 2) fail('usage: node ref_encode.js [--white-space] [--as-shipped] PKG_DIR [--stream] FILE');
  const encoder = loadEncoder(rest[0], whiteSpace, asShipped);
  if (stream) {
    const docs = readStream(rest[1]);
    let bytes = 0, tokens = 0;
    const t0 = process.hrtime.bigint();
    for (const d of docs) tokens += encoder.encode(d).length;
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    for (const d of docs) bytes += Buffer.byteLength(d, 'utf8');
    process.stdout.write(`${docs.length} ${bytes} ${tokens} ${seconds.toFixed(3)}\n`);
    return;
  }
  const ids = encoder.encode(fs.readFileSync(rest[1], 'utf8'));
  process.stdout.write(ids.length ? ids.join('\n') + '\n' : '');
}

main();
