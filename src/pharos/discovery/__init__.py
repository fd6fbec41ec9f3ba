"""Every source of desired backends (static config, zero-config probing; Docker labels
next), how they combine, and the backends' log feeds (spec §10)."""

from pharos.discovery.combine import BackendSources, merge_specs
from pharos.discovery.feeds import open_log_feed
from pharos.discovery.filefeed import FileFeed, file_feed_path, open_file_feed
from pharos.discovery.static import backend_spec, backend_specs, own_probes

__all__ = [
    "BackendSources",
    "FileFeed",
    "backend_spec",
    "backend_specs",
    "file_feed_path",
    "merge_specs",
    "open_file_feed",
    "open_log_feed",
    "own_probes",
]
