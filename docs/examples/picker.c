/* Asks the user for a text document and prints its first line (issue 17).
 *
 *   scopefs agent &
 *   cc picker.c -Iclients/c/include -Lbuild -lscopefs -o picker
 *   scopefs run --app com.example.app -- ./picker
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
