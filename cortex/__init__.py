"""cortex: git-native memory for AI agents.

Agents append observations to a buffer; ``cortex run`` turns them into validated,
deduplicated markdown notes committed to git. ``Vault`` is the Python API the CLI
is a thin shell over; it is imported lazily so ``import cortex`` stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["Vault", "__version__"]


def __getattr__(name: str):
    if name == "Vault":
        from cortex.vault import Vault

        return Vault
    raise AttributeError(name)
