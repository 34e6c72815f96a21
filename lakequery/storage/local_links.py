"""Symbolic links under a local table root, and which of them lead out of it.

Rule (issue 18): the table's own files must resolve inside the table root. That is every
file the log names by a relative path (data files, change-data files), every ``u``
deletion vector file, every file listed in ``_delta_log``, and every directory between
the root and one of those, including ``_delta_log`` itself. A symbolic link among them
whose target (every link resolved) is inside the resolved root is followed, so a table
may link one partition directory to another or sit behind a linked root; a link whose
target is outside is refused with :class:`~lakequery.errors.InvalidPathError` naming the
link and its target. Writers check the directories they write into the same way (the
final name is never followed: commits are created with ``os.link`` and replaced with
``os.replace``, which act on the link itself), and VACUUM's listing never descends into
a linked directory nor returns a link (:mod:`lakequery.commands.listing`), so it deletes
nothing outside the root.

Not checked: absolute locations the log names (a shallow clone's files, ``p`` deletion
vectors). They are outside the root by design, visible in the log, and read as named
(:mod:`lakequery.protocol.file_locations`). Links that nothing refers to (a stray link
in a partition directory) are left alone, except that in a directory of ``u`` deletion
vectors any link named like a DV file counts as one (the log names DV files by an encoded
UUID, not by their file name). The check is made when the files are planned,
not at each open: a link swapped in afterwards by another process is not seen.

Cost: the root is resolved once per storage object; the check runs when files enter a
snapshot (a full replay, or the files an incremental update adds), not per scan. Where
directories hold many of the files (a flat table), each directory holding files (and each
between it and the root) is listed once with ``os.scandir``, whose entries say whether
they are links without a ``stat`` (the directory entry's type): no call per file. Where
they hold few (below :data:`FILES_PER_LISTING` per directory: partitioned tables, an
update adding a few files), one ``lstat`` per file is cheaper than listing; their
directories are seen in the listing of a parent that holds many of them (the partition
directories under the root) and get one ``lstat`` each otherwise.
Only the links found are resolved. Directories on a write path or a listed directory cost
one ``lstat`` per path component below the root. On 10,000 files the check costs about
a fifth of the snapshot load or less (``benchmarks/RESULTS.md``, section 11).

Example:
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> os.mkdir(os.path.join(root, "a=1"))
    >>> os.symlink("a=1", os.path.join(root, "a=2"))      # inside the root: followed
    >>> os.symlink("/", os.path.join(root, "a=3"))        # outside: refused
    >>> open(os.path.join(root, "a=1", "f.parquet"), "w").close()
    >>> import pyarrow as pa
    >>> LinkGuard(root).check_relative(pa.array(["a=2/f.parquet"]))  # every file found
    True
    >>> LinkGuard(root).check_relative(pa.array(["a=3/f.parquet"]))
    Traceback (most recent call last):
    ...
    lakequery.errors.InvalidPathError: refusing path '.../a=3': a symbolic link leads out of the table root (to /)
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from lakequery.cached import cached_property
from lakequery.errors import InvalidPathError

if TYPE_CHECKING:
    import pyarrow as pa

#: The name of a ``u`` deletion vector file (digest §11.3).
_DV_NAME = re.compile(r"deletion_vector_[0-9a-f-]{36}\.bin")

#: Below this many files per directory, files are checked with one ``lstat`` each rather
#: than by listing their directories (measured: ``benchmarks/bench_links.py``).
FILES_PER_LISTING = 8

#: Files whose directories are found per batch (bounds the copies the split makes).
_PARENT_BATCH = 1 << 12


def parent_directories(files: Any) -> set[str]:
    """The directory of each relative path (the part before its last ``/``; a path in the
    root has none), vectorised for long lists and as Python strings for short ones
    (:data:`~lakequery.arrow_kernels.FEW_ROWS`: no kernel call). Nulls are skipped."""
    import pyarrow as pa

    from lakequery import arrow_kernels as pc

    if len(files) <= pc.FEW_ROWS:
        return {p.rpartition("/")[0] for p in files.to_pylist() if p is not None and "/" in p}
    # Python lists, not pa.array of Python values: pyarrow's first conversion of a Python
    # value imports pandas (0.2-0.4 s of a fresh process, see test_lazy_import)
    if files.null_count:
        files = pc.drop_null(files)
    parents: set[str] = set()
    # the copies go to malloc, which hands them back: Arrow's pool would keep them
    # resident, raising the process's peak memory after every snapshot load
    pool = pa.system_memory_pool()
    for start in range(0, len(files), _PARENT_BATCH):
        # split once at the last "/", without a regex; list_slice, not list_element (a
        # Python index would make pyarrow import pandas); in batches, so the copies stay
        # small next to the snapshot
        part: Any = files.slice(start, _PARENT_BATCH)
        split = pc.split_pattern(part, "/", max_splits=1, reverse=True, memory_pool=pool)
        first = pc.list_flatten(pc.list_slice(split, 0, 1, memory_pool=pool))
        parents.update(pc.unique(pc.filter(first, pc.not_equal(first, part))).to_pylist())
    return parents


def distinct_paths(files: Any) -> list[str]:
    """The distinct non-null paths of ``files`` (as :func:`parent_directories`: Python
    strings for a short list, a kernel for a long one)."""
    from lakequery import arrow_kernels as pc

    if len(files) <= pc.FEW_ROWS:
        return list(dict.fromkeys(p for p in files.to_pylist() if p is not None))
    return cast("list[str]", pc.unique(pc.drop_null(files)).to_pylist())


class LinkGuard:
    """Checks paths under one local table root (an absolute OS path) for links out of it."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"

    @cached_property
    def resolved_root(self) -> str:
        """The root with every link resolved (computed once)."""
        return os.path.realpath(self.root)

    def _inside(self, real: str) -> bool:
        base = self.resolved_root
        return real == base or real.startswith(base if base.endswith("/") else base + "/")

    def _native(self, relative: str) -> str:
        return f"{self.root}/{relative}" if relative else self.root

    def relative(self, native: str) -> str:
        """``native`` relative to the root (textually); ``""`` for the root itself or a
        path outside it."""
        base = self.root if self.root.endswith("/") else self.root + "/"
        return native[len(base) :].strip("/") if native.startswith(base) else ""

    def refuse_if_escaping(self, relative: str) -> None:
        """Refuses ``relative`` (a path under the root, known to be a link) if it resolves
        outside the resolved root."""
        native = self._native(relative)
        real = os.path.realpath(native)
        if not self._inside(real):
            raise InvalidPathError(
                native, f"a symbolic link leads out of the table root (to {real})"
            )

    def check_directory(self, native_dir: str) -> None:
        """Refuses ``native_dir`` (a directory at or below the root, existing or not) when a
        link between the root and it leads outside; one ``lstat`` per component."""
        relative = self.relative(native_dir)
        if not relative:
            return  # the root itself, or a directory outside it (not this table's)
        parts = relative.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            try:
                mode = os.lstat(self._native(prefix)).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return  # the rest does not exist yet: whoever creates it makes no link
            if stat.S_ISLNK(mode):
                self.refuse_if_escaping(prefix)

    def links_in(self, directories: Iterable[str]) -> list[str]:
        """The links (relative paths) directly inside each relative directory; one
        ``scandir`` per directory, no ``stat`` per entry."""
        found: list[str] = []
        for directory in directories:
            try:
                with os.scandir(self._native(directory)) as entries:
                    for entry in entries:
                        if entry.is_symlink():
                            found.append(f"{directory}/{entry.name}" if directory else entry.name)
            except (FileNotFoundError, NotADirectoryError):
                continue  # a missing directory: its files are reported missing when read
        return found

    def check_relative(
        self,
        files: pa.Array[Any] | pa.ChunkedArray[Any],
        dv_dirs: pa.Array[Any] | pa.ChunkedArray[Any] | None = None,
    ) -> bool:
        """Refuses the table's files that are (or lie below) a link leading outside.

        Args:
            files: decoded paths relative to the root (strings; repeats allowed).
            dv_dirs: relative directories of ``u`` deletion vector files (their prefixes);
                in them any link named like a DV file counts as one the log refers to.

        Returns:
            True when every file was found by its own ``lstat`` (few files per directory),
            False when the directories were listed instead or a file is missing.
        """
        import pyarrow as pa

        from lakequery import arrow_kernels as pc

        parents = parent_directories(files)
        dv_parents = [] if dv_dirs is None else pc.unique(dv_dirs).to_pylist()
        dv_set = {str(d).strip("/") for d in dv_parents if d is not None}
        directories = {""}
        for path in {str(p) for p in parents if p is not None} | dv_set:
            while path and path not in directories:
                directories.add(path)
                path = path.rpartition("/")[0]
        every_file_found = False
        if len(files) < FILES_PER_LISTING * len(directories):
            # few files per directory (a partitioned table, an update adding a few files):
            # one lstat per file is cheaper than listing every directory; the directories
            # are seen in their parents' listings where a parent holds many of them (the
            # partition directories under the root), else with one lstat each
            siblings: dict[str, list[str]] = {}
            for d in directories - {""}:
                siblings.setdefault(d.rpartition("/")[0], []).append(d)
            listed = sorted(p for p, kids in siblings.items() if len(kids) >= FILES_PER_LISTING)
            for link in self.links_in(listed):
                if link in directories:
                    self.refuse_if_escaping(link)
            single = [
                d for p, kids in siblings.items() if len(kids) < FILES_PER_LISTING for d in kids
            ]
            names = distinct_paths(files)
            every_file_found = self._refuse_escaping_links([*single, *names])
            scanned, candidates = sorted(dv_set), set()  # DV files are known by their names
        else:
            scanned, candidates = sorted(directories), directories
        links = self.links_in(scanned)
        if not links:
            return every_file_found
        if isinstance(files, pa.ChunkedArray):
            files = files.combine_chunks()
        named = pc.is_in(pa.array(links, pa.string()), value_set=files).to_pylist()
        for link, is_file in zip(links, named, strict=True):
            parent, _, name = link.rpartition("/")
            is_dv = parent in dv_set and _DV_NAME.fullmatch(name) is not None
            if is_file or is_dv or link in candidates:
                self.refuse_if_escaping(link)
        return every_file_found

    def _refuse_escaping_links(self, relatives: Iterable[str]) -> bool:
        """One ``lstat`` per path (relative, never the root); the links among them are
        refused when they lead out of the root. True when every path was found."""
        lstat, is_link, base = os.lstat, stat.S_ISLNK, self.root.rstrip("/") + "/"
        found = True
        for relative in relatives:
            try:
                mode = lstat(base + relative).st_mode
            except (FileNotFoundError, NotADirectoryError):
                found = False  # missing: reported as such when read
                continue
            if is_link(mode):
                self.refuse_if_escaping(relative)
                found = found and os.path.exists(base + relative)  # a link inside may dangle
        return found


__all__ = ["LinkGuard"]
