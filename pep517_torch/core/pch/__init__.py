"""Precompiled headers: which one each TU uses, the machine-wide cache of them, an entry's seal and health, and the one a wheel build leaves behind."""
