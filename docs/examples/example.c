/*
 * Example app for the ScopeFS C client library (docs/CLIENTS.md, SPEC S31).
 *
 * After the README's session and docs/CLIENTS.md's world ($FILE), from
 * the checkout:
 *
 *   $ make -C clients/c
 *   $ cc -o clients/c/build/example docs/examples/example.c -Iclients/c/include \
 *         -Lclients/c/build -lscopefs -Wl,-rpath,$PWD/clients/c/build
 *   $ scopefs run --app com.example.app --expose "$PWD/clients/c/build" -- "$PWD/clients/c/build/example" "$FILE"
 *
 * Shows strict mode (SPEC S9): before start the read fails with EPERM; after
 * start it works and the scope count is 1; after stop the count is 0. For a
 * folder it prints the first entry (by name) instead of the first line. A
 * container path needs no scope: start returns 0 and the count is
 * "not-needed". Same output format as the Swift and Python examples.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scopefs.h"

static const char *errno_name(int err)
{
    const char *name = strerrorname_np(err);
    return name ? name : "unknown errno";
}

static void print_count(const char *label, const char *path)
{
    long count = scopefs_scope_count(path);

    if (count == SCOPEFS_NOT_NEEDED)
        printf("%s: not-needed\n", label);
    else if (count < 0)
        printf("%s: error %s\n", label, errno_name(errno));
    else
        printf("%s: %ld\n", label, count);
}

/*
 * The first line of a file, or the first entry (by name) of a folder, into
 * out. Returns 0, or -1 with errno set; *is_dir tells which label applies.
 */
static int first_line(const char *path, char *out, size_t size, int *is_dir)
{
    struct stat st;

    out[0] = '\0';
    if (stat(path, &st) < 0)
        return -1;
    *is_dir = S_ISDIR(st.st_mode);
    if (*is_dir) {
        DIR *dir = opendir(path);
        struct dirent *entry;

        if (!dir)
            return -1;
        snprintf(out, size, "(empty)");
        int found = 0;
        while ((entry = readdir(dir)) != NULL) {
            if (!strcmp(entry->d_name, ".") || !strcmp(entry->d_name, ".."))
                continue;
            if (!found || strcmp(entry->d_name, out) < 0)
                snprintf(out, size, "%s", entry->d_name);
            found = 1;
        }
        closedir(dir);
        return 0;
    }
    FILE *file = fopen(path, "r");
    if (!file)
        return -1;
    if (!fgets(out, (int)size, file) && ferror(file)) {
        int err = errno;
        fclose(file);
        errno = err;
        return -1;
    }
    fclose(file);
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    char line[4096];
    int is_dir = 0, status = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH\n", argv[0]);
        return 64;
    }
    const char *path = argv[1];

    printf("path: %s\n", path);
    print_count("scope count before", path);
    if (first_line(path, line, sizeof line, &is_dir) < 0)
        printf("read before start: %s\n", errno_name(errno));
    else
        printf("read before start: ok\n");

    /* 1: counted, 0: not needed (container path), -1: error (errno set). */
    int started = scopefs_start_accessing(path);
    if (started < 0) {
        printf("start accessing: error %s\n", errno_name(errno));
        return 1;
    }
    printf("start accessing: %s\n", started ? "true" : "false");
    print_count("scope count during", path);

    if (first_line(path, line, sizeof line, &is_dir) < 0) {
        printf("first line: error %s\n", errno_name(errno));
        status = 1;
    } else {
        printf("%s: %s\n", is_dir ? "first entry" : "first line", line);
    }

    if (started) {
        if (scopefs_stop_accessing(path) < 0)
            printf("stop accessing: error %s\n", errno_name(errno));
        else
            printf("stop accessing: done\n");
    }
    print_count("scope count after", path);
    return status;
}
