"""Named deployment configs (budgets/configs/NAME.toml): name -> path, the list, and loading by name or path.

The floor loads a config from a path it is given; naming is tracekit's catalogue, kept here beside the files.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tracekit.files import short
from tracekit.floor import ConfigError, DeploymentConfig, config_names
from tracekit.floor import load_config as load_config_file


def configs_dir() -> Path:
    """The folder of the named configs (package data of tracekit.budgets)."""
    return Path(str(resources.files("tracekit.budgets") / "configs"))


def list_configs() -> list[str]:
    """Names of the shipped configs, sorted."""
    return config_names(configs_dir())


def config_path(name_or_path: str) -> Path:
    """The TOML file of a named config, or the path itself when it names a file (a .toml or an existing file)."""
    path = Path(name_or_path)
    known = ", ".join(list_configs()) or "none installed"
    shown = short(name_or_path, 80)
    try:
        if name_or_path.endswith(".toml") or path.is_file():
            return path
        entry = configs_dir() / f"{name_or_path}.toml"
        found = entry.is_file()
    except OSError as exc:  # a name too long for a path, a folder that cannot be read
        raise ConfigError(f"--config '{shown}': no readable file ({exc.strerror}) and no named config; use one "
                          f"of: {known} (or a path to a .toml file)") from None
    if not found:
        raise ConfigError(f"unknown config '{shown}'; use one of: {known} (or a path to a .toml file)")
    return entry


def load_config(name_or_path: str, overrides: dict[str, str] | None = None) -> DeploymentConfig:
    """A named config or a TOML path (whose `extends` may name a named config), with --set overrides."""
    return load_config_file(config_path(name_or_path), overrides, resolve=config_path)
