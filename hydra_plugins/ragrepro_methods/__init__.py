"""Hydra searches each registered method's conf folder (its profile's `conf_dir`,
ragrepro/methods.py) after conf/: the built-in methods' folders (ralm/conf, riches/conf,
filco/conf) and a plug-in's alike, so their experiments, groups and report specs compose for
`ragrepro`, `ragrepro plan` and the rehearsal; conf/ itself keeps only what they share.
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
