/*
 * picks.c — asking the user to pick documents, or a folder to export or
 * move container items into (issue 17, docs/API.md "Picking"): one "pick"
 * request that the owner's `scopefs agent` answers.
 */
#include "scopefs.h"

#include "control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The answer can take the user's time: the daemon waits at most this. */
#define PICK_WAIT_SECONDS 600

SCOPEFS_EXPORT void scopefs_free_paths(char **paths)
{
    if (!paths)
        return;
    for (char **p = paths; *p; p++)
        free(*p);
    free(paths);
}

/* A JSON array of a NULL-terminated list of strings (NULL: empty). */
static json_object *string_array(const char *const *list)
{
    json_object *array = json_object_new_array();

    for (size_t k = 0; array && list && list[k]; k++) {
        json_object *item = json_object_new_string(list[k]);

        if (!item || json_object_array_add(array, item) < 0) {
            json_object_put(item);
            json_object_put(array);
            return NULL;
        }
    }
    return array;
}

/* {"op":"pick","waitSeconds":600,"pick":{"mode":M,"allowsMultipleSelection":B,"items":[...],"contentTypes":[...]}} */
static json_object *pick_request(const char *mode, const char *const *content_types, int allows_multiple,
                                 const char *const *items)
{
    json_object *request = control_request("pick");
    json_object *pick = json_object_new_object();

    if (!request || !pick || request_add(request, "waitSeconds", json_object_new_int(PICK_WAIT_SECONDS)) < 0 ||
        request_add(request, "pick", json_object_get(pick)) < 0 ||
        request_add(pick, "mode", json_object_new_string(mode)) < 0 ||
        request_add(pick, "allowsMultipleSelection", json_object_new_boolean(allows_multiple != 0)) < 0 ||
        request_add(pick, "items", string_array(items)) < 0 ||
        request_add(pick, "contentTypes", string_array(content_types)) < 0) {
        json_object_put(pick);
        json_object_put(request);
        return NULL;
    }
    json_object_put(pick); /* the request holds it */
    return request;
}

/* The daemon's codes are the CLI's exit codes (docs/API.md). */
static int pick_error(long long code)
{
    switch (code) {
    case 64: return EINVAL;
    case 69: return ENXIO;
    case 75: return ETIMEDOUT;
    case 77: return EPERM;
    default: return EPROTO;
    }
}

/* The paths of an answer {"ok": true, "picked": {"cancelled": B, "paths":
 * [...]}} in the app's view, NULL-terminated; NULL with errno set. */
static char **picked_paths(json_object *answer)
{
    json_object *picked = NULL, *paths = NULL;
    long long code = -1;
    int ok = answer_ok(answer, &code), cancelled = 0;
    char **result;
    size_t count;

    if (ok == 0 || (ok == 1 && member_object(answer, "picked", &picked) == 0)) {
        errno = pick_error(code);
        return NULL;
    }
    if (ok < 0 || !picked || member_bool(picked, "cancelled", &cancelled) < 0 ||
        member_array(picked, "paths", &paths) < 0) {
        errno = EPROTO;
        return NULL;
    }
    if (cancelled) {
        errno = ECANCELED;
        return NULL;
    }
    count = paths ? json_object_array_length(paths) : 0;
    result = calloc(count + 1, sizeof *result);
    if (!result) {
        errno = ENOMEM;
        return NULL;
    }
    for (size_t k = 0; k < count; k++) {
        json_object *item = json_object_array_get_idx(paths, k);
        const char *path = json_object_get_string(item);

        if (!json_object_is_type(item, json_type_string) || strlen(path) != (size_t)json_object_get_string_len(item)) {
            scopefs_free_paths(result);
            errno = EPROTO;
            return NULL;
        }
        result[k] = path_in_app_view(path);
        if (!result[k]) {
            scopefs_free_paths(result);
            errno = ENOMEM;
            return NULL;
        }
    }
    return result;
}

static char **pick(const char *mode, const char *const *content_types, int allows_multiple,
                   const char *const *items, const char *state_dir)
{
    json_object *request = pick_request(mode, content_types, allows_multiple, items), *answer;
    char **result;
    int err;

    if (!request) {
        errno = ENOMEM;
        return NULL;
    }
    answer = control_ask_state(state_dir, request);
    json_object_put(request);
    if (!answer)
        return NULL;
    result = picked_paths(answer);
    err = errno;
    json_object_put(answer);
    errno = err;
    return result;
}

SCOPEFS_EXPORT char **scopefs_pick(const char *mode, const char *const *content_types, int allows_multiple,
                                   const char *state_dir)
{
    if (mode == NULL || (strcmp(mode, "open") != 0 && strcmp(mode, "import") != 0)) {
        errno = EINVAL;
        return NULL;
    }
    return pick(mode, content_types, allows_multiple, NULL, state_dir);
}

SCOPEFS_EXPORT char **scopefs_pick_items(const char *mode, const char *const *items, const char *state_dir)
{
    if (mode == NULL || (strcmp(mode, "export") != 0 && strcmp(mode, "move") != 0) || items == NULL ||
        items[0] == NULL) {
        errno = EINVAL;
        return NULL;
    }
    return pick(mode, NULL, 0, items, state_dir);
}
