"""Many wheels of one project: `wheel --python PY ...` (``interpreters.py``: one wheel per
interpreter given, each built in its own process with what ``staging.py`` gives it) and `matrix`
(``command.py``: the cells `[tool.torch-ext.matrix]` declares, each built in an environment uv
makes (``environments.py``, ``uv.py``) and its wheel tested in a fresh one (``cell_test.py``))."""
