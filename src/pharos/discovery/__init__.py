"""Desired backends (static list; Docker labels later) and their log feeds (spec §10)."""

from pharos.discovery.feeds import open_log_feed
from pharos.discovery.filefeed import FileFeed, file_feed_path, open_file_feed
from pharos.discovery.static import merge_specs, static_spec

__all__ = [
    "FileFeed",
    "file_feed_path",
    "merge_specs",
    "open_file_feed",
    "open_log_feed",
    "static_spec",
]
