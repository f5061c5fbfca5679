// Splits a raw WikiText file (wiki.train.raw, wiki.valid.raw, wiki.test.raw) into articles and
// writes them as a document stream on standard output, for `./tokenizer shard`.
//
//   node data/wikitext_docs.js FILE
//
// An article starts at a title line, " = Title = " (a space, exactly one '=' and a space on
// each side); " = = Section = = " and deeper headings belong to the article they are in. An
// article runs from its title line up to the next title line, its bytes unchanged. Text before
// the first title is a document of its own only if it is not blank.
//
// Document stream: per document, its length in bytes (decimal), a newline, then the bytes.
'use strict';
const fs = require('fs');

const SPACE = 0x20, EQUALS = 0x3d, NEWLINE = 0x0a;

// is buf[s, e) (one line, without its newline) an article title?
function isTitle(buf, s, e) {
  if (e - s < 7) return false;
  const opens = buf[s] === SPACE && buf[s + 1] === EQUALS && buf[s + 2] === SPACE && buf[s + 3] !== EQUALS;
  const closes = buf[e - 3] === SPACE && buf[e - 2] === EQUALS && buf[e - 1] === SPACE && buf[e - 4] !== EQUALS;
  return opens && closes;
}

function isBlank(buf, s, e) {
  for (let i = s; i < e; i++) if (buf[i] !== SPACE && buf[i] !== NEWLINE) return false;
  return true;
}

function writeDocument(buf, s, e) {
  process.stdout.write(`${e - s}\n`);
  process.stdout.write(buf.subarray(s, e));
}

function main() {
  const args = process.argv.slice(2);
  if (args.length !== 1) {
    process.stderr.write('error: usage: node data/wikitext_docs.js FILE\n');
    process.exit(1);
  }
  let buf;
  try {
    buf = fs.readFileSync(args[0]);
  } catch (err) {
    process.stderr.write(`error: cannot read ${args[0]} (${err.code || err.message})\n`);
    process.exit(1);
  }
  let docStart = 0, lineStart = 0;
  while (lineStart < buf.length) {
    let lineEnd = buf.indexOf(NEWLINE, lineStart);
    if (lineEnd < 0) lineEnd = buf.length;
    if (isTitle(buf, lineStart, lineEnd) && lineStart > docStart) {
      if (docStart > 0 || !isBlank(buf, 0, lineStart)) writeDocument(buf, docStart, lineStart);
      docStart = lineStart;
    }
    lineStart = lineEnd + 1;
  }
  if (buf.length > docStart && (docStart > 0 || !isBlank(buf, 0, buf.length))) writeDocument(buf, docStart, buf.length);
}

main();
