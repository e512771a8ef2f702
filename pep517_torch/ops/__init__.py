"""What a build's operators are: listed in a child process with the build's torch, judged for
torch.compile, checked with opcheck (``listing.py``, ``child.py``, ``table.py``,
``verdicts.py``, ``render.py``)."""
