"""The built-in model catalog and config files on disk (requirement E1).

Each catalog file is an HF config.json with a `_tokenprobe` block: {"name": ..., "hf_id": ...,
"aliases": [...], "same_shape": [...], "source": ...}. `same_shape` lists fine-tunes and
re-releases published under other HF ids whose configs have the entry's shape, each with the
shape fields transcribed from its own published config and their source (tests check that they
equal the entry's); those ids resolve to the entry like aliases. An HF id of a known family that
is in neither list is refused (its config may differ): pass its config.json instead. A name
without an owner (`Qwen3-14B-FP8` for `Qwen/Qwen3-14B-FP8`) resolves when exactly one entry
lists an HF id of that repository name.

Every file is read through `tokenprobe.files.read_json` (Infinity accepted, as transformers
writes it for open bounds), so a binary, non-UTF-8, unreadable or NaN-holding file, a folder or
a FIFO is one SchemaError naming it; a config that does not describe a model tokenprobe can price
is one SchemaError naming the file, the field and the value.
"""

from __future__ import annotations

import functools
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError, UnknownModelError
from tokenprobe.files import names_a_file, read_json
from tokenprobe.model.hf_config import from_hf_config
from tokenprobe.model.spec import ModelSpec

CATALOG_DIR = Path(__file__).parent.parent / "catalog" / "models"


def _read_config(file: Path) -> dict[str, Any]:
    # Infinity is legitimate in an HF config (Nemotron-H's time_step_limit [0.0, Infinity]);
    # the readers check every value they use, so an infinite width is still refused by name
    cfg = read_json(file, infinity=True)
    if not isinstance(cfg, dict):
        raise SchemaError(str(file), "a config.json must hold a JSON object")
    return cfg


def _spec_from_file(file: Path, cfg: dict[str, Any], name: str) -> ModelSpec:
    try:
        return from_hf_config(cfg, name=name)
    except SchemaError:
        raise
    except ConfigError as exc:
        raise SchemaError(str(file), f"{exc.field}={exc.value!r}: {exc.allowed}") from None


def load_config_file(path: str | os.PathLike[str], name: str = "") -> ModelSpec:
    """A config.json file, or a folder holding one."""
    path = Path(path)
    try:
        is_dir = path.is_dir()
    except OSError:  # e.g. a name too long for the file system; read_json names the problem
        is_dir = False
    file = path / "config.json" if is_dir else path
    return _spec_from_file(file, _read_config(file), name or (path.name if is_dir else path.stem))


def _meta(file: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = cfg.get("_tokenprobe", {})
    aliases = meta.get("aliases", []) if isinstance(meta, dict) else None
    if not isinstance(aliases, list):
        raise SchemaError(str(file), "_tokenprobe must be an object with a list of aliases")
    if not all(isinstance(t, str) for t in [meta.get("name", ""), meta.get("hf_id", ""), *aliases]):
        raise SchemaError(str(file), "_tokenprobe name, hf_id and aliases must be strings")
    records = meta.get("same_shape", [])
    if not isinstance(records, list) or not all(
        isinstance(r, dict)
        and isinstance(r.get("hf_id"), str)
        and isinstance(r.get("source"), str)
        and isinstance(r.get("shape"), dict)
        for r in records
    ):
        raise SchemaError(
            str(file), "_tokenprobe same_shape must be a list of {hf_id, source, shape} objects"
        )
    return meta


def _ids(meta: dict[str, Any]) -> list[str]:
    """The HF ids and aliases an entry answers to (besides its name)."""
    same = [r["hf_id"] for r in meta.get("same_shape", [])]
    return [meta.get("hf_id", ""), *meta.get("aliases", []), *same]


@functools.cache
def _catalog_index() -> dict[str, Path]:
    """Catalog name, HF ids and aliases (lower case) -> file."""
    index: dict[str, Path] = {}
    for file in sorted(CATALOG_DIR.glob("*.json")):
        meta = _meta(file, _read_config(file))
        for key in [file.stem, meta.get("name", ""), *_ids(meta)]:
            if key:
                index[key.lower()] = file
    return index


@functools.cache
def _repository_index() -> dict[str, Path]:
    """The repository names of the HF ids ("qwen3-14b-fp8" for "Qwen/Qwen3-14B-FP8") that name
    one entry only and are not a catalog key themselves."""
    index = _catalog_index()
    repos: dict[str, set[Path]] = {}
    for key, file in index.items():
        if "/" in key:
            repos.setdefault(key.split("/", 1)[1], set()).add(file)
    return {
        repo: next(iter(files))
        for repo, files in repos.items()
        if len(files) == 1 and repo not in index
    }


def catalog_names() -> list[str]:
    return sorted({p.stem for p in _catalog_index().values()})


@functools.cache
def _load_catalog_file(file: Path) -> ModelSpec:
    cfg = _read_config(file)
    meta = _meta(file, cfg)
    spec = _spec_from_file(file, cfg, file.stem)
    aliases = [*meta.get("aliases", ()), *(r["hf_id"] for r in meta.get("same_shape", ()))]
    return replace(spec, hf_id=meta.get("hf_id", spec.hf_id), aliases=tuple(aliases))


def get_model(name_or_path: str | Path) -> ModelSpec:
    """A catalog name (`llama-3.1-8b`), an HF id (`meta-llama/Llama-3.1-8B-Instruct`) or a path."""
    if isinstance(name_or_path, Path):
        return load_config_file(name_or_path)
    if not isinstance(name_or_path, str):
        raise ConfigError("model", name_or_path, "a catalog name, HF id or config path")
    key = name_or_path.strip().lower()
    if not key:
        raise UnknownModelError(name_or_path, catalog_names())
    index = _catalog_index()
    if key in index:
        return _load_catalog_file(index[key])
    path = Path(name_or_path).expanduser()
    if names_a_file(path):  # False for a name too long for a path or with a NUL byte
        return load_config_file(path)
    repositories = _repository_index()  # after paths: a local folder of that name is the user's
    if key in repositories:
        return _load_catalog_file(repositories[key])
    # close names among everything that resolves: an HF id's typo is closest to an HF id
    raise UnknownModelError(name_or_path, sorted(index))
