"""What a built library needs and promises: the ELF it links (``elf.py``), the CPython limited
API (``limited_api.py``), LibTorch's stable ABI (``stable_abi.py``), the Linux platform tags a wheel may carry
(``platform_tags.py``). Leaves every layer may use."""
