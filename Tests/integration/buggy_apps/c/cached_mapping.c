/* Caches a mapping: maps its document and keeps reading the mapping.
 * After a revoke the kernel drops the mapped pages (SPEC S14) and the next
 * touch faults into a denied read: SIGBUS kills the buggy app. The fixed
 * twin copies the content out, unmaps at once, and reads the document
 * again through read(2), where a revoke is an error it can handle. */
#include <fcntl.h>
#include <sys/mman.h>

#include "corpus_app.h"

int main(int argc, char **argv) {
    parse(argc, argv);
    char copy[64];
    if (scope(document, "start") != 0) return 1;
    int fd = open(document, O_RDONLY);
    if (fd < 0) return 1;
    volatile const char *mapping = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) return 1;
    copy[0] = mapping[0];
    if (fixed) munmap((void *)mapping, 4096); /* FIXED: no mapping outlives the load */
    say("READY");
    wait_until_revoked(document);
    if (!fixed) copy[0] = mapping[0]; /* BUG: the cached mapping after a revoke: SIGBUS */
    if (pread(fd, copy, sizeof copy, 0) < 0) say("lost access to the document");
    close(fd);
    scope(document, "stop");
    return 0;
}
