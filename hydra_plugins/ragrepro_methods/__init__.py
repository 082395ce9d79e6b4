"""Hydra searches each registered method's conf folder (its profile's `conf_dir`,
ragrepro/methods.py) after conf/: a plug-in method's experiments, groups and report specs
compose like the built-in ones, for `ragrepro`, `ragrepro plan` and the rehearsal alike.
Hydra discovers search-path plugins only under the `hydra_plugins` namespace, hence here."""
from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from ragrepro.methods import registered


class MethodConfSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for profile in registered():
            if profile.conf_dir is not None:
                search_path.append(provider=f"ragrepro-method-{profile.name}",
                                   path=f"file://{profile.conf_dir}")
