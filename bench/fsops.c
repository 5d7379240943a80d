/*
 * fsops: the benchmark's workload helper. Each invocation runs ONE phase of a
 * workload in one process and times it itself with CLOCK_MONOTONIC, so that
 * process start-up (and, for ScopeFS, `scopefs run` and `scope exec`) is not
 * part of the measurement.
 *
 *   fsops [-o RESULTFILE] create DIR N SIZE     mkdir DIR, create N files of SIZE bytes
 *   fsops [-o RESULTFILE] stat DIR N            stat the N files
 *   fsops [-o RESULTFILE] list DIR [N]          readdir DIR once (no stat); with N,
 *                                               fail unless it lists N entries
 *   fsops [-o RESULTFILE] unlink DIR N          unlink the N files (then rmdir DIR, untimed)
 *   fsops [-o RESULTFILE] write FILE MIB        write MIB MiB in 1 MiB blocks, close
 *   fsops [-o RESULTFILE] read FILE (cold|warm) read the whole file in 1 MiB blocks;
 *                                               cold first drops the file's pages
 *                                               with posix_fadvise(DONTNEED)
 *   fsops [-o RESULTFILE] randread FILE COUNT   COUNT preads of 4 KiB at random
 *                                               4 KiB-aligned offsets (fixed seed)
 *   fsops [-o RESULTFILE] run CMD [ARGS...]     run CMD (stdout to /dev/null), time it
 *   fsops [-o RESULTFILE] floor KIND FILE N     N requests of one kind (bench/floor.py):
 *                                               lookup (stat of N names that do not
 *                                               exist, next to FILE), getattr (statx
 *                                               FORCE_SYNC), open (open + close),
 *                                               read4k (O_DIRECT pread of 4 KiB),
 *                                               getxattr (system.posix_acl_access)
 *   fsops revoke-reader FILE EVENTS CONTROL [SCOPEPATH]
 *                                               see revoke_reader() below
 *
 * Options before the phase: -o RESULTFILE, and -s START (a CLOCK_MONOTONIC
 * time in seconds to wait for before the phase; see start_at()).
 *
 * Each timed phase appends "RESULT <phase> <seconds> <bytes> <late>" to RESULTFILE
 * (or stdout). Exit status 0 on success; any failed call is reported on
 * stderr with its errno and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static const char *result_path;
static double late;  /* seconds the phase started after the -s time (0 without -s) */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *path) {
    fprintf(stderr, "fsops: %s %s: %s (errno %d)\n", what, path ? path : "", strerror(errno), errno);
    exit(1);
}

static void report(const char *phase, double seconds, long long bytes) {
    FILE *f = result_path ? fopen(result_path, "a") : stdout;
    if (!f) die("open result file", result_path);
    fprintf(f, "RESULT %s %.9f %lld %.6f\n", phase, seconds, bytes, late);
    if (f != stdout) fclose(f);
    else fflush(f);
}

static void name_of(char *out, size_t len, const char *dir, long i) {
    snprintf(out, len, "%s/f%05ld", dir, i);
}

static int op_create(const char *dir, long n, long size) {
    char path[4096];
    char *buf = calloc(1, size > 0 ? size : 1);
    memset(buf, 'x', size > 0 ? size : 1);
    double t0 = now();
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) die("mkdir", dir);
    for (long i = 0; i < n; i++) {
        name_of(path, sizeof path, dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) die("create", path);
        if (size > 0 && write(fd, buf, size) != size) die("write", path);
        if (close(fd) != 0) die("close", path);
    }
    report("create", now() - t0, (long long)n * size);
    free(buf);
    return 0;
}

static int op_stat(const char *dir, long n) {
    char path[4096];
    struct stat st;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        name_of(path, sizeof path, dir, i);
        if (stat(path, &st) != 0) die("stat", path);
    }
    report("stat", now() - t0, 0);
    return 0;
}

static int op_list(const char *dir, long expected) {
    double t0 = now();
    DIR *d = opendir(dir);
    if (!d) die("opendir", dir);
    long count = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)))
        count += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (errno) die("readdir", dir);
    closedir(d);
    double elapsed = now() - t0;
    if (expected >= 0 && count != expected) {
        fprintf(stderr, "fsops: listed %ld entries in %s, expected %ld\n", count, dir, expected);
        return 1;
    }
    report("list", elapsed, count);
    return 0;
}

static int op_unlink(const char *dir, long n) {
    char path[4096];
    double t0 = now();
    for (long i = 0; i < n; i++) {
        name_of(path, sizeof path, dir, i);
        if (unlink(path) != 0) die("unlink", path);
    }
    report("unlink", now() - t0, 0);
    if (rmdir(dir) != 0) die("rmdir", dir);
    return 0;
}

static int op_write(const char *file, long mib) {
    char *buf = malloc(MIB);
    for (long i = 0; i < MIB; i++) buf[i] = (char)(i * 7 + 3);
    double t0 = now();
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("open", file);
    for (long i = 0; i < mib; i++) {
        buf[0] = (char)i; /* each block differs a little */
        if (write(fd, buf, MIB) != MIB) die("write", file);
    }
    if (close(fd) != 0) die("close", file);
    report("write", now() - t0, (long long)mib * MIB);
    free(buf);
    return 0;
}

static int op_read(const char *file, const char *mode) {
    char *buf = malloc(MIB);
    int cold = strcmp(mode, "cold") == 0;
    if (cold) {
        /* Drop this file's cached pages (on a FUSE mount: the FUSE inode's
         * pages). The harness has also written 3 to /proc/sys/vm/drop_caches. */
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) die("open", file);
        if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) die("fadvise", file);
        close(fd);
    }
    double t0 = now();
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open", file);
    long long total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, MIB);
        if (r < 0) die("read", file);
        if (r == 0) break;
        total += r;
    }
    close(fd);
    report(cold ? "read-cold" : "read-warm", now() - t0, total);
    free(buf);
    return 0;
}

static int op_randread(const char *file, long count) {
    char buf[4096];
    uint64_t x = 0x9E3779B97F4A7C15ULL; /* xorshift64, fixed seed */
    double t0 = now();
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open", file);
    struct stat st;
    if (fstat(fd, &st) != 0) die("fstat", file);
    uint64_t blocks = (uint64_t)st.st_size / sizeof buf;
    if (blocks == 0) { errno = EINVAL; die("file too small", file); }
    for (long i = 0; i < count; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        if (pread(fd, buf, sizeof buf, (off_t)((x % blocks) * sizeof buf)) != sizeof buf)
            die("pread", file);
    }
    close(fd);
    report("randread", now() - t0, (long long)count * (long long)sizeof buf);
    return 0;
}

static int op_run(char **argv) {
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) die("fork", NULL);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "fsops: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) die("waitpid", NULL);
    double elapsed = now() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fsops: %s failed (status %d)\n", argv[0], status);
        return 1;
    }
    report("run", elapsed, 0);
    return 0;
}

static void say(int fd, const char *fmt, long long a, long long b) {
    char line[128];
    int n = snprintf(line, sizeof line, fmt, a, b);
    if (write(fd, line, n) != n) die("write events", NULL);
}

/*
 * Revocation probe. Keeps FILE open and preads its first 4 KiB in a tight
 * loop. Protocol over two FIFOs (lines):
 *   reader -> EVENTS:  "READY <ns>"             reading works
 *                      "DENIED <ns> <errno>"    first failed read (EPERM/EACCES),
 *                                               <ns> = CLOCK_MONOTONIC when it failed
 *                      "FAIL <ns> <errno>"      could not read again after restore
 *   CONTROL -> reader: "RESTORED"   grant restored: reopen (re-starting access on
 *                                   SCOPEPATH with user.scopefs.start if needed)
 *                      "QUIT"
 */
static int revoke_reader(const char *file, const char *events_path, const char *control_path,
                         const char *scope_path) {
    char buf[4096];
    int events = open(events_path, O_WRONLY | O_CLOEXEC);
    if (events < 0) die("open", events_path);
    int control = open(control_path, O_RDONLY | O_CLOEXEC);
    if (control < 0) die("open", control_path);
    FILE *ctl = fdopen(control, "r");
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open", file);
    say(events, "READY %lld %lld\n", now_ns(), 0);
    for (unsigned long i = 0;; i++) {
        if (pread(fd, buf, sizeof buf, 0) >= 0) {
            if ((i & 63) == 0) {
                struct pollfd p = {.fd = control, .events = POLLIN};
                if (poll(&p, 1, 0) > 0) return 0; /* QUIT (or EOF) while reading */
            }
            continue;
        }
        long long t = now_ns();
        int err = errno;
        if (err != EPERM && err != EACCES) die("pread", file);
        say(events, "DENIED %lld %lld\n", t, err);
        char line[64];
        if (!fgets(line, sizeof line, ctl) || strncmp(line, "RESTORED", 8) != 0) return 0;
        /* Read again: first on the old descriptor, then on a new one. */
        double deadline = now() + 5.0;
        while (pread(fd, buf, sizeof buf, 0) < 0) {
            close(fd);
            fd = open(file, O_RDONLY | O_CLOEXEC);
            if (fd >= 0 && pread(fd, buf, sizeof buf, 0) >= 0) break;
            err = errno;
            if (scope_path) setxattr(scope_path, "user.scopefs.start", "", 0, 0);
            if (now() > deadline) {
                say(events, "FAIL %lld %lld\n", now_ns(), err);
                return 1;
            }
            usleep(1000);
        }
        say(events, "READY %lld %lld\n", now_ns(), 0);
    }
}

static long num(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < 0) {
        fprintf(stderr, "fsops: bad number %s\n", s);
        exit(64);
    }
    return v;
}

/* -s START: wait until CLOCK_MONOTONIC reaches START (seconds) before the
 * phase, so that each phase starts at a time the caller chose however long
 * its wrapper (for ScopeFS: `scopefs run` and `scope exec`) took to start. */
static void start_at(double start) {
    struct timespec ts = {(time_t)start, (long)((start - (double)(time_t)start) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
    late = now() - start;
}

/* One FUSE request per iteration, whatever the kernel caches: distinct
 * missing names (LOOKUP), a forced attribute refresh (GETATTR), an open
 * (OPEN, then RELEASE and, for some daemons, FLUSH), a direct read (READ),
 * an ACL query (GETXATTR: the kernel caches no ACL of a FUSE file whose
 * daemon did not take FUSE_POSIX_ACL), an open of the file's folder
 * (OPENDIR, then RELEASEDIR: what a repeated `git status` pays per
 * folder). */
static int op_floor(const char *kind, const char *file, long n) {
    char path[4096];
    struct statx stx;
    void *block = NULL;
    int fd = -1;
    char folder[4096];
    snprintf(folder, sizeof folder, "%s", file);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = 0;
    if (!strcmp(kind, "read4k")) {
        if (posix_memalign(&block, 4096, 4096) != 0) die("posix_memalign", NULL);
        fd = open(file, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fd < 0) die("open O_DIRECT", file);
    }
    double t0 = now();
    for (long i = 0; i < n; i++) {
        if (!strcmp(kind, "lookup")) {
            snprintf(path, sizeof path, "%s.missing%07ld", file, i);
            if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &stx) == 0 || errno != ENOENT) die("lookup", path);
        } else if (!strcmp(kind, "getattr")) {
            if (statx(AT_FDCWD, file, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &stx) != 0) die("statx", file);
        } else if (!strcmp(kind, "open")) {
            int f = open(file, O_RDONLY | O_CLOEXEC);
            if (f < 0) die("open", file);
            close(f);
        } else if (!strcmp(kind, "read4k")) {
            if (pread(fd, block, 4096, 0) != 4096) die("pread", file);
        } else if (!strcmp(kind, "opendir")) {
            DIR *d = opendir(folder);
            if (!d) die("opendir", folder);
            closedir(d);
        } else if (!strcmp(kind, "getxattr")) {
            if (getxattr(file, "system.posix_acl_access", NULL, 0) >= 0 || (errno != ENODATA && errno != EOPNOTSUPP))
                die("getxattr", file);
        } else {
            fprintf(stderr, "fsops: unknown floor kind %s\n", kind);
            return 64;
        }
    }
    double elapsed = now() - t0;
    if (fd >= 0) close(fd);
    free(block);
    snprintf(path, sizeof path, "floor-%s", kind);
    report(path, elapsed, n);
    return 0;
}

int main(int argc, char **argv) {
    int a = 1;
    double start = 0;
    while (argc > a + 1 && argv[a][0] == '-') {
        if (!strcmp(argv[a], "-o")) result_path = argv[a + 1];
        else if (!strcmp(argv[a], "-s")) start = atof(argv[a + 1]);
        else break;
        a += 2;
    }
    if (start > 0) start_at(start);
    int n = argc - a;
    char **v = argv + a;
    if (n >= 4 && !strcmp(v[0], "create")) return op_create(v[1], num(v[2]), num(v[3]));
    if (n >= 3 && !strcmp(v[0], "stat")) return op_stat(v[1], num(v[2]));
    if (n >= 2 && !strcmp(v[0], "list")) return op_list(v[1], n >= 3 ? num(v[2]) : -1);
    if (n >= 3 && !strcmp(v[0], "unlink")) return op_unlink(v[1], num(v[2]));
    if (n >= 3 && !strcmp(v[0], "write")) return op_write(v[1], num(v[2]));
    if (n >= 3 && !strcmp(v[0], "read")) return op_read(v[1], v[2]);
    if (n >= 3 && !strcmp(v[0], "randread")) return op_randread(v[1], num(v[2]));
    if (n >= 2 && !strcmp(v[0], "run")) return op_run(v + 1);
    if (n >= 4 && !strcmp(v[0], "floor")) return op_floor(v[1], v[2], num(v[3]));
    if (n >= 4 && !strcmp(v[0], "revoke-reader"))
        return revoke_reader(v[1], v[2], v[3], n >= 5 ? v[4] : NULL);
    fprintf(stderr, "usage: see the comment at the top of bench/fsops.c\n");
    return 64;
}
