/* What the C apps of the corpus share (the Python and Swift apps have the
 * same): the command line `APP [--fixed] DOCUMENT`, the document relative
 * to $SCOPEFS_MOUNT (the app's view of the mount, set by `scopefs run`),
 * security scopes through plain extended attributes (docs/API.md, SPEC
 * S12: no library), and one wait, for the revoke the test makes once the
 * app printed READY. */
#ifndef CORPUS_APP_H
#define CORPUS_APP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static int fixed;               /* --fixed: the twin without the bug */
static char document[4096];

static inline void parse(int argc, char **argv) {
    const char *relative = "";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fixed") == 0) fixed = 1;
        else relative = argv[i];
    }
    const char *mount = getenv("SCOPEFS_MOUNT");
    snprintf(document, sizeof document, "%s/%s", mount ? mount : ".", relative);
}

/* A line on standard output, at once (a test reads it while the app runs). */
static inline void say(const char *line) {
    printf("%s\n", line);
    fflush(stdout);
}

/* start or stop accessing (the getxattr forms: they work on any mode bits). */
static inline int scope(const char *path, const char *action) {
    char name[64], answer[16];
    snprintf(name, sizeof name, "user.scopefs.%s", action);
    return getxattr(path, name, answer, sizeof answer) < 0 ? -1 : 0;
}

/* Until the grant covering PATH is revoked, as user.scopefs.grant-state
 * says (a control attribute, never denied, SPEC S9). Once it does, the
 * revoke is in force for the next read, a cached page included (S14). */
static inline void wait_until_revoked(const char *path) {
    for (int i = 0; i < 1000; i++) {
        char state[16] = {0};
        if (getxattr(path, "user.scopefs.grant-state", state, sizeof state - 1) > 0 &&
            strcmp(state, "revoked") == 0)
            return;
        usleep(10000);
    }
    fprintf(stderr, "the test never revoked the document\n");
    exit(2);
}

#endif
