/*
 * notices.c — what the app's presenters hear (issue 17, docs/API.md
 * "Presenters"): a "watch" request subscribes, then long polls with
 * "after": CURSOR return the notices since.
 */
#include "scopefs.h"

#include "control.h"

#include <errno.h>
#include <stdlib.h>

/* The longest one long poll waits, so that a dead daemon is noticed. */
#define LONGEST_POLL_SECONDS 10.0

/* {"op":"watch"} (subscribe: `after` NULL) or {"op":"watch","after":N,"waitSeconds":W};
 * returns an answer that says ok, or NULL with errno set. */
static json_object *watch_once(const char *socket_path, const unsigned long long *after, double wait)
{
    json_object *request = control_request("watch"), *answer;
    long long code;
    int ok;

    if (request && after &&
        (request_add(request, "after", json_object_new_uint64(*after)) < 0 ||
         request_add(request, "waitSeconds", request_seconds(wait)) < 0)) {
        json_object_put(request);
        request = NULL;
    }
    if (!request) {
        errno = ENOMEM;
        return NULL;
    }
    answer = control_ask(socket_path, request);
    json_object_put(request);
    if (!answer)
        return NULL;
    ok = answer_ok(answer, &code);
    if (ok != 1) {
        json_object_put(answer);
        errno = ok < 0 ? EPROTO : EPERM; /* the daemon refuses a watch only to non-apps */
        return NULL;
    }
    return answer;
}

/* One notice {"kind", "path", "oldPath", "grant"} as the API shows it;
 * *paths keeps what it allocated (free both). -1: EPROTO or ENOMEM. */
static int read_notice(json_object *item, struct scopefs_notice *notice, char *paths[2])
{
    const char *kind = NULL, *path = NULL, *old_path = NULL;
    long long grant = 0;

    if (!json_object_is_type(item, json_type_object) || member_string(item, "kind", &kind) < 0 ||
        member_string(item, "path", &path) < 0 || member_string(item, "oldPath", &old_path) < 0 ||
        member_signed(item, "grant", &grant) < 0) {
        errno = EPROTO;
        return -1;
    }
    paths[0] = path ? path_in_app_view(path) : NULL;
    paths[1] = old_path ? path_in_app_view(old_path) : NULL;
    if ((path && !paths[0]) || (old_path && !paths[1])) {
        errno = ENOMEM;
        return -1;
    }
    notice->kind = kind ? kind : "";
    notice->path = paths[0] ? paths[0] : "";
    notice->old_path = paths[1];
    notice->grant = grant;
    return 0;
}

/* Calls the handler for each notice of an answer; 1: the handler said
 * stop, 0: go on, -1 with errno set: a broken answer. *any: there were. */
static int deliver(json_object *answer, scopefs_notice_handler handler, void *context, int *any)
{
    json_object *notices = NULL;
    size_t count;

    if (member_array(answer, "notices", &notices) < 0) {
        errno = EPROTO;
        return -1;
    }
    count = notices ? json_object_array_length(notices) : 0;
    *any = count > 0;
    for (size_t k = 0; k < count; k++) {
        struct scopefs_notice notice;
        char *paths[2] = { NULL, NULL };
        int stop = read_notice(json_object_array_get_idx(notices, k), &notice, paths);

        if (stop == 0)
            stop = handler(&notice, context) ? 1 : 0;
        free(paths[0]);
        free(paths[1]);
        if (stop)
            return stop;
    }
    return 0;
}

/* The answer's "cursor", or `cursor` when it has none (or 0); -1: EPROTO. */
static int next_cursor(json_object *answer, unsigned long long *cursor)
{
    unsigned long long next = 0;

    if (member_unsigned(answer, "cursor", &next) < 0) {
        errno = EPROTO;
        return -1;
    }
    if (next)
        *cursor = next;
    return 0;
}

SCOPEFS_EXPORT int scopefs_watch(scopefs_notice_handler handler, void *context, double timeout_seconds,
                                 const char *state_dir)
{
    json_object *answer;
    unsigned long long cursor = 0;
    double quiet = 0;
    char *socket_path;
    int stop = 0, err;

    if (!handler) {
        errno = EINVAL;
        return -1;
    }
    socket_path = control_socket_path(state_dir);
    if (!socket_path)
        return -1;
    answer = watch_once(socket_path, NULL, 0);
    if (!answer || next_cursor(answer, &cursor) < 0)
        goto fail;
    json_object_put(answer);
    answer = NULL;
    while (!stop && (timeout_seconds < 0 || quiet < timeout_seconds)) {
        double left = timeout_seconds - quiet;
        double wait = timeout_seconds < 0 || left > LONGEST_POLL_SECONDS ? LONGEST_POLL_SECONDS : left;
        int any = 0;

        answer = watch_once(socket_path, &cursor, wait);
        if (!answer || next_cursor(answer, &cursor) < 0)
            goto fail;
        stop = deliver(answer, handler, context, &any);
        if (stop < 0)
            goto fail;
        quiet = any ? 0 : quiet + wait;
        json_object_put(answer);
        answer = NULL;
    }
    free(socket_path);
    return 0;
fail:
    err = errno;
    json_object_put(answer);
    free(socket_path);
    errno = err;
    return -1;
}
