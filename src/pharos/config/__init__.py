"""Config (spec §10): the YAML file parsed into frozen, typed values."""

from pharos.config.load import ConfigError, load_config, parse_config
from pharos.config.own_probes import library_probe_names
from pharos.config.reload import RESTART_SECTIONS, load_for_reload, restart_needed
from pharos.config.rules import log_feed_problem, url_problem
from pharos.config.schema import (
    BYTES_PER_GB,
    Backend,
    Config,
    Drain,
    Key,
    Limits,
    LogProbe,
    OwnProbe,
    Peers,
    Policy,
    PromProbe,
    Usage,
)
from pharos.config.values import Duration, HostPort, parse_duration_s
from pharos.config.zones import host_zone, usage_zone
from pharos.engine.logline import LOG_SIGNALS

__all__ = [
    "BYTES_PER_GB",
    "LOG_SIGNALS",
    "RESTART_SECTIONS",
    "Backend",
    "Config",
    "ConfigError",
    "Drain",
    "Duration",
    "HostPort",
    "Key",
    "Limits",
    "LogProbe",
    "OwnProbe",
    "Peers",
    "Policy",
    "PromProbe",
    "Usage",
    "host_zone",
    "library_probe_names",
    "load_config",
    "load_for_reload",
    "log_feed_problem",
    "parse_config",
    "parse_duration_s",
    "restart_needed",
    "url_problem",
    "usage_zone",
]
