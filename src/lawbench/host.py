"""What a plugin's own sub-command (``lawbench_commands``) reads of the lawbench it runs in: the
registry of laws, profiles and catalogues, the anchors, lawbench's TOML reader, and the rule a
[census] table is judged by. A law's methods never need these: they are handed what they need."""
from __future__ import annotations

from typing import TYPE_CHECKING

from lawbench._surface import lazy

_EXPORTS = {
    "get_registry": "lawbench.core.laws.registry",
    "plugin_profiles": "lawbench.core.hardware.profiles",
    "load_all": "lawbench.core.claims.loading",
    "read_toml": "lawbench.core.toml_read",
    "CensusSpec": "lawbench.core.models",
    "census_problems": "lawbench.core.record.census",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

if TYPE_CHECKING:
    from lawbench.core.record.census import census_problems  # noqa: F401
    from lawbench.core.hardware.profiles import plugin_profiles  # noqa: F401
    from lawbench.core.claims.loading import load_all  # noqa: F401
    from lawbench.core.toml_read import read_toml  # noqa: F401
    from lawbench.core.models import CensusSpec  # noqa: F401
    from lawbench.core.laws.registry import get_registry  # noqa: F401
