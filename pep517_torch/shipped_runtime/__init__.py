"""The runtime shipped into every editable install, shared with the compile core and the JIT.

Standard library only, relative imports only, nothing imported here: an editable wheel ships
this package as files inside its hook package (``_pep517_torch_editable_<name>/runtime/``),
and the hook, which runs where pep517_torch may not be installed, imports a module of it only
when a check or a rebuild needs one (nothing more at interpreter start). Every face runs and
follows ninja, locks a build directory, words a line for the user and reads the environment
through these modules.
"""
