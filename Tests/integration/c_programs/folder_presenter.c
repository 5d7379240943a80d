/* A folder's presenter in C (issue 31, SPEC S27c), for test_c_subitems.py:
 * lists the granted folder FOLDER, then prints one line per notice,
 * "KIND PATH [OLD_PATH]", until SECONDS pass without one. Subitems are
 * told with the kinds of scopefs.h (SCOPEFS_NOTICE_APPEARED, ...).
 *
 *   folder_presenter FOLDER SECONDS
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scopefs.h>

static int print_notice(const struct scopefs_notice *notice, void *context)
{
    const char *kind = notice->kind;
    (void)context;
    if (strcmp(kind, SCOPEFS_NOTICE_APPEARED) && strcmp(kind, SCOPEFS_NOTICE_MOVED) &&
        strcmp(kind, SCOPEFS_NOTICE_DELETED) && strcmp(kind, SCOPEFS_NOTICE_CHANGED))
        kind = "other";
    printf("%s %s%s%s\n", kind, notice->path, notice->old_path ? " " : "", notice->old_path ? notice->old_path : "");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    DIR *folder;

    if (argc != 3) {
        fprintf(stderr, "usage: folder_presenter FOLDER SECONDS\n");
        return 64;
    }
    if (scopefs_start_accessing(argv[1]) < 0) {
        perror(argv[1]);
        return 1;
    }
    folder = opendir(argv[1]); /* what a folder's presenter shows */
    if (folder) {
        while (readdir(folder))
            ;
        closedir(folder);
    }
    printf("ready\n");
    fflush(stdout);
    if (scopefs_watch(print_notice, NULL, atof(argv[2]), NULL) < 0) {
        perror("scopefs_watch");
        return 1;
    }
    printf("done\n");
    return 0;
}
