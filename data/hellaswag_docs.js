// Reads HellaSwag's jsonl (hellaswag_val.jsonl: one example per line, with "ctx", "endings"
// and "label") and writes the example stream that `./tokenizer eval` turns into llm.c's eval
// file: per example a line "<label> <endings>", then the context and each ending as
// documents (byte length, newline, bytes). Each ending gets a leading space, as llm.c's
// dev/data/hellaswag.py tokenizes " " + ending.
//
//   node data/hellaswag_docs.js FILE
'use strict';
const fs = require('fs');

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

function writeDocument(text) {
  const bytes = Buffer.from(text, 'utf8');
  process.stdout.write(`${bytes.length}\n`);
  process.stdout.write(bytes);
}

function main() {
  const args = process.argv.slice(2);
  if (args.length !== 1) fail('usage: node data/hellaswag_docs.js FILE');
  let text;
  try {
    text = fs.readFileSync(args[0], 'utf8');
  } catch (err) {
    fail(`cannot read ${args[0]} (${err.code || err.message})`);
  }
  const lines = text.split('\n');
  let examples = 0;
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${args[0]} line ${i + 1}`;
    let ex;
    try {
      ex = JSON.parse(line);
    } catch (err) {
      fail(`${where}: not JSON (${err.message})`);
    }
    const endings = ex.endings;
    if (typeof ex.ctx !== 'string') fail(`${where}: "ctx" is not a string`);
    if (!Array.isArray(endings) || endings.length === 0 || !endings.every((e) => typeof e === 'string')) {
      fail(`${where}: "endings" is not a list of strings`);
    }
    if (!Number.isInteger(ex.label) || ex.label < 0 || ex.label >= endings.length) {
      fail(`${where}: "label" is not an index into the endings`);
    }
    process.stdout.write(`${ex.label} ${endings.length}\n`);
    writeDocument(ex.ctx);
    for (const e of endings) writeDocument(' ' + e);
    examples++;
  });
  if (examples === 0) fail(`${args[0]} holds no examples`);
}

main();
