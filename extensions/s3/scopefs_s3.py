#!/usr/bin/env python3
"""ScopeFS provider extension for S3-compatible stores (docs/PROVIDERS.md).

    scopefs_s3.py            (options come in `initialize`)

Options (``initialize``'s ``options``, all strings):

- ``bucket`` (required): the bucket.
- ``prefix``: only keys under it are served ("docs/" or "docs"; default all).
- ``endpointUrl``: a store other than AWS (Ceph RGW, MinIO, moto, ...).
- ``region``: the region (default: boto3's configuration).
- ``profile``: a profile of ~/.aws/config and ~/.aws/credentials.

Credentials come from boto3's usual chain (AWS_* environment variables,
~/.aws/credentials, ~/.aws/config, instance roles); ScopeFS never sees or
stores them.

The mapping (docs/PROVIDERS.md "S3"):

- A file is an object; a folder is a key prefix ending in "/", with or
  without an empty marker object of that key (``create`` makes one, so an
  empty folder exists). Keys that do not make a valid path (an empty
  component as in "a//b", "." or "..", a component over 255 bytes) are not
  served.
- Ids are keys relative to the prefix, with a leading "/": "/docs/a.txt",
  folders "/docs/"; the root is "root". The leading "/" keeps every key
  apart from "root".
- S3 has no rename: renaming a file copies it to the new key and deletes the
  old one (only if it still is the base version), and the item gets a new id,
  its new key; the old id is gone, as ``changes`` then reports. Renaming a
  folder would copy every object under it, not atomically: notSupported.
  Storing a stable id in object metadata would keep ids across renames but
  make ``item(id)`` a search of the bucket.
- Versions: the content version and the metadata version are both the
  ETag: an object's only metadata is its key, which is its id, and its
  content. mtime is LastModified (whole seconds); mode is 0644 for files, 0755 for folders
  and cannot be set (listing gives no user metadata, so stored modes could
  not be shown without one HEAD per object).
- Writes are conditional: a new key is written with ``If-None-Match: *``, a
  replacement and a delete with ``If-Match: <base ETag>``; the store answers
  412 when someone else changed the key, and the extension answers
  conflict (or exists). A store that ignores these headers loses that
  guarantee: check yours (AWS since 2024, MinIO, Ceph RGW Squid, moto 5.1).
- Changes by polling (``changes: "poll"``): each anchor names an in-memory
  snapshot of the listing (the last 16 are kept); ``changes`` lists again
  and compares. An anchor from before a restart is expired: the daemon
  lists again.
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import UTC
from pathlib import Path

import boto3
import botocore.exceptions
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from scopefs_extension import (  # noqa: E402 - the SDK sits in clients/python
    ROOT_ID,
    Busy,
    Conflict,
    Denied,
    Exists,
    ExtensionError,
    Fetched,
    InvalidParams,
    Item,
    NoSuchItem,
    NotAuthenticated,
    NotEmpty,
    NotSupported,
    ReplicatedExtension,
    SnapshotChanges,
    Thumbnail,
    TooLarge,
    Unreachable,
    name_problem,
    run,
)

FILE_MODE = 0o644
FOLDER_MODE = 0o755
MAX_PAGE = 1000  # S3's own limit of keys per ListObjectsV2 page
SINGLE_PUT_LIMIT = 5 * 1024**3  # larger needs multipart upload, not done yet
CHUNK = 1 << 20

_AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired"}


class _PastTheEnd(Exception):
    """A GET whose range starts at or after the object's end (416)."""


def _range_start(content_range) -> int:
    """The first byte a ranged GET answered (``bytes 5-9/10``); 0 without one."""
    if not content_range:
        return 0
    return int(content_range.split(" ", 1)[1].split("-", 1)[0])


def protocol_error(error: Exception, conflict_means: type = Conflict) -> ExtensionError:
    """The protocol error for a boto3 failure."""
    if isinstance(error, ExtensionError):
        return error
    if isinstance(error, botocore.exceptions.NoCredentialsError):
        return NotAuthenticated("no AWS credentials found (environment, ~/.aws)")
    if isinstance(error, (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectTimeoutError)):
        return Unreachable(str(error))
    if isinstance(error, botocore.exceptions.ReadTimeoutError):
        return Unreachable(str(error))
    if isinstance(error, botocore.exceptions.ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        message = error.response.get("Error", {}).get("Message", code)
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
            return conflict_means(message)
        if code in ("NoSuchKey", "NotFound", "NoSuchBucket") or status == 404:
            return NoSuchItem(message)
        if code in _AUTH_CODES:
            return NotAuthenticated(message)
        if code == "AccessDenied" or status == 403:
            return Denied(message)
        if code == "EntityTooLarge":
            return TooLarge(message)
        if code in ("SlowDown", "ServiceUnavailable", "RequestLimitExceeded") or status in (429, 503):
            return Busy(message)
        if status >= 500:
            return Unreachable(message)
    return ExtensionError(f"{type(error).__name__}: {error}")


# Previews (protocol 1.2) live beside the documents, as objects under this
# prefix of the extension's own (PREFIX.scopefs-thumbnails/KEY.png), which
# no listing shows; a preview larger than the protocol's 64 KiB is not served.
THUMBNAILS = ".scopefs-thumbnails/"
THUMBNAIL_LIMIT = 65536


class S3Extension(ReplicatedExtension):
    name = "s3"
    version = "1.0"

    def __init__(self) -> None:
        super().__init__()
        self.bucket = ""
        self.prefix = ""
        self._client = None
        self._client_lock = threading.Lock()
        self._changes = SnapshotChanges(self._snapshot)
        # Folder keys known to exist: those of the last snapshot (each poll
        # takes one) and those made since. None until the first snapshot.
        # `create` asks it instead of listing the store twice: a prefix
        # listing costs some stores (moto, Ceph RGW's bucket index shards)
        # time in proportion to the bucket, and a create was four requests.
        self._folders: set[str] | None = None
        self._folders_lock = threading.Lock()

    def capabilities(self) -> dict:
        return {
            "changes": "poll",
            "ranges": True,
            "create": True,
            "modify": True,
            "delete": True,
            "rename": True,
            "conditionalWrites": True,
            "maxPageSize": MAX_PAGE,
            "settableFields": ["name", "parent"],
            "symlinks": False,
            "renameKeepsId": False,
            "streamsFetch": True,
            "thumbnails": True,
        }

    def initialize(self, provider_id, staging_directory, options) -> None:
        bucket = options.get("bucket")
        if not isinstance(bucket, str) or not bucket:
            raise InvalidParams("option 'bucket' is required")
        self.bucket = bucket
        prefix = options.get("prefix", "") or ""
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        session = boto3.session.Session(profile_name=options.get("profile"), region_name=options.get("region"))
        self._client = session.client(
            "s3",
            endpoint_url=options.get("endpointUrl"),
            # A store out of reach answers `unreachable` within about 20 s
            # (two tries of a 10 s connect), well inside the daemon's 60 s
            # stall limit; boto3's defaults (60 s, 3 tries) took 4 minutes.
            config=Config(
                retries={"max_attempts": 2, "mode": "standard"},
                connect_timeout=10,
                read_timeout=30,
                max_pool_connections=16,
            ),
        )
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except Exception as error:
            raise protocol_error(error)

    # -- ids, keys, items ----------------------------------------------------

    def _key(self, identifier: str) -> str:
        """The object key (or key prefix of a folder) of an id."""
        if identifier == ROOT_ID:
            return self.prefix
        if not identifier.startswith("/") or identifier == "/":
            raise NoSuchItem(f"no item {identifier!r}")
        return self.prefix + identifier[1:]

    def _id(self, key: str) -> str:
        relative = key[len(self.prefix) :]
        return "/" + relative if relative else ROOT_ID

    @staticmethod
    def _parent_id(identifier: str) -> str:
        trimmed = identifier[1:].removesuffix("/")
        return "/" + trimmed.rsplit("/", 1)[0] + "/" if "/" in trimmed else ROOT_ID

    @staticmethod
    def _name(identifier: str) -> str:
        return identifier.removesuffix("/").rsplit("/", 1)[-1]

    def _servable(self, key: str) -> bool:
        relative = key[len(self.prefix) :].removesuffix("/")
        if relative + "/" == THUMBNAILS or relative.startswith(THUMBNAILS):
            return False
        return bool(relative) and all(name_problem(part) is None for part in relative.split("/"))

    def _file_item(self, key: str, size: int, etag: str, modified) -> Item:
        identifier = self._id(key)
        # Whole seconds: HEAD's Last-Modified has no more, listings may.
        mtime = float(int(modified.replace(tzinfo=modified.tzinfo or UTC).timestamp()))
        return Item(
            id=identifier,
            parent=self._parent_id(identifier),
            name=self._name(identifier),
            kind="file",
            size=size,
            mtime=mtime,
            mode=FILE_MODE,
            content_version=etag,
            metadata_version=etag,
        )

    def _folder_item(self, key: str) -> Item:
        identifier = self._id(key)
        return Item(
            id=identifier,
            parent=None if identifier == ROOT_ID else self._parent_id(identifier),
            name="" if identifier == ROOT_ID else self._name(identifier),
            kind="folder",
            size=0,
            mtime=0.0,
            mode=FOLDER_MODE,
            content_version="folder",
            metadata_version="folder",
        )

    def _folder_exists(self, key: str) -> bool:
        if key == self.prefix:
            return True
        listing = self._client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1)
        return listing.get("KeyCount", 0) > 0

    def _known_folder(self, key: str) -> bool:
        """Whether folder `key` exists, from what is known when it can be."""
        with self._folders_lock:
            if key == self.prefix or (self._folders is not None and key in self._folders):
                return True
        if not self._folder_exists(key):
            return False
        self._remember_folder(key)
        return True

    def _folder_known_absent(self, key: str) -> bool:
        """Whether folder `key` was not there at the last snapshot and was
        not made since (a folder made elsewhere since the last poll is not
        seen: the daemon has not seen it either)."""
        with self._folders_lock:
            known = self._folders
            if known is not None:
                return key not in known
        return not self._folder_exists(key)

    def _remember_folder(self, key: str) -> None:
        with self._folders_lock:
            if self._folders is not None:
                self._folders.add(key)

    def _forget_folder(self, key: str) -> None:
        with self._folders_lock:
            if self._folders is not None:
                self._folders.discard(key)

    def _key_exists(self, key: str) -> bool:
        try:
            self._client.head_object(Bucket=self.bucket, Key=key)
            return True
        except botocore.exceptions.ClientError as error:
            if isinstance(protocol_error(error), NoSuchItem):
                return False
            raise

    # -- reading -------------------------------------------------------------

    def item(self, identifier: str) -> Item:
        key = self._key(identifier)
        try:
            if identifier == ROOT_ID:
                return self._folder_item(key)
            if not self._servable(key):
                raise NoSuchItem(f"no item {identifier!r}")
            if identifier.endswith("/"):
                if not self._folder_exists(key):
                    raise NoSuchItem(f"no folder {identifier!r}")
                return self._folder_item(key)
            head = self._client.head_object(Bucket=self.bucket, Key=key)
            return self._file_item(key, head["ContentLength"], head["ETag"], head["LastModified"])
        except Exception as error:
            raise protocol_error(error)

    def enumerate_items(self, container: str, page, page_size: int) -> tuple:
        if container != ROOT_ID and not container.endswith("/"):
            self.item(container)  # noSuchItem, or:
            raise InvalidParams(f"{container!r} is not a folder")
        key = self._key(container)
        arguments = {"Bucket": self.bucket, "Prefix": key, "Delimiter": "/", "MaxKeys": min(page_size, MAX_PAGE)}
        if page is not None:
            arguments["ContinuationToken"] = page
        try:
            listing = self._client.list_objects_v2(**arguments)
            if page is None and listing.get("KeyCount", 0) == 0 and not self._folder_exists(key):
                raise NoSuchItem(f"no folder {container!r}")
        except Exception as error:
            if page is not None and isinstance(error, botocore.exceptions.ClientError):
                raise InvalidParams("unknown page token")
            raise protocol_error(error)
        items = [self._folder_item(entry["Prefix"]) for entry in listing.get("CommonPrefixes", [])]
        items += [
            self._file_item(entry["Key"], entry["Size"], entry["ETag"], entry["LastModified"])
            for entry in listing.get("Contents", [])
            if entry["Key"] != key and not entry["Key"].endswith("/")
        ]
        items = [item for item in items if self._servable(self._key(item.id))]
        return items, listing.get("NextContinuationToken") if listing.get("IsTruncated") else None

    def _snapshot(self) -> dict:
        tree = {ROOT_ID: self._folder_item(self.prefix)}
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
                for entry in page.get("Contents", []):
                    key = entry["Key"]
                    if not self._servable(key):
                        continue
                    if not key.endswith("/"):
                        item = self._file_item(key, entry["Size"], entry["ETag"], entry["LastModified"])
                        tree[item.id] = item
                    # Every folder on the way, marker or not.
                    parts = key[len(self.prefix) :].split("/")[:-1]
                    for depth in range(1, len(parts) + 1):
                        folder = self._folder_item(self.prefix + "/".join(parts[:depth]) + "/")
                        tree[folder.id] = folder
        except Exception as error:
            raise protocol_error(error)
        with self._folders_lock:
            self._folders = {self._key(identifier) for identifier, item in tree.items() if item.kind == "folder"}
        return tree

    def current_anchor(self) -> str:
        return self._changes.current_anchor()

    def enumerate_changes(self, anchor: str):
        return self._changes.changes(anchor)

    def fetch_contents(self, identifier, version, byte_range, request) -> Fetched:
        # One GET, not a HEAD and a GET: the version is its If-Match, the
        # range its Range, and the answer says which bytes of which version
        # came (a round trip less on every download). The rare cases one
        # GET cannot say (an empty range, a range past the end, the current
        # version of a conflict) ask the object first.
        if identifier == ROOT_ID or identifier.endswith("/") or not self._servable(self._key(identifier)):
            current = self.item(identifier)
            self.fetch_range(current, version, byte_range)
        if byte_range is not None and byte_range[1] == 0:
            return self._fetch_checked(identifier, version, byte_range, request)
        ask = {"Bucket": self.bucket, "Key": self._key(identifier)}
        if byte_range is not None:
            ask["Range"] = f"bytes={byte_range[0]}-{byte_range[0] + byte_range[1] - 1}"
        if version is not None:
            ask["IfMatch"] = version
        fd, staged = self.staging_file()
        try:
            with os.fdopen(fd, "wb") as out:
                try:
                    response = self._client.get_object(**ask)
                except botocore.exceptions.ClientError as error:
                    if error.response.get("Error", {}).get("Code") == "InvalidRange":
                        raise _PastTheEnd() from error
                    raise
                length = response["ContentLength"]
                offset = _range_start(response.get("ContentRange"))
                copied = 0
                for block in response["Body"].iter_chunks(CHUNK):
                    request.check_cancelled()
                    out.write(block)
                    copied += len(block)
                    # Flushed first: the daemon reads what progress names.
                    out.flush()
                    request.progress(copied, length, staged=(staged, offset))
        except _PastTheEnd:
            os.unlink(staged)
            return self._fetch_checked(identifier, version, byte_range, request)
        except BaseException as error:
            os.unlink(staged)
            if isinstance(error, Exception):
                failure = protocol_error(error)
                if isinstance(failure, Conflict):
                    # The version that is there now, for the daemon.
                    raise Conflict(str(failure), data={"version": self.item(identifier).content_version})
                raise failure
            raise
        return Fetched(path=staged, version=response["ETag"], offset=offset, length=length)

    def _fetch_checked(self, identifier, version, byte_range, request) -> Fetched:
        """``fetch`` after asking the object: for ranges one GET cannot say."""
        current = self.item(identifier)
        offset, length = self.fetch_range(current, version, byte_range)
        fd, staged = self.staging_file()
        try:
            with os.fdopen(fd, "wb") as out:
                if length > 0:
                    response = self._client.get_object(
                        Bucket=self.bucket,
                        Key=self._key(identifier),
                        Range=f"bytes={offset}-{offset + length - 1}",
                        IfMatch=current.content_version,
                    )
                    for block in response["Body"].iter_chunks(CHUNK):
                        request.check_cancelled()
                        out.write(block)
        except BaseException as error:
            os.unlink(staged)
            if isinstance(error, Exception):
                raise protocol_error(error)
            raise
        return Fetched(path=staged, version=current.content_version, offset=offset, length=length)

    def _thumbnail_key(self, identifier: str) -> str:
        return self.prefix + THUMBNAILS + self._key(identifier)[len(self.prefix) :] + ".png"

    def fetch_thumbnail(self, identifier, size, request):
        """The preview object beside the document, if the saving app left one
        (one GET of at most 64 KiB: the document itself is never read)."""
        if identifier == ROOT_ID or identifier.endswith("/"):
            return None
        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self._thumbnail_key(identifier))
        except botocore.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise protocol_error(error)
        except Exception as error:
            raise protocol_error(error)
        if answer.get("ContentLength", 0) > THUMBNAIL_LIMIT:
            return None
        data = answer["Body"].read(THUMBNAIL_LIMIT + 1)
        if len(data) > THUMBNAIL_LIMIT:
            return None
        fd, staged = self.staging_file()
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return Thumbnail(path=staged, length=len(data))

    def save_thumbnail(self, identifier, thumbnail_path, request) -> None:
        try:
            with open(thumbnail_path, "rb") as body:
                self._client.put_object(Bucket=self.bucket, Key=self._thumbnail_key(identifier), Body=body)
        except Exception as error:
            raise protocol_error(error)

    # -- writing -------------------------------------------------------------

    def _put(self, key: str, contents_path, condition: dict) -> None:
        if contents_path is not None and os.path.getsize(contents_path) > SINGLE_PUT_LIMIT:
            raise TooLarge("objects over 5 GiB need multipart uploads, not supported yet")
        if contents_path is None:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=b"", **condition)
            return
        with open(contents_path, "rb") as body:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=body, **condition)

    def create_item(self, parent, name, kind, mtime, mode, target, contents_path, request) -> Item:
        if parent != ROOT_ID and not parent.endswith("/"):
            self.item(parent)  # noSuchItem, or:
            raise InvalidParams(f"{parent!r} is not a folder")
        if kind == "symlink":
            raise NotSupported("S3 has no symbolic links")
        parent_key = self._key(parent)
        key = parent_key + name
        try:
            if parent != ROOT_ID and (not self._servable(parent_key) or not self._known_folder(parent_key)):
                raise NoSuchItem(f"no folder {parent!r}")
            # "x" and "x/" are different keys in S3; on a file system they
            # clash. A new file "x" is checked against the folders known
            # (no request); a new folder against the store (rare).
            if not self._folder_known_absent(key + "/") or (kind == "folder" and self._key_exists(key)):
                raise Exists(f"{name!r} exists")
            if kind == "folder":
                key += "/"
            self._put(key, contents_path if kind == "file" else None, {"IfNoneMatch": "*"})
        except Exception as error:
            raise protocol_error(error, conflict_means=Exists)
        if kind == "folder":
            self._remember_folder(key)
        return self.item(self._id(key))

    def modify_item(self, identifier, base_version, fields, contents_path, request) -> Item:
        unsupported = set(fields) - {"name", "parent"}
        if unsupported:
            raise NotSupported(f"S3 keeps no {', '.join(sorted(unsupported))}")
        current = self.item(identifier)  # noSuchItem
        if current.kind == "folder":
            if fields:
                raise NotSupported("renaming a folder would copy every object under it")
            if contents_path is not None:
                raise InvalidParams("a folder has no contents")
            return current
        # The base version is checked by the store (If-Match), not here: a
        # check here and a write after it would let a change slip between.
        base = base_version["content"]
        old_key = self._key(identifier)
        new_key = old_key
        if "name" in fields or "parent" in fields:
            parent = self.item(fields.get("parent", current.parent))
            if parent.kind != "folder":
                raise InvalidParams("the new parent is not a folder")
            new_key = self._key(parent.id) + fields.get("name", current.name)
        try:
            if new_key == old_key:
                if contents_path is not None:
                    self._put(old_key, contents_path, {"IfMatch": base})
                elif base != current.content_version:
                    raise Conflict("the item changed since the base version")
                return self.item(identifier)
            if self._key_exists(new_key) or self._folder_exists(new_key + "/"):
                raise Exists("the new name exists")
            if contents_path is not None:
                self._put(new_key, contents_path, {"IfNoneMatch": "*"})
            else:
                self._client.copy_object(
                    Bucket=self.bucket,
                    Key=new_key,
                    CopySource={"Bucket": self.bucket, "Key": old_key},
                    CopySourceIfMatch=base,
                )
            try:
                self._client.delete_object(Bucket=self.bucket, Key=old_key, IfMatch=base)
            except botocore.exceptions.ClientError as error:
                # The source changed meanwhile (not every store checks
                # CopySourceIfMatch): undo the copy, keep theirs.
                self._client.delete_object(Bucket=self.bucket, Key=new_key)
                raise protocol_error(error)
        except Exception as error:
            raise protocol_error(error)
        return self.item(self._id(new_key))

    def delete_item(self, identifier, base_version, request) -> None:
        if identifier == ROOT_ID:
            raise InvalidParams("the root is not deleted")
        current = self.item(identifier)  # noSuchItem
        key = self._key(identifier)
        try:
            if current.kind == "folder":
                listing = self._client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=2)
                if any(entry["Key"] != key for entry in listing.get("Contents", [])):
                    raise NotEmpty("the folder has items")
                self._client.delete_object(Bucket=self.bucket, Key=key)
                self._forget_folder(key)
                return
            # The store checks the base version (If-Match), as for modify.
            self._client.delete_object(Bucket=self.bucket, Key=key, IfMatch=base_version["content"])
        except Exception as error:
            raise protocol_error(error)


if __name__ == "__main__":
    run(S3Extension())
