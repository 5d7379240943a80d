/* Appends a line to a document under a write claim (issue 17, file
 * coordination like NSFileCoordinator): other apps' coordinated readers
 * and writers wait until the claim ends. The claim is held until a line
 * arrives on standard input (a slow save, for the demonstration).
 *
 * After the README's session and docs/CLIENTS.md's world ($FILE), from
 * the checkout:
 *
 *   $ make -C clients/c
 *   $ cc docs/examples/coordinate.c -Iclients/c/include -Lclients/c/build -lscopefs \
 *         -Wl,-rpath,$PWD/clients/c/build -o clients/c/build/coordinate
 *   $ echo saved | scopefs run --app com.example.app --expose "$PWD/clients/c/build" -- \
 *         "$PWD/clients/c/build/coordinate" "$FILE" "a new line"
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <scopefs.h>

int main(int argc, char **argv)
{
    unsigned long long claim;
    char go[16];
    FILE *file;
    int ok;

    if (argc != 3) {
        fprintf(stderr, "usage: coordinate PATH LINE\n");
        return 64;
    }
    claim = scopefs_coordinate(argv[1], SCOPEFS_WRITING, 10, NULL);
    if (!claim) {
        fprintf(stderr, "coordinate: %s\n", errno == ETIMEDOUT ? "another app holds the document" : strerror(errno));
        return 1;
    }
    printf("claimed %s\n", argv[1]);
    fflush(stdout);
    if (!fgets(go, sizeof go, stdin)) /* end of input goes on too */
        go[0] = '\0';
    scopefs_start_accessing(argv[1]); /* security-scoped: start before writing */
    file = fopen(argv[1], "a");
    ok = file && fprintf(file, "%s\n", argv[2]) > 0;
    if (file && fclose(file) != 0)
        ok = 0;
    scopefs_stop_accessing(argv[1]);
    if (scopefs_release(claim, NULL) < 0) /* the process's exit would end it too */
        perror("release");
    printf("%s\n", ok ? "released" : "write failed");
    return ok ? 0 : 1;
}
