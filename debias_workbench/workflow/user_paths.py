"""The user's files and folders a config names (sources, weights, official test folders, style
folders, models), checked before the job graph is built.

A schema key that holds such a path carries the annotation `x-path: file` or `x-path: folder`
beside its description (config/schema.yaml and the dataset families' sections); a validator
extended with that one keyword walks the config through the schema's own `$ref`s and conditions,
so a key is checked wherever the schema places it (an experiment's or a grid's `training.pretrained`
as much as the top-level one). A path that is missing stops the workflow before Snakemake builds
its graph: were it left to the graph, the job reading it could not be built, and Snakemake would
take that job's output, if an earlier run left one on disk, as a source file ("Nothing to be done"
over another config's results).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from .schema import load_schema

#: the schema annotation of a key that names one of the user's files or folders ("file" or "folder")
PATH_KEYWORD = "x-path"
#: the schema annotation of a key read only when a sibling key holds one of some values
#: ({sibling: [values]}): a source's `in9_folder` section when its `kind` is in9_folder, a style folder
#: when the styles' `kind` is folder or flat; a path under a key not read is not checked
WHEN_KEYWORD = "x-read-when"


def _exists(validator: Any, kind: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """`x-path`: the value (null: not used) names an existing `kind` ("file" or "folder")."""
    if not isinstance(instance, str):
        return
    path = Path(os.path.abspath(os.path.expanduser(instance))) if instance else None
    if path is not None and (path.is_dir() if kind == "folder" else path.is_file()):
        return
    where = f"{instance!r}" if path is None else instance if str(path) == instance else f"{instance} ({path})"
    state = "is empty" if path is None else "does not exist" if not path.exists() else f"is not a {kind}"
    wanted = str(schema.get("description", "")).replace("\n", " ")
    yield ValidationError(
        f"{where} {state}. Place there the {kind} this key names: {wanted}. Or set the key to where it is."
    )


_PROPERTIES = jsonschema.Draft202012Validator.VALIDATORS["properties"]


def _read(properties: dict[str, Any], instance: dict[str, Any]) -> dict[str, Any]:
    """The `properties` the config reads: those whose `x-read-when` its siblings meet."""
    return {
        k: v
        for k, v in properties.items()
        if all(
            instance.get(sibling, properties.get(sibling, {}).get("default")) in values
            for sibling, values in v.get(WHEN_KEYWORD, {}).items()
        )
    }


def _read_properties(
    validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """`properties`, leaving out the keys the config does not read (`x-read-when`): a paper config's
    alternative source (ImageNet beside the IN-9 folder) need not exist."""
    if isinstance(instance, dict):
        properties = _read(properties, instance)
    yield from _PROPERTIES(validator, properties, instance, schema)


def _named(validator: Any, kind: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """`x-path`, reporting every path named and read (its message: the path, `~` expanded)."""
    if isinstance(instance, str):
        yield ValidationError(os.path.expanduser(instance))


def _any_path_key(validator: Any, kind: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """`x-path`, reporting every path key read, null ones too."""
    yield ValidationError("path key")


def _unread_properties(
    validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """`properties` reporting each key of the instance that `x-read-when` leaves unread (an error
    at that key), then descending into the keys read."""
    if isinstance(instance, dict):
        read = _read(properties, instance)
        for key in sorted(set(properties) - set(read)):
            if key in instance:
                yield ValidationError("not read", path=[key], validator=WHEN_KEYWORD)
        properties = read
    yield from _PROPERTIES(validator, properties, instance, schema)


@cache
def _unread_validator() -> jsonschema.protocols.Validator:
    extended = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"properties": _unread_properties})
    return extended(load_schema())


def unread_keys(config: dict[str, Any]) -> set[str]:
    """Dotted keys of `config` its `x-read-when` conditions leave unread (an alternative source's
    section, a style folder of embedded styles)."""
    errors = _keyword_errors(_unread_validator().iter_errors(config), WHEN_KEYWORD)
    return {".".join(map(str, e.absolute_path)) for e in errors}


@cache
def _validator(mode: str) -> jsonschema.protocols.Validator:
    """The schema's validator with `x-path` checking the paths ("check"), reporting each one named
    ("named") or each key that may hold one ("keys")."""
    keyword = {"check": _exists, "named": _named, "keys": _any_path_key}[mode]
    extended = jsonschema.validators.extend(
        jsonschema.Draft202012Validator, {PATH_KEYWORD: keyword, "properties": _read_properties}
    )
    return extended(load_schema())


def _keyword_errors(errors: Iterator[ValidationError], keyword: str) -> Iterator[ValidationError]:
    """The errors of `keyword` among `errors`, those inside a failed `oneOf` / `anyOf` branch included."""
    for error in errors:
        if error.validator == keyword:
            yield error
        yield from _keyword_errors(iter(error.context or ()), keyword)


def _path_errors(errors: Iterator[ValidationError]) -> Iterator[ValidationError]:
    """The `x-path` errors among `errors`."""
    return _keyword_errors(errors, PATH_KEYWORD)


def missing_paths(config: dict[str, Any]) -> list[str]:
    """'<dotted key>: <path> does not exist. Place there ...' for every file or folder `config` names
    that is not there (sorted by key; [] when all are). `config` is a valid config (checked first)."""
    errors = _path_errors(_validator("check").iter_errors(config))
    return sorted({f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors})


def named_paths(config: dict[str, Any]) -> dict[str, str]:
    """{dotted key: path} of every file or folder `config` names and reads (what `missing_paths` checks)."""
    return {
        ".".join(map(str, e.absolute_path)): e.message for e in _path_errors(_validator("named").iter_errors(config))
    }


def path_keys(config: dict[str, Any]) -> set[str]:
    """Dotted keys of `config` that name (or, null, could name) one of the user's files or folders."""
    return {".".join(map(str, e.absolute_path)) for e in _path_errors(_validator("keys").iter_errors(config))}
