/*
The algorithmic tasks of the length-generalization benchmark (docs/tasks.md): their
vocabulary, their names and the header of the files that hold them. data/tasks.c writes
the files; the trainers train on them (llmc/dataloader.h: masked shards, the loss on the
answers only) and measure their accuracy by length (llmc/task_eval.h, -A).

An example is one row of a masked shard: BOS, the input, SEP, the answer, EOS, then PAD up
to the row's length. The scored targets are the answer's tokens and EOS, so a model must
also stop. One vocabulary serves every task, one character per token (TASK_TOKENS: token
t prints as its t-th character):

  _ PAD   ^ BOS   = SEP   $ EOS   + - * operators (cycle: moves -1, +1)   0-9 digits   a-z letters

A task file's header: the masked shard's words 0-4 (llmc/dataloader.h), then
  5 the task (TASK_*), 6 and 7 the shortest and longest length of its examples, 8 the seed
  it was drawn with, 9 its number of examples (one per row).
The length of an example is the task's own measure of its input (Kazemnejad et al.'s
lambda): symbols for the string tasks, terms for sum and mod, digits of the longer operand
for add.
*/
#ifndef LLMC_TASKS_H
#define LLMC_TASKS_H

#include <string.h>

#define TASK_TOKENS "_^=$+-*0123456789abcdefghijklmnopqrstuvwxyz"
enum { TOK_PAD, TOK_BOS, TOK_SEP, TOK_EOS, TOK_PLUS, TOK_MINUS, TOK_TIMES, TOK_0, TOK_A = TOK_0 + 10, TASK_VOCAB = TOK_A + 26 };

enum { TASK_NONE, TASK_SUM, TASK_COPY, TASK_REVERSE, TASK_SORT, TASK_PARITY, TASK_ADD, TASK_MOD, TASK_DUP,
       TASK_BUCKET, TASK_CYCLE, TASK_EVEN, TASK_NUM };
static const char* const TASK_NAMES[TASK_NUM] = {
    "", "sum", "copy", "reverse", "sort", "parity", "add", "mod", "dup", "bucket", "cycle", "even",
};

// the header words of a task file (after the masked shard's)
#define TASK_WORD_TASK 5
#define TASK_WORD_MIN_LEN 6
#define TASK_WORD_MAX_LEN 7
#define TASK_WORD_SEED 8
#define TASK_WORD_EXAMPLES 9

// the task of a name, TASK_NONE if none
static int task_by_name(const char* name) {
    for (int k = 1; k < TASK_NUM; k++) { if (strcmp(name, TASK_NAMES[k]) == 0) { return k; } }
    return TASK_NONE;
}

// a token as text (one character; '?' for an id outside the vocabulary)
static char task_token_char(int token) {
    return token >= 0 && token < TASK_VOCAB ? TASK_TOKENS[token] : '?';
}

#endif // LLMC_TASKS_H
