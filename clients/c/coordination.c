/*
 * coordination.c — file coordination (issue 17, docs/API.md "File
 * coordination"): a read or write claim on one of the app's documents,
 * taken with a "coordinate" request and ended with "release".
 */
#include "scopefs.h"

#include "control.h"

#include <errno.h>

/* The longest wait the daemon grants one coordinate request. */
#define MAX_WAIT_SECONDS 60.0

/* The daemon's codes are the CLI's exit codes (docs/API.md). */
static int coordination_error(long long code)
{
    switch (code) {
    case 64: return EINVAL;
    case 66: return ENOENT;
    case 67: return ESRCH;
    case 75: return ETIMEDOUT;
    case 77: return EPERM;
    default: return EPROTO;
    }
}

/* Sends the request; returns its answer if it says ok, else NULL with
 * errno set. Frees the request. */
static json_object *ask(json_object *request, const char *state_dir)
{
    json_object *answer;
    long long code = -1;
    int ok;

    if (!request) {
        errno = ENOMEM;
        return NULL;
    }
    answer = control_ask_state(state_dir, request);
    json_object_put(request);
    if (!answer)
        return NULL;
    ok = answer_ok(answer, &code);
    if (ok != 1) {
        json_object_put(answer);
        errno = ok < 0 ? EPROTO : coordination_error(code);
        return NULL;
    }
    return answer;
}

SCOPEFS_EXPORT unsigned long long scopefs_coordinate(const char *path, enum scopefs_intent intent,
                                                     double timeout_seconds, const char *state_dir)
{
    json_object *request, *answer;
    unsigned long long claim = 0;

    if (path == NULL || (intent != SCOPEFS_READING && intent != SCOPEFS_WRITING) || !(timeout_seconds >= 0)) {
        errno = EINVAL;
        return 0;
    }
    request = control_request("coordinate");
    if (request && (request_add(request, "path", json_object_new_string(path)) < 0 ||
                    request_add(request, "intent", json_object_new_string(intent == SCOPEFS_WRITING ? "write" : "read")) < 0 ||
                    request_add(request, "waitSeconds", request_seconds(timeout_seconds > MAX_WAIT_SECONDS ? MAX_WAIT_SECONDS : timeout_seconds)) < 0)) {
        json_object_put(request);
        request = NULL;
    }
    answer = ask(request, state_dir);
    if (!answer)
        return 0;
    /* A claim is never 0: 0 is this API's failure. */
    if (member_unsigned(answer, "claim", &claim) != 1 || claim == 0) {
        json_object_put(answer);
        errno = EPROTO;
        return 0;
    }
    json_object_put(answer);
    return claim;
}

SCOPEFS_EXPORT int scopefs_release(unsigned long long claim, const char *state_dir)
{
    json_object *request, *answer;

    if (claim == 0) {
        errno = EINVAL;
        return -1;
    }
    request = control_request("release");
    if (request && request_add(request, "claim", json_object_new_uint64(claim)) < 0) {
        json_object_put(request);
        request = NULL;
    }
    answer = ask(request, state_dir);
    if (!answer)
        return -1;
    json_object_put(answer);
    return 0;
}
