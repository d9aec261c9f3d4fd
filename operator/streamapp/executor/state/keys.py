"""Blob keys, shared by every store: a key is a folder and a name joined by `/`, either part may be empty.

Its own module so that the S3 store and the store interface both use it without importing each other.
"""


def join(folder: str, name: str) -> str:
    """`folder/name`, where either may be empty (the root)."""
    return f"{folder}/{name}" if folder and name else folder or name
