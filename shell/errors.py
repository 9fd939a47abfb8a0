"""Exceptions the CLI turns into one-line messages and exit codes."""


class ConfigError(ValueError):
    """Bad input found at start-up: config, flags, files, spaces (exit code 2)."""


class TrainingError(RuntimeError):
    """A failure during training: non-finite loss, an env that raises (exit code 1)."""


class ExportError(RuntimeError):
    """An export that failed: the exporter refused the policy, or the written file does not act as the
    policy does (exit code 1)."""


def first_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of an exception's message ("" for none), for one-line errors and warnings.

    With ``with_type``: ``Type: first line`` (the type's name alone for an empty message).
    """
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if not with_type:
        return line
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def space_text(space: object, limit: int = 72) -> str:
    """A gymnasium space as a one-line message names it: its ``str``, or where that is longer than ``limit`` (a
    Box with bounds per component, a nest of spaces) a summary, ``Box(shape (3, 4), float32, bounds per
    component)`` or ``Tuple of 3 spaces``, never longer than ``limit`` (for a space of no fixed shape, cut with
    ``...``), so that the message stays one short line: a message that names two spaces gives each a smaller
    ``limit`` (tests/fuzz/test_found.py checks every such message's longest line)."""
    text = " ".join(str(space).split())
    if len(text) <= limit:
        return text
    name = type(space).__name__
    parts = getattr(space, "spaces", None)
    if parts is not None:  # a Dict names its keys where they fit in the limit too
        summary = f"{name} of {len(parts)} spaces"
        keys = f" ({', '.join(map(str, parts))})" if isinstance(parts, dict) else ""
        return summary + keys if len(summary + keys) <= limit else summary
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    if shape is None or dtype is None:  # a space of no fixed shape (Text, Graph, a custom one): its text, cut
        return clipped(text if text.startswith(name) else f"{name}: {text}", limit)
    summary = f"{name}(shape {tuple(shape)}, {dtype}, bounds per component)"
    return summary if len(summary) <= limit else clipped(f"{name}(shape {tuple(shape)}, {dtype})", limit)


def clipped(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...`` (a user's long value quoted in a message)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
