"""The package's version: a leaf module every layer may import (``pep517_torch/__init__.py``
re-exports it; pyproject.toml's dynamic version is read from this file)."""

__version__ = "0.1.0"
