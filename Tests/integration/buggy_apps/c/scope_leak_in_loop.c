/* Leaks a scope in a loop: reloads its document five times, starting
 * access on every pass and stopping once at the end, so it exits with
 * four scopes counted: a leak (SPEC S8, S11). The fixed twin balances
 * every start with a stop on the same pass. */
#include <fcntl.h>

#include "corpus_app.h"

int main(int argc, char **argv) {
    parse(argc, argv);
    for (int pass = 0; pass < 5; pass++) {
        if (scope(document, "start") != 0) return 1; /* BUG (without --fixed): a start on every pass */
        int fd = open(document, O_RDONLY);
        if (fd < 0) return 1;
        close(fd);
        if (fixed) scope(document, "stop"); /* FIXED: one stop per start */
    }
    if (!fixed) scope(document, "stop"); /* BUG: one stop for five starts */
    say("done");
    return 0;
}
