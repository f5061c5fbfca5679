/*
The algorithmic tasks of the length-generalization benchmark (llmc/tasks.h, docs/tasks.md),
written as masked shards (llmc/dataloader.h): one example per row, the loss on the answer.

    ./tasks write [-n N] [-l LENGTHS] [-e TRAIN] [-v VAL] [-x TEST] [-s SEED] DIR [TASK...]
        for each task (default: all) into DIR/<task>/: train.bin (TRAIN examples of lengths
        drawn uniformly from 1..N), val.bin (VAL examples, the same lengths, another draw)
        and test_<L>.bin (TEST examples of length L, for each L of the comma list LENGTHS;
        default N/2, N, 3N/2, 2N, 3N, 4N, 6N, 8N)
    ./tasks check FILE...      reads task files back: the header, the rows and their mask,
                               and every answer computed again from its input
    ./tasks show FILE [K]      the first K examples (default 5) as text
    ./tasks solve TASK INPUT   the answer to one input, written in the tokens' characters
    ./tasks baseline [-w W] TASK LENGTHS
                               for each length of the comma list: chance and the best local
                               shortcut, the exact match of the best reader of W symbols of
                               the input at its ends (default 5), computed (baselines below)
defaults: N = 20, TRAIN = 20000, VAL = 512, TEST = 128, SEED = 1

The tasks (an example's length, Kazemnejad et al.'s lambda, in brackets):
    sum      d op d op ... d [terms]: digits, ops + and -, every partial result in 0..9 (the
             survey's "additions and subtractions within ten") -> the same with each digit
             replaced by the running value after its term (a running sum: every term needed,
             the answer's tokens in step with the input's, as copy's)
    copy     letters [letters] -> the same letters (Kazemnejad et al.)
    reverse  letters [letters] -> reversed (both studies)
    sort     letters [letters] -> in alphabetical order (Kazemnejad et al.)
    parity   bits [bits] -> 0 if the number of 1s is even, else 1 (both studies)
    add      a + b [digits of the longer], least significant digit first (the reversed form
             of the arithmetic papers), no leading zeros, the other operand 1..lambda digits
             -> the sum, least significant digit first
    mod      d op d op ... d [terms]: digits 0..4, ops + - *, * before + and - -> the value
             mod 5 (Ruoss et al.'s modular arithmetic)
    dup      bits [bits] -> the bits twice (Ruoss et al.'s duplicate string)
    bucket   digits 0..4 [digits] -> in order (Ruoss et al.'s bucket sort)
    cycle    moves -, 0, + [moves] -> the final position on a cycle of 5 from 0 (Ruoss et al.'s
             cycle navigation)
    even     bits [bits] -> 0 if the number of 01 and 10 pairs is even, else 1 (Ruoss et al.'s
             even pairs)
Every file is drawn from its own stream of the seed (the task, the split and, for a test
file, its length), so a file is the same bytes whenever it is written with the same seed.
*/
#include <math.h>
#include "../llmc/utils.h"
#include "../llmc/rand.h"
#include "../llmc/dataloader.h"
#include "../llmc/tasks.h"

#define MAX_TASK_LEN 4096    // the longest example length a file may hold
#define MAX_LENGTHS 32
#define MAX_ROW (3 * MAX_TASK_LEN + 5)

// the row length a file of examples up to length n needs (BOS, input, SEP, answer, EOS)
static int task_row_len(int task, int n) {
    switch (task) {
        case TASK_PARITY: case TASK_EVEN: case TASK_CYCLE: return n + 4;
        case TASK_DUP: return 3 * n + 3;
        case TASK_ADD: return 3 * n + 5;
        case TASK_SUM: return 4 * n + 1; // 2n - 1 tokens, as many back
        default: return 2 * n + 3; // the string tasks: n symbols, n back; mod: 2n - 1 tokens, one back
    }
}

// the longest answer to an input of len tokens: dup's is twice the input, every other task's
// at most the input's length and one (add's carry): what task_solve's `out` must hold
static int task_answer_max(int task, int len) { return task == TASK_DUP ? 2 * len : len + 1; }

static int is_digit(int t, int below) { return t >= TOK_0 && t < TOK_0 + below; }
static int is_letter(int t) { return t >= TOK_A && t < TOK_A + 26; }

// The answer to input in[0..len) of a task, into out (task_answer_max(task, len) tokens);
// returns its length, or -1 if the input is not one of the task's (wrong symbols or
// structure, a partial sum leaving 0..9). Sets *lambda to the example's length.
static int task_solve(int task, const int* in, int len, int* out, int* lambda) {
    if (len < 1) { return -1; }
    *lambda = len;
    int n = 0;
    switch (task) {
        case TASK_SUM: case TASK_MOD: { // d op d op ... d
            int mod = task == TASK_MOD;
            if (len % 2 == 0) { return -1; }
            for (int i = 0; i < len; i += 2) {
                if (!is_digit(in[i], mod ? 5 : 10)) { return -1; }
                if (i + 1 < len && in[i + 1] != TOK_PLUS && in[i + 1] != TOK_MINUS && (!mod || in[i + 1] != TOK_TIMES)) { return -1; }
            }
            *lambda = (len + 1) / 2;
            if (!mod) { // left to right, within 0..9: each operator, and the value after its term
                int v = in[0] - TOK_0;
                out[n++] = TOK_0 + v;
                for (int i = 1; i < len; i += 2) {
                    v += (in[i] == TOK_PLUS ? 1 : -1) * (in[i + 1] - TOK_0);
                    if (v < 0 || v > 9) { return -1; }
                    out[n++] = in[i];
                    out[n++] = TOK_0 + v;
                }
            } else { // the sum of the products, mod 5
                int total = 0, sign = 1, term = in[0] - TOK_0;
                for (int i = 1; i < len; i += 2) {
                    int d = in[i + 1] - TOK_0;
                    if (in[i] == TOK_TIMES) { term = term * d % 5; continue; }
                    total += sign * term;
                    sign = in[i] == TOK_PLUS ? 1 : -1;
                    term = d;
                }
                total += sign * term;
                out[n++] = TOK_0 + ((total % 5) + 5) % 5;
            }
            return n;
        }
        case TASK_COPY: case TASK_REVERSE: case TASK_SORT: {
            int count[26] = {0};
            for (int i = 0; i < len; i++) {
                if (!is_letter(in[i])) { return -1; }
                count[in[i] - TOK_A]++;
            }
            if (task == TASK_SORT) { for (int c = 0; c < 26; c++) { while (count[c]-- > 0) { out[n++] = TOK_A + c; } } }
            else { for (int i = 0; i < len; i++) { out[n++] = task == TASK_COPY ? in[i] : in[len - 1 - i]; } }
            return n;
        }
        case TASK_BUCKET: {
            int count[5] = {0};
            for (int i = 0; i < len; i++) {
                if (!is_digit(in[i], 5)) { return -1; }
                count[in[i] - TOK_0]++;
            }
            for (int c = 0; c < 5; c++) { while (count[c]-- > 0) { out[n++] = TOK_0 + c; } }
            return n;
        }
        case TASK_PARITY: case TASK_EVEN: case TASK_DUP: {
            int ones = 0, changes = 0;
            for (int i = 0; i < len; i++) {
                if (!is_digit(in[i], 2)) { return -1; }
                ones += in[i] == TOK_0 + 1;
                changes += i > 0 && in[i] != in[i - 1];
            }
            if (task == TASK_DUP) { for (int k = 0; k < 2 * len; k++) { out[n++] = in[k % len]; } }
            else { out[n++] = TOK_0 + (task == TASK_PARITY ? ones : changes) % 2; }
            return n;
        }
        case TASK_CYCLE: {
            int p = 0;
            for (int i = 0; i < len; i++) {
                if (in[i] != TOK_MINUS && in[i] != TOK_0 && in[i] != TOK_PLUS) { return -1; }
                p += (in[i] == TOK_PLUS) - (in[i] == TOK_MINUS);
            }
            out[n++] = TOK_0 + ((p % 5) + 5) % 5;
            return n;
        }
        case TASK_ADD: { // a + b, least significant digit first, no leading zeros
            int plus = -1;
            for (int i = 0; i < len; i++) {
                if (in[i] == TOK_PLUS) {
                    if (plus >= 0) { return -1; }
                    plus = i;
                } else if (!is_digit(in[i], 10)) {
                    return -1;
                }
            }
            int la = plus, lb = len - plus - 1;
            if (plus < 1 || lb < 1) { return -1; }
            const int* a = in;
            const int* b = in + plus + 1;
            if ((la > 1 && a[la - 1] == TOK_0) || (lb > 1 && b[lb - 1] == TOK_0)) { return -1; }
            *lambda = la > lb ? la : lb;
            int carry = 0;
            for (int i = 0; i < *lambda; i++) {
                int s = (i < la ? a[i] - TOK_0 : 0) + (i < lb ? b[i] - TOK_0 : 0) + carry;
                out[n++] = TOK_0 + s % 10;
                carry = s / 10;
            }
            if (carry) { out[n++] = TOK_0 + 1; }
            return n;
        }
    }
    return -1;
}

// draws the input of an example of length n into in; returns its token count
static int task_input(int task, int n, uint64_t* rng, int* in) {
    int len = 0;
    switch (task) {
        case TASK_SUM: { // each step one of the 11 (op, digit) pairs that keep v in 0..9: + 0..9-v, - 0..v
            int v = random_u32(rng) % 10;
            in[len++] = TOK_0 + v;
            for (int k = 1; k < n; k++) {
                int c = random_u32(rng) % 11, d = c <= 9 - v ? c : c - (10 - v);
                in[len++] = c <= 9 - v ? TOK_PLUS : TOK_MINUS;
                in[len++] = TOK_0 + d;
                v += c <= 9 - v ? d : -d;
            }
            return len;
        }
        case TASK_MOD: {
            static const int ops[3] = {TOK_PLUS, TOK_MINUS, TOK_TIMES};
            for (int k = 0; k < n; k++) {
                if (k > 0) { in[len++] = ops[random_u32(rng) % 3]; }
                in[len++] = TOK_0 + random_u32(rng) % 5;
            }
            return len;
        }
        case TASK_COPY: case TASK_REVERSE: case TASK_SORT:
            for (int k = 0; k < n; k++) { in[len++] = TOK_A + random_u32(rng) % 26; }
            return len;
        case TASK_BUCKET:
            for (int k = 0; k < n; k++) { in[len++] = TOK_0 + random_u32(rng) % 5; }
            return len;
        case TASK_PARITY: case TASK_EVEN: case TASK_DUP:
            for (int k = 0; k < n; k++) { in[len++] = TOK_0 + random_u32(rng) % 2; }
            return len;
        case TASK_CYCLE: {
            static const int moves[3] = {TOK_MINUS, TOK_0, TOK_PLUS};
            for (int k = 0; k < n; k++) { in[len++] = moves[random_u32(rng) % 3]; }
            return len;
        }
        case TASK_ADD: { // one operand of n digits, the other of 1..n, in either order
            int other = 1 + random_u32(rng) % n, first_long = random_u32(rng) % 2;
            for (int op = 0; op < 2; op++) {
                if (op == 1) { in[len++] = TOK_PLUS; }
                int digits = (op == 0) == first_long ? n : other;
                for (int i = 0; i < digits; i++) {
                    int top = i == digits - 1 && digits > 1; // the most significant digit is not 0
                    in[len++] = TOK_0 + (top ? 1 + random_u32(rng) % 9 : random_u32(rng) % 10);
                }
            }
            return len;
        }
    }
    fatal("unknown task %d", task);
}

// Writes `examples` examples of lengths min_len..max_len (uniformly drawn) of a task to path,
// drawn from random stream `stream` of seed `seed` (written into the header)
static void write_task_file(const char* path, int task, int min_len, int max_len, int examples, int seed, uint64_t stream) {
    int R = task_row_len(task, max_len);
    int64_t ntok = (int64_t)examples * R + 1;
    if (ntok > INT_MAX) { fatal("%s: %d examples in rows of %d tokens are more tokens than a shard's header holds", path, examples, R); }
    uint16_t* tokens = (uint16_t*)calloc_check((size_t)ntok, sizeof(uint16_t)); // TOK_PAD is 0
    uint8_t* mask = (uint8_t*)calloc_check((size_t)ntok, 1);
    int* in = (int*)malloc_check((size_t)R * sizeof(int)); // an input is shorter than its row
    int* out = (int*)malloc_check((size_t)task_answer_max(task, R) * sizeof(int));
    uint64_t rng = random_seed(stream);
    for (int e = 0; e < examples; e++) {
        int n = min_len + (int)(random_u32(&rng) % (uint32_t)(max_len - min_len + 1));
        int len = task_input(task, n, &rng, in), lambda;
        int answer = task_solve(task, in, len, out, &lambda);
        if (answer < 0 || lambda != n || 3 + len + answer > R) { fatal("task %s: a bad example of length %d (a bug)", TASK_NAMES[task], n); }
        uint16_t* row = tokens + (int64_t)e * R;
        uint8_t* m = mask + (int64_t)e * R;
        int p = 0;
        row[p++] = TOK_BOS;
        for (int i = 0; i < len; i++) { row[p++] = (uint16_t)in[i]; }
        row[p++] = TOK_SEP;
        for (int i = 0; i < answer; i++) { m[p] = 1; row[p++] = (uint16_t)out[i]; }
        m[p] = 1;
        row[p++] = TOK_EOS;
    }
    int header[SHARD_HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC; header[1] = SHARD_VERSION_MASKED; header[2] = (int)ntok; header[3] = R; header[4] = TASK_VOCAB;
    header[TASK_WORD_TASK] = task; header[TASK_WORD_MIN_LEN] = min_len; header[TASK_WORD_MAX_LEN] = max_len;
    header[TASK_WORD_SEED] = seed; header[TASK_WORD_EXAMPLES] = examples;
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, header, sizeof(int), SHARD_HEADER_INTS);
    atomic_write(&af, tokens, sizeof(uint16_t), (size_t)ntok);
    atomic_write(&af, mask, 1, (size_t)ntok);
    atomic_commit(&af);
    free(tokens); free(mask); free(in); free(out);
}

// A task file read back, checked as check_file says; the tokens and mask of its rows
typedef struct {
    int header[SHARD_HEADER_INTS];
    int task, rows, R;
    uint16_t* tokens;
    uint8_t* mask;
} TaskFile;

static void task_file_free(TaskFile* tf) { free(tf->tokens); free(tf->mask); }

// Reads a task file and checks everything about it: a masked shard in the task
// vocabulary, rows of the length the longest example needs, every row BOS, an input of the
// task of a length within the header's, SEP, its answer computed again, EOS, then PAD; the
// answer and EOS scored, nothing else; the number of examples. Any fault is one error.
static void task_file_read(TaskFile* tf, const char* path) {
    FILE* f = fopen_read_regular(path);
    int* h = tf->header;
    int64_t ntok = shard_read_header(path, f, h);
    if (h[1] != SHARD_VERSION_MASKED) { fatal("%s is a plain token shard, not a task file (./tasks write makes them)", path); }
    tf->task = h[TASK_WORD_TASK];
    if (h[4] != TASK_VOCAB || tf->task <= TASK_NONE || tf->task >= TASK_NUM) {
        fatal("%s is a masked shard but no task file: vocabulary %d (expected %d), task %d", path, h[4], TASK_VOCAB, tf->task);
    }
    int lo = h[TASK_WORD_MIN_LEN], hi = h[TASK_WORD_MAX_LEN];
    tf->R = h[3];
    tf->rows = (int)((ntok - 1) / tf->R);
    if (lo < 1 || hi < lo || hi > MAX_TASK_LEN || tf->R != task_row_len(tf->task, hi) || h[TASK_WORD_EXAMPLES] != tf->rows) {
        fatal("%s: header says lengths %d..%d, %d examples in rows of %d tokens; the file has %d rows, and task %s needs rows of %d",
              path, lo, hi, h[TASK_WORD_EXAMPLES], tf->R, tf->rows, TASK_NAMES[tf->task], hi >= 1 && hi <= MAX_TASK_LEN ? task_row_len(tf->task, hi) : 0);
    }
    tf->tokens = (uint16_t*)malloc_check((size_t)ntok * sizeof(uint16_t));
    tf->mask = (uint8_t*)malloc_check((size_t)ntok);
    fread_check(tf->tokens, sizeof(uint16_t), (size_t)ntok, f, path);
    fread_check(tf->mask, 1, (size_t)ntok, f, path);
    fclose(f);
    int* in = (int*)malloc_check((size_t)tf->R * sizeof(int)); // an input is shorter than its row
    int* out = (int*)malloc_check((size_t)task_answer_max(tf->task, tf->R) * sizeof(int));
    for (int r = 0; r <= tf->rows; r++) {
        const uint16_t* row = tf->tokens + (int64_t)r * tf->R;
        const uint8_t* m = tf->mask + (int64_t)r * tf->R;
        if (r == tf->rows) { // the token that ends the last row
            if (row[0] != TOK_PAD || m[0] != 0) { fatal("%s: the last token is not an unscored PAD", path); }
            break;
        }
        int p = 0, len = 0, lambda;
        if (row[p++] != TOK_BOS) { fatal("%s: example %d does not start with BOS", path, r); }
        while (p < tf->R && row[p] != TOK_SEP) { in[len++] = row[p++]; }
        int answer = p < tf->R ? task_solve(tf->task, in, len, out, &lambda) : -1;
        if (answer < 0) { fatal("%s: example %d's input is not one of task %s", path, r, TASK_NAMES[tf->task]); }
        if (lambda < lo || lambda > hi) { fatal("%s: example %d has length %d, outside the header's %d..%d", path, r, lambda, lo, hi); }
        p++; // SEP
        if (p + answer + 1 > tf->R) { fatal("%s: example %d does not fit its row", path, r); }
        for (int i = 0; i < answer; i++, p++) {
            if (row[p] != out[i]) { fatal("%s: example %d's answer differs from the task's at token %d", path, r, i); }
        }
        if (row[p++] != TOK_EOS) { fatal("%s: example %d's answer is not followed by EOS", path, r); }
        for (int t = p; t < tf->R; t++) { if (row[t] != TOK_PAD) { fatal("%s: example %d has more than PAD after EOS", path, r); } }
        for (int t = 0; t < tf->R; t++) {
            int scored = t > len + 1 && t < p; // the answer and EOS
            if (m[t] != scored) { fatal("%s: example %d: token %d is %s but its mask byte is %d", path, r, t, scored ? "scored" : "not scored", m[t]); }
        }
    }
    free(in); free(out);
}

// the header's description of a task file
static void task_file_describe(const TaskFile* tf, const char* path) {
    printf("%s: task %s, %d examples of lengths %d..%d in rows of %d tokens, seed %d\n", path, TASK_NAMES[tf->task], tf->rows,
           tf->header[TASK_WORD_MIN_LEN], tf->header[TASK_WORD_MAX_LEN], tf->R, tf->header[TASK_WORD_SEED]);
}

static void cmd_show(const char* path, int k) {
    TaskFile tf;
    task_file_read(&tf, path);
    task_file_describe(&tf, path);
    for (int r = 0; r < k && r < tf.rows; r++) {
        const uint16_t* row = tf.tokens + (int64_t)r * tf.R;
        for (int t = 0; t < tf.R && row[t] != TOK_PAD; t++) { putchar(task_token_char(row[t])); }
        putchar('\n');
    }
    task_file_free(&tf);
}

static void cmd_solve(const char* name, const char* text) {
    int task = task_by_name(name);
    if (task == TASK_NONE) { fatal("unknown task '%s'", name); }
    int len = (int)strlen(text), answer_len, lambda;
    if (len > MAX_ROW) { fatal("the input is longer than %d tokens", MAX_ROW); }
    int* in = (int*)malloc_check((size_t)(len + 1) * sizeof(int));
    int* out = (int*)malloc_check((size_t)task_answer_max(task, len) * sizeof(int));
    for (int i = 0; i < len; i++) {
        const char* c = text[i] != '\0' ? strchr(TASK_TOKENS, text[i]) : NULL;
        if (c == NULL) { fatal("'%c' is no token of the task vocabulary (%s)", text[i], TASK_TOKENS); }
        in[i] = (int)(c - TASK_TOKENS);
    }
    answer_len = task_solve(task, in, len, out, &lambda);
    if (answer_len < 0) { fatal("'%s' is no input of task %s", text, name); }
    for (int i = 0; i < answer_len; i++) { putchar(task_token_char(out[i])); }
    printf("\n");
    free(in); free(out);
}

static void cmd_write(const char* dir, int n, const int* lengths, int num_lengths, int train, int val, int test, int seed,
                      const int* tasks, int num_tasks) {
    // every file's path checked before anything is created, as its crash-safe write will
    // (llmc/utils.h: atomic_path_check): a path cut short would make a stray folder
    char path[PATH_MAX + 64];
    for (int k = 0; k < num_tasks; k++) {
        for (int i = -2; i < num_lengths; i++) { // train.bin, val.bin, then each test file
            char name[32];
            if (i < 0) { snprintf(name, sizeof(name), "%s.bin", i == -2 ? "train" : "val"); }
            else { snprintf(name, sizeof(name), "test_%04d.bin", lengths[i]); }
            if (snprintf(path, sizeof(path), "%s/%s/%s", dir, TASK_NAMES[tasks[k]], name) >= (int)sizeof(path)) {
                fatal("path too long: %s/%s/%s", dir, TASK_NAMES[tasks[k]], name);
            }
            atomic_path_check(path);
        }
    }
    ensure_dir_writable(dir);
    for (int k = 0; k < num_tasks; k++) {
        int task = tasks[k];
        char sub[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s/%s", dir, TASK_NAMES[task]);
        ensure_dir_writable(sub);
        // each file its own stream of the seed: the task, the split (0 train, 1 val, 2 test), a test file's length
        uint64_t base = random_seed((uint64_t)seed) ^ ((uint64_t)task << 48);
        snprintf(path, sizeof(path), "%s/train.bin", sub);
        write_task_file(path, task, 1, n, train, seed, base ^ (0ull << 40));
        snprintf(path, sizeof(path), "%s/val.bin", sub);
        write_task_file(path, task, 1, n, val, seed, base ^ (1ull << 40));
        for (int i = 0; i < num_lengths; i++) {
            snprintf(path, sizeof(path), "%s/test_%04d.bin", sub, lengths[i]);
            write_task_file(path, task, lengths[i], lengths[i], test, seed, base ^ (2ull << 40) ^ (uint64_t)lengths[i]);
        }
        printf("%s: train %d and val %d examples of lengths 1..%d (rows of %d tokens), test %d at each of", sub, train, val, n,
               task_row_len(task, n), test);
        for (int i = 0; i < num_lengths; i++) { printf(" %d", lengths[i]); }
        printf("\n");
    }
}

// ----------------------------------------------------------------------------
// Baselines: the exact match of readers that see an example's length and only part of its
// input, under the generator's draws (task_input: but for sum's, every symbol of an input
// independent and uniform over its choices). A symbol is a unit of the example's length: a term
// of sum and mod (the operator and digit), a letter, bit, digit or move.
//   chance    the best answer to the length alone
//   shortcut  the best reader of W symbols at the input's ends, its first a and its last W - a
//             (the best a): what a model that looks only near the start and near the answer
//             reaches at any length. 1 at lengths up to W (it sees the whole input).
// The answer of parity, mod, cycle and even is the output of a finite automaton run over
// the symbols (TaskMachine); the reader knows the state after the first a symbols, the hidden
// middle's symbols spread it (a distribution over states), and the last W - a symbols map each
// state to an answer: the reader answers the likeliest. The answers of the string tasks hold
// every hidden symbol (copy, reverse, dup: each of alphabet A: A^-h for h hidden; sum: below)
// or their multiset (sort, bucket: the likeliest multiset's probability); add's is an upper
// bound: the sum is one-to-one in the longer operand, of whose digits at least L - W are
// hidden, the top one of 9 values, each other of 10.

// The automaton of a task with a one-token answer: states (the start state last), symbols
// (those of the first and of every later position), the step and the answer of a state
typedef struct { int task, states, first_symbols, symbols; } TaskMachine;

// the automaton of a task into m; 0 for a task without one (a longer answer)
static int task_machine(int task, TaskMachine* m) {
    m->task = task;
    switch (task) {
        case TASK_MOD: m->states = 51; m->first_symbols = 5; m->symbols = 15; return 1;     // (total, sign, pending product)
        case TASK_PARITY: m->states = 3; m->first_symbols = 2; m->symbols = 2; return 1;    // the count of 1s mod 2
        case TASK_CYCLE: m->states = 6; m->first_symbols = 3; m->symbols = 3; return 1;     // the position mod 5
        case TASK_EVEN: m->states = 5; m->first_symbols = 2; m->symbols = 2; return 1;      // (changes mod 2, last bit)
    }
    return 0;
}

// the state after symbol x from state q (the start state: x is a first symbol)
static int machine_step(const TaskMachine* m, int q, int x) {
    int start = q == m->states - 1;
    switch (m->task) {
        case TASK_MOD: { // q = total * 10 + sign * 5 + product; x = op * 5 + d, op 0 +, 1 -, 2 *
            if (start) { return x; }
            int total = q / 10, minus = q / 5 % 2, product = q % 5, op = x / 5, d = x % 5;
            if (op == 2) { return total * 10 + minus * 5 + product * d % 5; }
            total = (total + (minus ? 5 - product : product)) % 5;
            return total * 10 + op * 5 + d;
        }
        case TASK_PARITY: return (start ? 0 : q) ^ x;
        case TASK_CYCLE: return ((start ? 0 : q) + x + 4) % 5; // moves - 0 +
        default: return start ? x : (q / 2 ^ (x != q % 2)) * 2 + x; // even: (changes mod 2) * 2 + last bit
    }
}

// the answer (a digit's value) of state q
static int machine_answer(const TaskMachine* m, int q) {
    switch (m->task) {
        case TASK_MOD: return (q / 10 + (q / 5 % 2 ? 5 - q % 5 : q % 5)) % 5;
        case TASK_EVEN: return q / 2;
        default: return q;
    }
}

// dist (over states) moved on by n hidden symbols, the first a first symbol if `first`
static void machine_spread(const TaskMachine* m, double* dist, int n, int first) {
    double next[64];
    for (int k = 0; k < n; k++) {
        int choices = first && k == 0 ? m->first_symbols : m->symbols;
        memset(next, 0, sizeof(next));
        for (int q = 0; q < m->states; q++) {
            if (dist[q] == 0) { continue; }
            for (int x = 0; x < choices; x++) { next[machine_step(m, q, x)] += dist[q] / choices; }
        }
        memcpy(dist, next, (size_t)m->states * sizeof(double));
    }
}

// a reader's view of the input's last symbols: the answer they give from each state before them
typedef struct { uint8_t answer[64]; double p; } SuffixMap;

// the order of maps by their answers (qsort's), so that equal maps are neighbours
static int suffix_map_cmp(const void* a, const void* b) { return memcmp(a, b, 64); }

// The exact match of the best reader of an input of L symbols that sees its first a and last
// b symbols (a + b < L; a = b = 0: chance) of a task with an automaton
static double machine_reader(const TaskMachine* m, int L, int a, int b) {
    double seen[64] = {0}; // the state after the first a symbols, which the reader knows
    seen[m->states - 1] = 1;
    machine_spread(m, seen, a, 1);
    // the distinct maps of the last b symbols (states -> answers) and their probabilities
    int n = 1;
    SuffixMap* maps = (SuffixMap*)calloc_check(1, sizeof(SuffixMap));
    SuffixMap* next = NULL;
    for (int q = 0; q < m->states; q++) { maps[0].answer[q] = (uint8_t)machine_answer(m, q); }
    maps[0].p = 1;
    for (int k = 0; k < b; k++) { // a symbol more before the ones mapped
        int c = 0;
        next = (SuffixMap*)realloc(next, (size_t)n * m->symbols * sizeof(SuffixMap));
        maps = (SuffixMap*)realloc(maps, (size_t)n * m->symbols * sizeof(SuffixMap));
        if (next == NULL || maps == NULL) { fatal("out of memory"); }
        for (int i = 0; i < n; i++) {
            for (int x = 0; x < m->symbols; x++, c++) {
                memset(next[c].answer, 0, 64);
                for (int q = 0; q < m->states - 1; q++) { next[c].answer[q] = maps[i].answer[machine_step(m, q, x)]; }
                next[c].p = maps[i].p / m->symbols;
            }
        }
        qsort(next, (size_t)c, sizeof(SuffixMap), suffix_map_cmp); // equal maps merged
        n = 0;
        for (int i = 0; i < c; i++) {
            if (n > 0 && memcmp(maps[n - 1].answer, next[i].answer, 64) == 0) { maps[n - 1].p += next[i].p; }
            else { maps[n++] = next[i]; }
        }
    }
    double right = 0;
    for (int q0 = 0; q0 < m->states; q0++) {
        if (seen[q0] == 0) { continue; }
        double hidden[64] = {0}; // the state after the hidden middle, from q0
        hidden[q0] = 1;
        machine_spread(m, hidden, L - a - b, a == 0);
        for (int i = 0; i < n; i++) {
            double by_answer[64] = {0}, best = 0;
            for (int q = 0; q < m->states; q++) { by_answer[maps[i].answer[q]] += hidden[q]; }
            for (int v = 0; v < 64; v++) { best = fmax(best, by_answer[v]); }
            right += seen[q0] * maps[i].p * best;
        }
    }
    free(maps);
    free(next);
    return right;
}

// sum's inputs of L terms are equally likely, each 1/10 (11^-(L-1)) (every step one of the 11
// pairs that keep the value in 0..9), and its answer gives back every hidden term: the best
// reader of the first a and the last b terms is right once for each view it can be shown,
// (views) 0.1 11^-(L-1). A view is any first a terms that keep in 0..9 (10 11^(a-1)) with any
// last b terms that fit 0..9 from some value (their partial sums' range <= 9): a hidden term
// between can bring any value to any other
static double sum_views(int a, int b) {
    // the last b terms: paths of partial sums (offset from their start) whose range stays <= 9,
    // counted by (offset - lowest, highest - lowest)
    double paths[10][10] = {{0}};
    paths[0][0] = 1;
    for (int k = 0; k < b; k++) {
        double next[10][10] = {{0}};
        for (int up = 0; up < 10; up++) {
            for (int range = up; range < 10; range++) {
                if (paths[up][range] == 0) { continue; }
                for (int step = -9; step <= 9; step++) { // + d and - d; +0 and -0 are two terms
                    int u = up + step, lo = u < 0 ? -u : 0, r = range + lo, x = u + lo;
                    if (x > r) { r = x; }
                    if (r <= 9) { next[x][r] += paths[up][range] * (step == 0 ? 2 : 1); }
                }
            }
        }
        memcpy(paths, next, sizeof(paths));
    }
    double suffixes = 0;
    for (int up = 0; up < 10; up++) { for (int range = 0; range < 10; range++) { suffixes += paths[up][range]; } }
    return (a > 0 ? 10 * pow(11, a - 1) : 1) * suffixes;
}

// log of the probability of the likeliest multiset of h symbols drawn uniformly from k
static double log_likeliest_multiset(int h, int k) {
    int q = h / k, r = h % k;
    return lgamma(h + 1.0) - r * lgamma(q + 2.0) - (k - r) * lgamma(q + 1.0) - h * log((double)k);
}

// chance (w = 0) or the best reader of w symbols at the ends of an input of length L: its exact
// match, an upper bound where *bound is set (add)
static double task_baseline(int task, int L, int w, int* bound) {
    *bound = task == TASK_ADD;
    if (L <= w) { return 1; }
    TaskMachine m;
    if (task_machine(task, &m) || task == TASK_SUM) {
        double best = 0;
        for (int a = 0; a <= w; a++) {
            best = fmax(best, task == TASK_SUM ? sum_views(a, w - a) * 0.1 * pow(11, -(L - 1)) : machine_reader(&m, L, a, w - a));
        }
        return best;
    }
    int h = L - w; // hidden symbols
    switch (task) {
        case TASK_COPY: case TASK_REVERSE: return pow(26, -h);
        case TASK_DUP: return pow(2, -h);
        case TASK_SORT: return exp(log_likeliest_multiset(h, 26));
        case TASK_BUCKET: return exp(log_likeliest_multiset(h, 5));
        default: return h == 1 ? 1.0 / 9 : pow(10, -(h - 1)) / 9; // add: the bound
    }
}

// ./tasks baseline: a CSV line for each length
static void cmd_baseline(const char* name, const int* lengths, int num_lengths, int w) {
    int task = task_by_name(name);
    if (task == TASK_NONE) { fatal("unknown task '%s'", name); }
    printf("task,length,window,chance,shortcut,bound\n");
    for (int i = 0; i < num_lengths; i++) {
        int bound;
        double chance = task_baseline(task, lengths[i], 0, &bound);
        printf("%s,%d,%d,%.12g,%.12g,%d\n", name, lengths[i], w, chance, task_baseline(task, lengths[i], w, &bound), bound);
    }
}

// a comma list of lengths (-l, baseline's), as the trainers' lists (llmc/utils.h: split_list)
static int parse_lengths(const char* what, const char* v, int* lengths) {
    char buf[512];
    char* items[MAX_LENGTHS];
    if (strlen(v) >= sizeof(buf)) { fatal("%s: list too long", what); }
    strcpy(buf, v);
    int num = split_list(buf, items, MAX_LENGTHS, what, "lengths separated by commas, e.g. 10,20,40");
    for (int k = 0; k < num; k++) { lengths[k] = (int)parse_long(what, items[k], 1, MAX_TASK_LEN); }
    return num;
}

static void usage(void) {
    fprintf(stderr,
            "usage: ./tasks write [-n N] [-l LENGTHS] [-e TRAIN] [-v VAL] [-x TEST] [-s SEED] DIR [TASK...]\n"
            "       ./tasks check FILE...\n"
            "       ./tasks show FILE [K]\n"
            "       ./tasks solve TASK INPUT\n"
            "       ./tasks baseline [-w W] TASK LENGTHS\n"
            "tasks: sum copy reverse sort parity add mod dup bucket cycle even (see data/tasks.c)\n");
    exit(1);
}

int main(int argc, char** argv) {
    int n = 20, train = 20000, val = 512, test = 128, seed = 1, num_lengths = 0, window = 5;
    int lengths[MAX_LENGTHS];
    char** args = (char**)malloc_check((size_t)argc * sizeof(char*));
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (a[0] == '-' && a[1] != '\0' && a[2] == '\0' && strchr("nlevxsw", a[1]) != NULL) {
            if (i + 1 >= argc) { fatal("flag %s needs a value", a); }
            const char* v = argv[++i];
            if (a[1] == 'n') { n = (int)parse_long(a, v, 1, MAX_TASK_LEN); }
            else if (a[1] == 'e') { train = (int)parse_long(a, v, 1, 1 << 24); }
            else if (a[1] == 'v') { val = (int)parse_long(a, v, 1, 1 << 24); }
            else if (a[1] == 'x') { test = (int)parse_long(a, v, 1, 1 << 24); }
            else if (a[1] == 's') { seed = (int)parse_long(a, v, 0, INT_MAX); }
            else if (a[1] == 'w') { window = (int)parse_long(a, v, 0, 8); }
            else { num_lengths = parse_lengths(a, v, lengths); }
        } else if (a[0] == '-' && isalpha((unsigned char)a[1])) { // not an input of solve, such as "-0+"
            fatal("unknown flag %s (./tasks without arguments lists them)", a);
        } else {
            args[nargs++] = argv[i];
        }
    }
    if (nargs == 0) { usage(); }
    const char* cmd = args[0];
    if (strcmp(cmd, "write") == 0 && nargs >= 2) {
        if (num_lengths == 0) { // N/2, N, 3N/2, 2N, 3N, 4N, 6N, 8N (lengths below 1 or repeated left out)
            const int times2[8] = {1, 2, 3, 4, 6, 8, 12, 16};
            for (int i = 0; i < 8; i++) {
                int L = n * times2[i] / 2;
                if (L >= 1 && L <= MAX_TASK_LEN && (num_lengths == 0 || L != lengths[num_lengths - 1])) { lengths[num_lengths++] = L; }
            }
        }
        int tasks[TASK_NUM], num_tasks = 0;
        for (int i = 2; i < nargs; i++) {
            int t = task_by_name(args[i]);
            if (t == TASK_NONE) { fatal("unknown task '%s' (sum copy reverse sort parity add mod dup bucket cycle even)", args[i]); }
            tasks[num_tasks++] = t;
            if (num_tasks == TASK_NUM) { fatal("too many tasks"); }
        }
        if (num_tasks == 0) { for (int t = 1; t < TASK_NUM; t++) { tasks[num_tasks++] = t; } }
        cmd_write(args[1], n, lengths, num_lengths, train, val, test, seed, tasks, num_tasks);
    } else if (strcmp(cmd, "check") == 0 && nargs >= 2) {
        for (int i = 1; i < nargs; i++) {
            TaskFile tf;
            task_file_read(&tf, args[i]);
            task_file_describe(&tf, args[i]);
            task_file_free(&tf);
        }
    } else if (strcmp(cmd, "show") == 0 && (nargs == 2 || nargs == 3)) {
        cmd_show(args[1], nargs == 3 ? (int)parse_long("K", args[2], 1, INT_MAX) : 5);
    } else if (strcmp(cmd, "solve") == 0 && nargs == 3) {
        cmd_solve(args[1], args[2]);
    } else if (strcmp(cmd, "baseline") == 0 && nargs == 3) {
        num_lengths = parse_lengths("baseline LENGTHS", args[2], lengths);
        cmd_baseline(args[1], lengths, num_lengths, window);
    } else {
        usage();
    }
    free(args);
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) { fatal("write error on standard output (%s)", strerror(errno)); }
    return 0;
}
