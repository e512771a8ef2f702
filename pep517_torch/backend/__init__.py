"""The PEP 517 backend's sequencing, under the thin hooks of ``buildapi.py`` and the CLI:
``stages.py`` and ``pipeline.py`` (config → compile core → distribution), ``discovery.py``
(what a build finds on this machine), the no-op cache (``noop_cache.py`` replays,
``noop_record.py`` records), and an editable install's glue (``editable_install.py``,
``editable_rebuild.py``)."""
