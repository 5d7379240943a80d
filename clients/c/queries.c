/*
 * queries.c — live queries of the app's documents (issue 17, docs/API.md
 * "Live queries", like NSMetadataQuery): a "query" request answers the
 * documents and a digest of them; asking again with the digest waits until
 * the documents differ, and the library reports what changed.
 */
#include "scopefs.h"

#include "control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest one long poll waits, so that a dead daemon is noticed. */
#define LONGEST_POLL_SECONDS 10.0

/* One document, its paths in the app's view; owned strings (never NULL). */
struct document {
    char *url;
    char *local;   /* url_in_local_container */
    char *display; /* container_display_name */
    int external;  /* is_external_document */
};

/* What one answer said. */
struct documents {
    struct document *items;
    size_t count;
    char *digest; /* NULL when the answer had none */
};

static void free_documents(struct documents *d)
{
    for (size_t k = 0; k < d->count; k++) {
        free(d->items[k].url);
        free(d->items[k].local);
        free(d->items[k].display);
    }
    free(d->items);
    free(d->digest);
    memset(d, 0, sizeof *d);
}

/* A copy of a member string ("" when absent), in the app's view when
 * `is_path`; -1 with errno set. */
static int copy_member(json_object *object, const char *key, int is_path, char **out)
{
    const char *value = NULL;
    int found = member_string(object, key, &value);

    if (found < 0) {
        errno = EPROTO;
        return -1;
    }
    *out = found == 0 ? strdup("") : is_path ? path_in_app_view(value) : strdup(value);
    if (!*out) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* {"url", "urlInLocalContainer", "containerDisplayName", "isExternalDocument"} */
static int read_document(json_object *item, struct document *out)
{
    if (!json_object_is_type(item, json_type_object) || member_bool(item, "isExternalDocument", &out->external) < 0) {
        errno = EPROTO;
        return -1;
    }
    if (copy_member(item, "url", 1, &out->url) < 0 || copy_member(item, "urlInLocalContainer", 1, &out->local) < 0 ||
        copy_member(item, "containerDisplayName", 0, &out->display) < 0)
        return -1;
    return 0;
}

/* The documents and digest of an answer that says ok; -1 with errno set. */
static int read_documents(json_object *answer, struct documents *out)
{
    json_object *results = NULL;
    const char *digest = NULL;
    size_t count;

    memset(out, 0, sizeof *out);
    if (member_array(answer, "results", &results) < 0 || member_string(answer, "digest", &digest) < 0) {
        errno = EPROTO;
        return -1;
    }
    count = results ? json_object_array_length(results) : 0;
    out->items = calloc(count ? count : 1, sizeof *out->items);
    out->digest = digest ? strdup(digest) : NULL;
    if (!out->items || (digest && !out->digest)) {
        free_documents(out);
        errno = ENOMEM;
        return -1;
    }
    for (size_t k = 0; k < count; k++) {
        out->count = k + 1; /* so that free_documents frees a half-read one */
        if (read_document(json_object_array_get_idx(results, k), &out->items[k]) < 0) {
            int err = errno;

            free_documents(out);
            errno = err;
            return -1;
        }
    }
    return 0;
}

/* The daemon's codes are the CLI's exit codes (docs/API.md). */
static int query_error(long long code)
{
    return code == 77 ? EPERM : code == 64 ? EINVAL : EPROTO;
}

/* One query request (digest NULL: answer at once); fills *out. */
static int query_once(const char *socket_path, const char *scope, const char *name_glob, const char *digest,
                      double wait, struct documents *out)
{
    json_object *request = control_request("query"), *answer;
    long long code = -1;
    int ok, err;

    if (request && (request_add(request, "scope", json_object_new_string(scope)) < 0 ||
                    (name_glob && request_add(request, "name", json_object_new_string(name_glob)) < 0) ||
                    (digest && request_add(request, "digest", json_object_new_string(digest)) < 0) ||
                    request_add(request, "waitSeconds", request_seconds(digest ? wait : 0.0)) < 0)) {
        json_object_put(request);
        request = NULL;
    }
    if (!request) {
        errno = ENOMEM;
        return -1;
    }
    answer = control_ask(socket_path, request);
    json_object_put(request);
    if (!answer)
        return -1;
    ok = answer_ok(answer, &code);
    err = ok < 0 ? EPROTO : ok == 0 ? query_error(code) : read_documents(answer, out) < 0 ? errno : 0;
    json_object_put(answer);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

static int call(scopefs_query_handler handler, void *context, const char *event, const struct document *d)
{
    struct scopefs_query_result result;

    if (!d)
        return handler(event, NULL, context);
    result.url = d->url;
    result.url_in_local_container = d->local;
    result.container_display_name = d->display;
    result.is_external_document = d->external;
    return handler(event, &result, context);
}

static const struct document *find_document(const struct documents *d, const char *local)
{
    for (size_t k = 0; k < d->count; k++) {
        if (strcmp(d->items[k].local, local) == 0)
            return &d->items[k];
    }
    return NULL;
}

static int same_document(const struct document *a, const struct document *b)
{
    return strcmp(a->url, b->url) == 0 && strcmp(a->display, b->display) == 0 && a->external == b->external;
}

/* Calls the handler for what changed from `known` to `now`; nonzero: stop. */
static int report_changes(scopefs_query_handler handler, void *context, const struct documents *known,
                          const struct documents *now, int *changed)
{
    for (size_t k = 0; k < now->count; k++) {
        const struct document *was = find_document(known, now->items[k].local);

        if (was && same_document(was, &now->items[k]))
            continue;
        *changed = 1;
        if (call(handler, context, was ? "changed" : "added", &now->items[k]))
            return 1;
    }
    for (size_t k = 0; k < known->count; k++) {
        if (find_document(now, known->items[k].local))
            continue;
        *changed = 1;
        if (call(handler, context, "removed", &known->items[k]))
            return 1;
    }
    return 0;
}

static double seconds_now(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

SCOPEFS_EXPORT int scopefs_query(const char *scope, const char *name_glob, scopefs_query_handler handler,
                                 void *context, double timeout_seconds, const char *state_dir)
{
    struct documents known = { 0 }, now = { 0 };
    double quiet = 0, quiet_since;
    char *socket_path;
    int stop = 0, err;

    if (!handler) {
        errno = EINVAL;
        return -1;
    }
    scope = scope ? scope : "all";
    socket_path = control_socket_path(state_dir);
    if (!socket_path || query_once(socket_path, scope, name_glob, NULL, 0, &known) < 0)
        goto fail;
    for (size_t k = 0; k < known.count && !stop; k++)
        stop = call(handler, context, "result", &known.items[k]);
    if (!stop)
        stop = call(handler, context, "finishedGathering", NULL);
    quiet_since = seconds_now();
    while (!stop && (timeout_seconds < 0 || quiet < timeout_seconds)) {
        double left = timeout_seconds - quiet;
        double wait = timeout_seconds < 0 || left > LONGEST_POLL_SECONDS ? LONGEST_POLL_SECONDS : left;
        int changed = 0;

        if (query_once(socket_path, scope, name_glob, known.digest, wait, &now) < 0)
            goto fail;
        stop = report_changes(handler, context, &known, &now, &changed);
        /* The daemon answers early when anything differs: time, not waits, counts. */
        if (changed)
            quiet_since = seconds_now();
        quiet = seconds_now() - quiet_since;
        free_documents(&known);
        known = now;
    }
    free_documents(&known);
    free(socket_path);
    return 0;
fail:
    err = errno;
    free_documents(&known);
    free(socket_path);
    errno = err;
    return -1;
}
