/*
Small helpers shared by every program of the project: checked file and memory
operations that fail with one clear line on stderr and a nonzero exit, crash-safe
file writes (temporary file, flush, fsync, rename; a failure removes the temporary
file), and strict number parsing for command-line flags.
*/
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// fatal errors

// temporary files of the crash-safe writes in progress (AtomicFile below): fatal() removes
// them, so that a failed write (a full disk) leaves nothing behind
#define MAX_PENDING_TMP 8
static const char* pending_tmp[MAX_PENDING_TMP];

// rank of this process in a multi-process run (-1: single process), named in errors
static int fatal_rank = -1;
// called instead of exit() when set: the multi-process layer points it at MPI_Abort,
// so that one failing rank takes the whole job down at once instead of hanging it
static void (*fatal_abort)(int code) = NULL;

__attribute__((format(printf, 1, 2), noreturn))
static void fatal(const char* fmt, ...) {
    char small[1024];
    char* msg = small; // the whole message, however long (a long path must not hide the reason)
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(small) && (msg = (char*)malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (msg == NULL) { msg = small; } // out of memory: the message as far as it fits
    if (fatal_rank >= 0) { fprintf(stderr, "error (rank %d): %s\n", fatal_rank, msg); }
    else { fprintf(stderr, "error: %s\n", msg); }
    fflush(stderr);
    for (int i = 0; i < MAX_PENDING_TMP; i++) {
        if (pending_tmp[i] != NULL) { unlink(pending_tmp[i]); pending_tmp[i] = NULL; }
    }
    if (fatal_abort) { fatal_abort(1); }
    exit(1);
}

// ----------------------------------------------------------------------------
// checked memory and file operations

static void* malloc_check(size_t size) {
    void* p = malloc(size > 0 ? size : 1);
    if (p == NULL) { fatal("out of memory allocating %zu bytes", size); }
    return p;
}

static void* calloc_check(size_t n, size_t size) {
    void* p = calloc(n > 0 ? n : 1, size > 0 ? size : 1);
    if (p == NULL) { fatal("out of memory allocating %zu x %zu bytes", n, size); }
    return p;
}

static FILE* fopen_check(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    if (f == NULL) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    return f;
}

// Opens a file for reading that must be a regular file (a checkpoint, a shard, a state
// file): a FIFO, a device or a directory is refused at once. The open does not block
// (O_NONBLOCK), so a FIFO with no writer cannot hang the program before the check.
static FILE* fopen_read_regular(const char* path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    struct stat st;
    if (fstat(fd, &st) != 0) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    if (!S_ISREG(st.st_mode)) { fatal("%s is not a regular file", path); }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    FILE* f = fdopen(fd, "rb");
    if (f == NULL) { fatal("cannot open %s (%s)", path, strerror(errno)); }
    return f;
}

// reads exactly n items or fails naming the file: a short read means a truncated file
static void fread_check(void* ptr, size_t size, size_t n, FILE* f, const char* path) {
    size_t got = fread(ptr, size, n, f);
    if (got != n) {
        if (ferror(f)) { fatal("read error in %s (%s)", path, strerror(errno)); }
        fatal("%s is truncated: expected %zu more bytes, found %zu", path, size * n, size * got);
    }
}

// writes exactly n items or fails naming the file (a full disk ends up here)
static void fwrite_check(const void* ptr, size_t size, size_t n, FILE* f, const char* path) {
    if (fwrite(ptr, size, n, f) != n) { fatal("write error in %s (%s)", path, strerror(errno)); }
}

static void fseek_check(FILE* f, long off, int whence, const char* path) {
    if (fseek(f, off, whence) != 0) { fatal("seek error in %s (%s)", path, strerror(errno)); }
}

static int64_t file_size_check(FILE* f, const char* path) {
    fseek_check(f, 0, SEEK_END, path);
    long size = ftell(f);
    if (size < 0) { fatal("cannot tell the size of %s (%s)", path, strerror(errno)); }
    fseek_check(f, 0, SEEK_SET, path);
    return (int64_t)size;
}

static int file_exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// what kind of file a mode is, for the message that refuses it
static const char* file_kind(mode_t mode) {
    return S_ISLNK(mode) ? "a symbolic link" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISDIR(mode) ? "a directory" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

// The programs write regular files only: a path they are about to write must be a regular
// file or not exist yet. A FIFO, a device node, a directory or a socket there is not theirs,
// and is refused with one line, never replaced or written into. A symbolic link is refused
// too where the file is written in place (link_ok 0: a log, a lock); a crash-safe write
// (link_ok 1) replaces the link itself by its rename, never its target.
static void refuse_special_file(const char* path, int link_ok) {
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode) || (link_ok && S_ISLNK(st.st_mode))) { return; }
    fatal("%s is %s, not a regular file: it is not written (remove it, or write elsewhere)", path, file_kind(st.st_mode));
}

// appends formatted text to the string in buf (`size` bytes in all), cut to what fits:
// never a byte past the end, whatever vsnprintf would have written
__attribute__((format(printf, 3, 4)))
static void append_format(char* buf, size_t size, const char* fmt, ...) {
    size_t used = strnlen(buf, size);
    if (used + 1 >= size) { return; }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

// formatted text of any length in a new allocation (free it)
__attribute__((format(printf, 1, 2)))
static char* format_alloc(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) { fatal("cannot format '%s'", fmt); }
    char* s = (char*)malloc_check((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

// creates a directory (one level) if missing and checks that it is writable
static void ensure_dir_writable(const char* dir) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (mkdir(dir, 0755) != 0) { fatal("cannot create directory %s (%s)", dir, strerror(errno)); }
    } else if (!S_ISDIR(st.st_mode)) {
        fatal("%s exists and is not a directory", dir);
    }
    if (access(dir, W_OK) != 0) { fatal("directory %s is not writable", dir); }
}

// ----------------------------------------------------------------------------
// crash-safe writes: everything is written to a temporary file in the same directory,
// flushed and fsynced, then renamed over the file. A crash at any moment leaves either the
// old file or the new one, never a torn one; a failed write removes its temporary file
// (fatal). The temporary name, "<dir>/.llmc-tmp.<host>.<pid>.<n>.<name>" (the machine as a
// hash of its host name, the writer's process id, its n-th write), is used by no other
// process or write and cannot be mistaken for a user's file: a temporary file is removed
// only once the process that wrote it is gone (temporary_is_orphan).

#define TMP_PREFIX ".llmc-tmp."

typedef struct {
    FILE* f;
    char path[PATH_MAX];
    char tmp_path[PATH_MAX + 48];
} AtomicFile;

// this machine, as a hash of its host name: a process id names a process only there (an
// output directory may be on a filesystem that several machines share)
static unsigned host_id(void) {
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    unsigned h = 2166136261u; // FNV-1a
    for (const char* c = host; *c != '\0'; c++) { h = (h ^ (unsigned char)*c) * 16777619u; }
    return h;
}

// If `name` (a file name without its directory) is a temporary file of a crash-safe write,
// returns the name of the file it was writing and sets its writer's machine and process;
// otherwise NULL
static const char* temporary_target(const char* name, unsigned* host, long* pid) {
    size_t np = strlen(TMP_PREFIX);
    if (strncmp(name, TMP_PREFIX, np) != 0) { return NULL; }
    const char* p = name + np;
    unsigned long field[3]; // host (8 hex digits), process id, write number, each ended by a dot
    for (int k = 0; k < 3; k++) {
        char* end;
        if (!(k == 0 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))) { return NULL; }
        errno = 0;
        field[k] = strtoul(p, &end, k == 0 ? 16 : 10);
        if (errno != 0 || *end != '.' || (k == 0 && end - p != 8)) { return NULL; }
        p = end + 1;
    }
    if (*p == '\0' || field[1] == 0 || field[1] > INT_MAX) { return NULL; }
    *host = (unsigned)field[0];
    *pid = (long)field[1];
    return p;
}

// Is `name` a temporary file whose writer is gone (a process of this machine that no longer
// exists: killed in the middle of a write)? Only such a file may be removed: a user's
// files, and the writes in progress of another running program (a tokenizer writing shards
// into the same folder), are never touched. Where `target` is not NULL it gets the name of
// the file the temporary one was writing.
static int temporary_is_orphan(const char* name, const char** target) {
    unsigned host;
    long pid;
    const char* t = temporary_target(name, &host, &pid);
    if (target != NULL) { *target = t; }
    return t != NULL && host == host_id() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

// test hook: when the environment variable LLMC_SLOW_WRITE_MS is set, every atomic
// write sleeps that long before its commit, so a test can kill a process mid-save
static void atomic_slow_write_hook(void) {
    const char* ms = getenv("LLMC_SLOW_WRITE_MS");
    if (ms != NULL) { usleep((useconds_t)atoi(ms) * 1000); }
}

// the slot of pending_tmp that holds `tmp` (NULL: a free slot)
static int pending_tmp_slot(const char* tmp) {
    for (int i = 0; i < MAX_PENDING_TMP; i++) { if (pending_tmp[i] == tmp) { return i; } }
    fatal("more than %d files written at once", MAX_PENDING_TMP);
}

// refuses a path that a crash-safe write cannot write: one whose temporary name (the path
// with TMP_PREFIX, 8 hex digits, a process id and a write number, each with its dot, before
// its file name) would not fit PATH_MAX. A program that writes several files checks each
// of them first, before it creates anything (./tasks write).
#define TMP_NAME_EXTRA (sizeof(TMP_PREFIX) - 1 + 9 + 11 + 11)
static void atomic_path_check(const char* path) {
    if (strlen(path) + TMP_NAME_EXTRA >= PATH_MAX) { fatal("path too long: %s", path); }
}

static void atomic_open(AtomicFile* af, const char* path) {
    static unsigned counter = 0; // writes of this process so far
    atomic_path_check(path);
    refuse_special_file(path, 1);
    strcpy(af->path, path);
    const char* slash = strrchr(path, '/');
    int dir_len = slash == NULL ? 0 : (int)(slash - path + 1); // the directory, with its slash
    snprintf(af->tmp_path, sizeof(af->tmp_path), "%.*s" TMP_PREFIX "%08x.%d.%u.%s", dir_len, path, host_id(),
             (int)getpid(), counter++, path + dir_len);
    // a new file (O_EXCL): never through a link or over a file that is there, but for one
    // that an earlier process with this process id left (this name is this process's)
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST && unlink(af->tmp_path) == 0) { fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0644); }
    af->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (af->f == NULL) { fatal("cannot write %s (%s)", af->tmp_path, strerror(errno)); }
    pending_tmp[pending_tmp_slot(NULL)] = af->tmp_path;
}

static void atomic_write(AtomicFile* af, const void* ptr, size_t size, size_t n) {
    fwrite_check(ptr, size, n, af->f, af->tmp_path);
}

static void atomic_commit(AtomicFile* af) {
    if (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0) {
        fatal("cannot flush %s (%s)", af->tmp_path, strerror(errno));
    }
    if (fclose(af->f) != 0) { fatal("cannot close %s (%s)", af->tmp_path, strerror(errno)); }
    af->f = NULL;
    atomic_slow_write_hook();
    refuse_special_file(af->path, 1); // a FIFO or device made there since the open
    if (rename(af->tmp_path, af->path) != 0) {
        fatal("cannot rename %s to %s (%s)", af->tmp_path, af->path, strerror(errno));
    }
    pending_tmp[pending_tmp_slot(af->tmp_path)] = NULL;
    // fsync the directory so that the rename itself is durable
    char dir[PATH_MAX];
    strcpy(dir, af->path);
    char* slash = strrchr(dir, '/');
    if (slash == NULL) { strcpy(dir, "."); } else if (slash == dir) { dir[1] = '\0'; } else { *slash = '\0'; }
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) { fsync(fd); close(fd); }
}

// ----------------------------------------------------------------------------
// the evaluations' tables (extrapolation.csv, positions.csv, hellaswag.csv, passkey.csv, tasks.csv):
// each evaluation appends its rows, every row with the step it was made at (column `step`),
// so a run keeps the rows of all its evaluations. An append is a crash-safe rewrite: the
// header, the rows the file holds, the new rows. A file there whose first line is not the
// table's header (another program's, or a table of an older format) is refused with one
// line, never overwritten.

// the path of the table <dir>/<name>
static void csv_path(char* path, size_t size, const char* dir, const char* name) {
    if (snprintf(path, size, "%s/%s", dir, name) >= (int)size) { fatal("path too long: %s/%s", dir, name); }
}

// the table at `path`, opened after its header line; NULL if there is none (or a symbolic
// link, which the rename replaces)
static FILE* csv_existing(const char* path, const char* header) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        refuse_special_file(path, 1);
        return NULL;
    }
    FILE* f = fopen_read_regular(path);
    char* line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, f) < 0 || strcmp(line, header) != 0) {
        fatal("%s is not this program's table (its first line is not '%.*s'; a file of another program, or of an "
              "older format): move it away, it is not overwritten", path, (int)strlen(header) - 1, header);
    }
    free(line);
    return f;
}

// the number of the column `name` in a header line (from 0)
static int csv_column(const char* header, const char* name) {
    size_t n = strlen(name);
    int col = 0;
    for (const char* p = header; *p != '\0'; col++) {
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\n')) { return col; }
        p = strchr(p, ',');
        if (p == NULL) { break; }
        p++;
    }
    fatal("the header '%s' has no column '%s'", header, name);
}

// Opens the table <dir>/<name> for an append: `af` gets the header and the rows the file
// holds whose step is at most max_step (INT_MAX: all), ready for csv_row and atomic_commit.
static void csv_open(AtomicFile* af, const char* dir, const char* name, const char* header, int max_step) {
    char path[PATH_MAX];
    csv_path(path, sizeof(path), dir, name);
    FILE* old = csv_existing(path, header);
    atomic_open(af, path);
    atomic_write(af, header, 1, strlen(header));
    if (old == NULL) { return; }
    int col = csv_column(header, "step");
    char* line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, old)) > 0) {
        if (max_step < INT_MAX) {
            const char* p = line;
            for (int k = 0; k < col && p != NULL; k++) { p = strchr(p, ','); p = p != NULL ? p + 1 : NULL; }
            char* end = NULL;
            long step = p != NULL ? strtol(p, &end, 10) : 0;
            if (p == NULL || end == p || (*end != ',' && *end != '\n')) { fatal("%s: a row without a step: %.80s", path, line); }
            if (step > max_step) { continue; }
        }
        atomic_write(af, line, 1, (size_t)n);
    }
    if (ferror(old)) { fatal("read error in %s (%s)", path, strerror(errno)); }
    free(line);
    fclose(old);
}

// Before a run evaluates: the table <dir>/<name> must be absent or this table, and a
// training run (max_step: the step it starts from, that of its checkpoint or 0; INT_MAX
// otherwise) drops the rows of the steps after it, which it makes again.
static void csv_prepare(const char* dir, const char* name, const char* header, int max_step) {
    char path[PATH_MAX];
    csv_path(path, sizeof(path), dir, name);
    FILE* old = csv_existing(path, header);
    if (old == NULL) { return; }
    fclose(old);
    if (max_step == INT_MAX) { return; }
    AtomicFile af;
    csv_open(&af, dir, name, header, max_step);
    atomic_commit(&af);
}

// one row of a table
__attribute__((format(printf, 2, 3)))
static void csv_row(AtomicFile* af, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vfprintf(af->f, fmt, ap);
    va_end(ap);
    if (n < 0) { fatal("write error in %s (%s)", af->tmp_path, strerror(errno)); }
}

// ----------------------------------------------------------------------------
// strict parsing of command-line values: the whole string must be a number in range

// splits a flag's comma list in place (buf holds a copy of the value; the trainers' lists and
// ./tasks' -l): single commas between items, an empty list or item is an error; returns the
// number of items (expected says what the items are, for that error: "lengths separated by
// commas, ...")
static int split_list(char* buf, char** items, int max, const char* flag, const char* expected) {
    int n = 0;
    for (char* item = buf;;) {
        char* comma = strchr(item, ',');
        if (comma != NULL) { *comma = '\0'; }
        if (item[0] == '\0') { fatal("flag %s expects %s", flag, expected); }
        if (n == max) { fatal("flag %s: at most %d items", flag, max); }
        items[n++] = item;
        if (comma == NULL) { return n; }
        item = comma + 1;
    }
}

static long parse_long(const char* flag, const char* s, long lo, long hi) {
    char* end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0) { fatal("flag %s expects an integer, got '%s'", flag, s); }
    if (v < lo || v > hi) { fatal("flag %s must be in [%ld, %ld], got %ld", flag, lo, hi, v); }
    return v;
}

static float parse_float(const char* flag, const char* s, float lo, float hi) {
    char* end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v != v) { fatal("flag %s expects a number, got '%s'", flag, s); }
    if (v < lo || v > hi) { fatal("flag %s must be in [%g, %g], got %g", flag, lo, hi, v); }
    return v;
}

#endif // LLMC_UTILS_H
