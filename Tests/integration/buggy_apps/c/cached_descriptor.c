/* Caches a descriptor: opens its document once and keeps reading through
 * that descriptor. After a revoke the read fails with EPERM (SPEC S14);
 * the buggy app takes a failed read for the end of a corrupt document and
 * aborts. The fixed twin closes the descriptor, tells the user and ends
 * cleanly. */
#include <fcntl.h>

#include "corpus_app.h"

int main(int argc, char **argv) {
    parse(argc, argv);
    char buffer[64];
    if (scope(document, "start") != 0) return 1;
    int fd = open(document, O_RDONLY);
    if (fd < 0 || pread(fd, buffer, sizeof buffer, 0) < 0) return 1;
    say("READY");
    wait_until_revoked(document);
    if (pread(fd, buffer, sizeof buffer, 0) < 0) {
        if (!fixed) {
            fprintf(stderr, "corrupt document\n");
            abort(); /* BUG: the cached descriptor's EPERM is not expected */
        }
        close(fd); /* FIXED: the descriptor is dropped, the user told */
        say("lost access to the document");
    }
    scope(document, "stop");
    return 0;
}
