"""The packaging layer: wheel and sdist writers, editable installs, METADATA, tags, file lists.

It knows files, tags and metadata only; compilers, ninja and our TOML settings stay above it,
and everything it needs arrives as plain parameters.
"""
