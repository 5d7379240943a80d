/*
 * scopefs.h — C client library of ScopeFS security scopes (SPEC S31).
 *
 * ScopeFS gates content operations on provider items (open, read, write,
 * readdir, ...) behind a per-process security-scope counter (SPEC S6-S9).
 * These functions raise, lower and read that counter for the calling
 * process. Each is exactly one getxattr(2) call on the path inside the mount
 * (docs/API.md, SPEC S12); the library keeps no state, needs no daemon
 * connection and is safe to call from any thread (the counter belongs to the
 * process, not the thread).
 *
 *     if (scopefs_start_accessing(path) < 0) { perror(path); return 1; }
 *     ... open/read path ...
 *     scopefs_stop_accessing(path);
 *
 * Paths are bytes (SPEC S33a): every path these functions return (a
 * resolved bookmark, a pick, a notice) is the file's exact bytes, UTF-8 or
 * not (the daemon sends a byte that is not UTF-8 as "\udcXX", docs/API.md
 * "Paths are bytes"; the library turns it back into the byte).
 *
 * Build: make -C clients/c            (-> clients/c/build/libscopefs.so)
 * Link:  cc app.c -Iclients/c/include -Lclients/c/build -lscopefs
 *
 * errno values set on failure (docs/API.md "Errors"):
 *   EPERM   no active grant of the caller's app covers the path, the grant
 *           is revoked, or the caller is not an app process (SPEC S6, S14)
 *   EDQUOT  start: the process used up its budget of outstanding starts;
 *           it stays so until the process exits (SPEC S10)
 *   ENOENT  the path is not visible to the caller's app (SPEC S2, S3)
 *   ENODATA / ENOTSUP  the path is not inside a ScopeFS mount
 *   ECONNREFUSED  bookmark resolution: no daemon serves the state directory
 *   EPROTO  the mount replied with a value docs/API.md does not define
 *   EINVAL  path is NULL
 *   EBADMSG bookmark resolution: tampered with, truncated, or not a bookmark
 *   ENOMEM  bookmark functions: out of memory
 *   anything else getxattr(2) can return (ENOTCONN for a dead mount, ...)
 */
#ifndef SCOPEFS_H
#define SCOPEFS_H

#include <stddef.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this header and library. */
#define SCOPEFS_CLIENT_VERSION_MAJOR 1
#define SCOPEFS_CLIENT_VERSION_MINOR 1

/* scopefs_scope_count() result for a path that needs no scope. */
#define SCOPEFS_NOT_NEEDED (-2L)

/*
 * Start accessing the security-scoped resource at `path` (SPEC S6): raises
 * the calling process's counter on the nearest active grant of its app that
 * covers the item. A reference document (symlink in the container) is
 * followed to its original. Starts nest (SPEC S8): balance every result of
 * 1 with exactly one scopefs_stop_accessing().
 *
 * Returns 1 when a scope was counted, 0 when none is needed (a container
 * path, SPEC S9: nothing was counted, do not stop), -1 on error with errno
 * set (EPERM denied, EDQUOT budget exhausted, ENOENT invisible, see above).
 */
int scopefs_start_accessing(const char *path);

/*
 * Stop accessing the security-scoped resource at `path` (SPEC S7): lowers the
 * calling process's counter by one, never below zero. An unbalanced stop
 * (counter already zero) and a stop on a path that needs no scope are not
 * errors; the daemon records an unbalanced stop as an event (SPEC S29).
 * Descriptors opened while in scope keep working after the last stop
 * (SPEC S9).
 *
 * Returns 0 on success, -1 on error with errno set (EPERM, ENOENT, ...).
 */
int scopefs_stop_accessing(const char *path);

/*
 * The calling process's own counter on the nearest active grant covering
 * `path` (getxattr "user.scopefs.scope", SPEC S12).
 *
 * Returns the counter (>= 0; 0 when the process holds no scope there),
 * SCOPEFS_NOT_NEEDED (-2) when the path needs no scope (a container path,
 * SPEC S9), or -1 on error with errno set (EPERM, ENOENT, ...).
 */
long scopefs_scope_count(const char *path);

/*
 * A bookmark of the item at `path` (getxattr "user.scopefs.bookmark", or
 * "user.scopefs.bookmark-read-only" when `read_only` is nonzero; SPEC S25):
 * an opaque ASCII token bound to the calling app, the provider item and the
 * grant's access, authenticated by the daemon. It keeps working after the
 * item is renamed or moved and across daemon restarts; any changed byte
 * makes it invalid. A reference document is followed to its item.
 *
 * Returns a NUL-terminated token allocated with malloc (free it), or NULL
 * with errno set: EPERM (no active grant), ENOENT (invisible), EINVAL for a
 * container path (it needs no bookmark: its path does not change).
 */
char *scopefs_bookmark_create(const char *path, int read_only);

/*
 * Resolve a bookmark made by the calling app (SPEC S26, S27) through the
 * daemon's control socket, STATE/control.sock. `state_dir` names the state
 * directory; NULL finds it like the CLI: $SCOPEFS_STATE, else
 * $XDG_STATE_HOME/scopefs, else ~/.local/state/scopefs. Resolving does not
 * start a scope: call scopefs_start_accessing() on the result.
 *
 * Returns the item's current path in the app's view of the mount, allocated
 * with malloc (free it), and sets *is_stale (when is_stale is not NULL) to 1
 * when the item was renamed or moved, or deleted and a new item made under
 * the same name (then make a new bookmark), else 0. Returns NULL with errno
 * set: EBADMSG (invalid bookmark), ENOENT (the item no longer exists),
 * EPERM (another app's bookmark, a revoked grant, not an app process),
 * EPROTO (an answer docs/API.md does not define), or the errno of
 * connecting: ECONNREFUSED (no daemon serves the state directory, whatever
 * connect(2) said).
 */
char *scopefs_bookmark_resolve(const char *bookmark, const char *state_dir, int *is_stale);

/*
 * Reads one item-metadata attribute of a reference document (followed to
 * its item) or of a provider item (SPEC S24): name is one of "item",
 * "provider", "provider-name", "path", "grant-state". Returns a malloc'ed
 * NUL-terminated string the caller frees, or NULL with errno set (ENODATA
 * outside provider views, EPERM, ENOENT).
 */
char *scopefs_reference_attribute(const char *path, const char *name);

/*
 * Asks the user to pick documents for the calling app (issue 17), as an app
 * presents UIDocumentPickerViewController: `mode` is "open" (security-scoped
 * paths: start accessing before use) or "import" (copies in the app's
 * inbox); `content_types` a NULL-terminated list of UTType identifiers or
 * MIME types (NULL: any); the owner's `scopefs agent` answers. Blocks until
 * the answer (at most 600 s). `state_dir` as for scopefs_bookmark_resolve().
 *
 * Returns a NULL-terminated array of paths in the app's view (free it with
 * scopefs_free_paths()), or NULL with errno set: ECANCELED (the user
 * cancelled), ENXIO (no picker agent runs), ETIMEDOUT (no answer in time),
 * EPERM (not an app process, or the agent could not apply the choice),
 * EINVAL (a bad mode or request), ECONNREFUSED (no daemon), EPROTO.
 */
char **scopefs_pick(const char *mode, const char *const *content_types, int allows_multiple, const char *state_dir);

/*
 * Asks the user for a folder to export (copy) or move the calling app's
 * container items into (issue 17, like UIDocumentPickerViewController
 * (forExporting:asCopy:)): `mode` is "export" or "move"; `items` a
 * NULL-terminated list of at least one path inside the app's container
 * ("Documents/a.txt"). The owner's `scopefs agent` answers. Returns the new
 * paths in the app's view, in the order of `items` (free with
 * scopefs_free_paths()), or NULL with errno set as for scopefs_pick(). If
 * one item fails, none after it is tried and the call fails with EPERM;
 * the items placed before it stay placed (docs/API.md).
 */
char **scopefs_pick_items(const char *mode, const char *const *items, const char *state_dir);

/* Frees what scopefs_pick() and scopefs_pick_items() returned (NULL is fine). */
void scopefs_free_paths(char **paths);

/*
 * File coordination (issue 17, like NSFileCoordinator): a claim on one of
 * the calling app's documents (a path in its view: a granted provider item
 * or a container item). Writers exclude readers and other writers of other
 * processes, in any app; a writer kept waiting first asks the holders'
 * presenters to relinquish. Only coordinated access is protected: a process
 * that reads or writes without a claim is not held back.
 */
enum scopefs_intent { SCOPEFS_READING = 0, SCOPEFS_WRITING = 1 };

/*
 * Takes a read or write claim on `path`, waiting up to `timeout_seconds`
 * (at most 60) for other processes' claims to end. Returns the claim (not
 * 0): pass it to scopefs_release(). The claim also ends when the process
 * exits. Returns 0 with errno set: ETIMEDOUT (still claimed by another
 * process), ENOENT (not a document this app was given), EPERM (not an app
 * process), EINVAL, ECONNREFUSED (no daemon), EPROTO.
 */
unsigned long long scopefs_coordinate(const char *path, enum scopefs_intent intent, double timeout_seconds,
                                      const char *state_dir);

/* Ends a claim of this process. Returns 0, or -1 with errno set (ESRCH: this
 * process holds no such claim; ECONNREFUSED; EPROTO). */
int scopefs_release(unsigned long long claim, const char *state_dir);

/*
 * What the app's presenter hears (issue 17, like NSFilePresenter): `kind` is
 * "arrived", "revoked", "restored", "forgotten", "moved", "deleted",
 * "changed" (the content changed on the host or by another app's write),
 * "save" (another app waits for a claim: save your changes; always just
 * before "relinquish") or "relinquish" (end your claim);
 * `path` is in the app's view, `old_path` (moves only, else NULL) where it
 * was. Valid during the callback only.
 *
 * Items inside a granted folder are told too (issue 31, Apple's
 * presentedSubitem... callbacks): "appeared" (created, or moved in from
 * where the app cannot see), "moved", "deleted" and "changed" with the
 * item's own path, below the folder's; made on the host or by another app,
 * never by this app itself. A notice whose path is below a granted
 * folder's is a subitem's; "appeared" is always one.
 */
#define SCOPEFS_NOTICE_ARRIVED "arrived"
#define SCOPEFS_NOTICE_REVOKED "revoked"
#define SCOPEFS_NOTICE_RESTORED "restored"
#define SCOPEFS_NOTICE_FORGOTTEN "forgotten"
#define SCOPEFS_NOTICE_APPEARED "appeared"
#define SCOPEFS_NOTICE_MOVED "moved"
#define SCOPEFS_NOTICE_DELETED "deleted"
#define SCOPEFS_NOTICE_CHANGED "changed"
#define SCOPEFS_NOTICE_SAVE "save"
#define SCOPEFS_NOTICE_RELINQUISH "relinquish"
/* An extension provider's item changed its user.scopefs.state (downloaded,
 * evicted, uploading, uploaded, conflict...): read the attribute. */
#define SCOPEFS_NOTICE_STATE "state"
struct scopefs_notice {
    const char *kind;
    const char *path;
    const char *old_path;
    long long grant;
};
typedef int (*scopefs_notice_handler)(const struct scopefs_notice *notice, void *context);

/*
 * Calls `handler` for each notice about the calling app's documents from
 * now on, until it returns nonzero or `timeout_seconds` pass without a
 * notice (negative: no limit). Returns 0, or -1 with errno set (EPERM: not
 * an app process; ECONNREFUSED: no daemon; EPROTO).
 */
int scopefs_watch(scopefs_notice_handler handler, void *context, double timeout_seconds, const char *state_dir);

/*
 * One document of a live query (issue 17, like NSMetadataItem): `url` is
 * the document (for a reference: the original, in the app's view),
 * `url_in_local_container` where it lives in the container. Valid during
 * the callback only.
 */
struct scopefs_query_result {
    const char *url;
    const char *url_in_local_container;
    const char *container_display_name;
    int is_external_document;
};
typedef int (*scopefs_query_handler)(const char *event, const struct scopefs_query_result *result, void *context);

/*
 * A live query of the calling app's documents (NSMetadataQuery): calls
 * `handler` with "result" for each document found at first, then once with
 * "finishedGathering" (result NULL), then with "added", "removed" or
 * "changed" as the documents change, until it returns nonzero or
 * `timeout_seconds` pass without a change (negative: no limit). `scope` is
 * "documents", "external" or "all" (NULL: all); `name_glob` NULL for every
 * name. Only the calling app's documents are listed. Returns 0, or -1 with
 * errno set (EPERM: not an app process; EINVAL; ECONNREFUSED: no daemon;
 * EPROTO).
 */
int scopefs_query(const char *scope, const char *name_glob, scopefs_query_handler handler, void *context,
                  double timeout_seconds, const char *state_dir);

/*
 * Promised item values (SPEC S50; Apple's getPromisedItemResourceValue):
 * what a document browser shows of an item whose content may not be local,
 * gathered from stat(2) and the item's attributes alone. Nothing here needs
 * a scope or downloads content, even for an app whose policy is never to
 * download. `state` is user.scopefs.state ("dataless", "materialized",
 * "pinned", "dirty", "uploading", ...; "materialized" for a container item);
 * `downloading_status` Apple's reading of it, one of the three below.
 * `thumbnail` is the preview (a PNG of at most 64 KiB), NULL when the item
 * has none or is a folder.
 */
#define SCOPEFS_DOWNLOADING_CURRENT "current"
#define SCOPEFS_DOWNLOADING_DOWNLOADED "downloaded"
#define SCOPEFS_DOWNLOADING_NOT_DOWNLOADED "not-downloaded"
struct scopefs_promised_values {
    char *name;
    long long size;
    /* Seconds and nanoseconds since the epoch (stat's st_mtim, st_ctim),
       as plain numbers: struct timespec is not C99's. */
    long long modified_seconds;
    long modified_nanoseconds;
    long long changed_seconds;
    long changed_nanoseconds;
    int is_folder;
    char state[32];
    const char *downloading_status;
    unsigned char *thumbnail;
    size_t thumbnail_length;
};

/*
 * Fills `values` for the item at `path` (free them with
 * scopefs_promised_values_free()). Returns 0, or -1 with errno set: ENOENT
 * (invisible to the app), EPERM (a revoked grant), ENOMEM, EINVAL.
 */
int scopefs_promised_item_values(const char *path, struct scopefs_promised_values *values);

/* Frees what scopefs_promised_item_values() allocated (NULL is fine). */
void scopefs_promised_values_free(struct scopefs_promised_values *values);

/*
 * The item's preview (getxattr "user.scopefs.thumbnail"): a malloc'ed PNG
 * (free it) of *length bytes, read without a scope and without a download.
 * NULL with errno set: ENODATA (no preview), ENOENT (invisible), EPERM.
 */
unsigned char *scopefs_thumbnail(const char *path, size_t *length);

/*
 * Saves the preview of a document the app may write (a scope on it in
 * strict mode); on an extension's provider it goes to the store with the
 * document's upload. `png` NULL removes it. Returns 0, or -1 with errno
 * set: EINVAL (not a PNG), E2BIG (over 64 KiB), EPERM (no write access).
 */
int scopefs_set_thumbnail(const char *path, const unsigned char *png, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* SCOPEFS_H */
