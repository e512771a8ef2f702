"""After linking: the import check an artifact carries (its C source, its object, the post-link patch of the ELF file that makes it run first) and the stable-ABI audit of what an artifact needs."""
