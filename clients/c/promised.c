/*
 * promised.c — promised item values and previews (SPEC S50; Apple's
 * getPromisedItemResourceValue and NSURLThumbnailDictionaryKey): what a
 * document browser shows of an item whose content may not be local, from
 * stat(2) and the item's attributes alone, so nothing here ever makes the
 * daemon download a document.
 */
#include "scopefs.h"

#include "control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/xattr.h>

#define THUMBNAIL_ATTR "user.scopefs.thumbnail"
#define STATE_ATTR "user.scopefs.state"

SCOPEFS_EXPORT unsigned char *scopefs_thumbnail(const char *path, size_t *length) {
    if (!path || !length) {
        errno = EINVAL;
        return NULL;
    }
    /* Sized first, then read: the preview may be replaced in between (a
       save by another app), so a preview that grew is asked for again. */
    for (int attempt = 0; attempt < 4; attempt++) {
        ssize_t size = getxattr(path, THUMBNAIL_ATTR, NULL, 0);
        if (size < 0) return NULL;
        unsigned char *png = malloc(size > 0 ? (size_t)size : 1);
        if (!png) {
            errno = ENOMEM;
            return NULL;
        }
        ssize_t n = getxattr(path, THUMBNAIL_ATTR, png, (size_t)size);
        if (n >= 0) {
            *length = (size_t)n;
            return png;
        }
        free(png);
        if (errno != ERANGE) return NULL;
    }
    errno = ERANGE;
    return NULL;
}

SCOPEFS_EXPORT int scopefs_set_thumbnail(const char *path, const unsigned char *png, size_t length) {
    if (!path || (!png && length > 0)) {
        errno = EINVAL;
        return -1;
    }
    if (!png) return removexattr(path, THUMBNAIL_ATTR);
    return setxattr(path, THUMBNAIL_ATTR, png, length, 0);
}

/* Apple's NSURLUbiquitousItemDownloadingStatus for an item's state, as the
   Python and Swift clients map it. */
static const char *downloading_status(const char *state) {
    if (!strcmp(state, "materialized") || !strcmp(state, "pinned")) return SCOPEFS_DOWNLOADING_CURRENT;
    if (!strcmp(state, "dirty") || !strcmp(state, "uploading") || !strcmp(state, "conflict") ||
        !strcmp(state, "error"))
        return SCOPEFS_DOWNLOADING_DOWNLOADED;
    return SCOPEFS_DOWNLOADING_NOT_DOWNLOADED;
}

/* The last component of `path`, trailing slashes left out, malloc'ed. */
static char *last_component(const char *path) {
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    char *name = malloc(end - start + 1);
    if (!name) return NULL;
    memcpy(name, path + start, end - start);
    name[end - start] = '\0';
    return name;
}

SCOPEFS_EXPORT int scopefs_promised_item_values(const char *path, struct scopefs_promised_values *values) {
    if (!path || !values) {
        errno = EINVAL;
        return -1;
    }
    memset(values, 0, sizeof *values);
    struct stat info;
    if (stat(path, &info) < 0) return -1;
    ssize_t n = getxattr(path, STATE_ATTR, values->state, sizeof values->state - 1);
    if (n >= 0) {
        values->state[n] = '\0';
    } else if (errno == ENODATA || errno == ENOTSUP) {
        strcpy(values->state, "materialized"); /* a container item, or outside a provider */
    } else {
        return -1;
    }
    values->size = (long long)info.st_size;
    values->modified_seconds = info.st_mtim.tv_sec;
    values->modified_nanoseconds = info.st_mtim.tv_nsec;
    values->changed_seconds = info.st_ctim.tv_sec;
    values->changed_nanoseconds = info.st_ctim.tv_nsec;
    values->is_folder = S_ISDIR(info.st_mode);
    values->downloading_status = downloading_status(values->state);
    if (!(values->name = last_component(path))) {
        errno = ENOMEM;
        return -1;
    }
    if (!values->is_folder) {
        values->thumbnail = scopefs_thumbnail(path, &values->thumbnail_length);
        if (!values->thumbnail && errno != ENODATA && errno != ENOTSUP) {
            int saved = errno;
            scopefs_promised_values_free(values);
            errno = saved;
            return -1;
        }
    }
    return 0;
}

SCOPEFS_EXPORT void scopefs_promised_values_free(struct scopefs_promised_values *values) {
    if (!values) return;
    free(values->name);
    free(values->thumbnail);
    values->name = NULL;
    values->thumbnail = NULL;
    values->thumbnail_length = 0;
}
