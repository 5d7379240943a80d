/* Asks the user for a text document and prints its first line (issue 17).
 *
 * After the README's session and docs/CLIENTS.md's world, from the
 * checkout (docs/examples/pick-file.json chooses the session's
 * local:Novel/chapter1.txt; or run `scopefs agent` in another terminal to
 * choose yourself):
 *
 *   $ make -C clients/c
 *   $ cc docs/examples/picker.c -Iclients/c/include -Lclients/c/build -lscopefs \
 *         -Wl,-rpath,$PWD/clients/c/build -o clients/c/build/picker
 *   $ scopefs agent --script docs/examples/pick-file.json --count 1 & sleep 1   # it waits for requests
 *   $ scopefs run --app com.example.app --expose "$PWD/clients/c/build" -- "$PWD/clients/c/build/picker"
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <scopefs.h>

int main(void)
{
    const char *types[] = { "public.plain-text", NULL };
    char **paths = scopefs_pick("open", types, 0, NULL);
    char line[256] = "";
    FILE *file;

    if (!paths) {
        fprintf(stderr, "pick: %s\n", errno == ECANCELED ? "cancelled" : strerror(errno));
        return 1;
    }
    if (scopefs_start_accessing(paths[0]) < 0) { /* security-scoped: start first */
        perror(paths[0]);
        scopefs_free_paths(paths);
        return 1;
    }
    file = fopen(paths[0], "r");
    if (file) {
        if (!fgets(line, sizeof line, file))
            line[0] = '\0';
        fclose(file);
    }
    printf("%s: %s", paths[0], line);
    scopefs_stop_accessing(paths[0]);
    scopefs_free_paths(paths);
    return file ? 0 : 1;
}
