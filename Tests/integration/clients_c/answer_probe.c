/*
 * answer_probe.c — drives one call of the C library (clients/c) against
 * whatever answers on STATE/control.sock, for test_c_client_answers.py,
 * whose fake daemon sends broken and hostile answers. Prints one line per
 * result, strings in hex (paths are bytes):
 *   error ENAME | path HEX | stale N | claim N | ok
 *   notice KIND PATH OLD|- GRANT | query EVENT URL LOCAL DISPLAY EXTERNAL
 *
 *   answer_probe STATE resolve TOKEN
 *   answer_probe STATE pick                   (mode "open", any type, several)
 *   answer_probe STATE pick-items ITEM...     (mode "export")
 *   answer_probe STATE coordinate PATH        (writing, 1 s)
 *   answer_probe STATE release CLAIM
 *   answer_probe STATE watch SECONDS
 *   answer_probe STATE query SECONDS [GLOB]
 */
#include <scopefs.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_hex(const char *s)
{
    if (!s) {
        fputs(" -", stdout);
        return;
    }
    putchar(' ');
    if (!*s)
        putchar('.'); /* the empty string */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        printf("%02x", *p);
}

static int failed(void)
{
    printf("error %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "unknown");
    return 0; /* an error is an answer: only a crash or a sanitizer fails the process */
}

static int on_notice(const struct scopefs_notice *notice, void *context)
{
    (void)context;
    fputs("notice", stdout);
    put_hex(notice->kind);
    put_hex(notice->path);
    put_hex(notice->old_path);
    printf(" %lld\n", notice->grant);
    return 0;
}

static int on_result(const char *event, const struct scopefs_query_result *result, void *context)
{
    (void)context;
    printf("query %s", event);
    if (result) {
        put_hex(result->url);
        put_hex(result->url_in_local_container);
        put_hex(result->container_display_name);
        printf(" %d", result->is_external_document);
    }
    putchar('\n');
    return 0;
}

static int paths(char **list)
{
    if (!list)
        return failed();
    for (char **p = list; *p; p++) {
        fputs("path", stdout);
        put_hex(*p);
        putchar('\n');
    }
    scopefs_free_paths(list);
    return 0;
}

int main(int argc, char **argv)
{
    const char *state, *op;

    if (argc < 3) {
        fputs("usage: answer_probe STATE OP [ARG...]\n", stderr);
        return 64;
    }
    state = argv[1];
    op = argv[2];
    if (strcmp(op, "resolve") == 0 && argc == 4) {
        int stale = -1;
        char *path = scopefs_bookmark_resolve(argv[3], state, &stale);

        if (!path)
            return failed();
        fputs("path", stdout);
        put_hex(path);
        printf("\nstale %d\n", stale);
        free(path);
        return 0;
    }
    if (strcmp(op, "pick") == 0)
        return paths(scopefs_pick("open", NULL, 1, state));
    if (strcmp(op, "pick-items") == 0 && argc > 3)
        return paths(scopefs_pick_items("export", (const char *const *)argv + 3, state));
    if (strcmp(op, "coordinate") == 0 && argc == 4) {
        unsigned long long claim = scopefs_coordinate(argv[3], SCOPEFS_WRITING, 1, state);

        if (!claim)
            return failed();
        printf("claim %llu\n", claim);
        return 0;
    }
    if (strcmp(op, "release") == 0 && argc == 4) {
        if (scopefs_release(strtoull(argv[3], NULL, 10), state) < 0)
            return failed();
        puts("ok");
        return 0;
    }
    if (strcmp(op, "watch") == 0 && argc == 4) {
        if (scopefs_watch(on_notice, NULL, atof(argv[3]), state) < 0)
            return failed();
        puts("ok");
        return 0;
    }
    if (strcmp(op, "query") == 0 && (argc == 4 || argc == 5)) {
        if (scopefs_query("all", argc == 5 ? argv[4] : NULL, on_result, NULL, atof(argv[3]), state) < 0)
            return failed();
        puts("ok");
        return 0;
    }
    fprintf(stderr, "answer_probe: unknown operation or arguments: %s\n", op);
    return 64;
}
